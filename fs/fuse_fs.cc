// SPDX-License-Identifier: Apache-2.0
// The mount: the FUSE session over a Pool, its lifecycle (Serve), and the
// table of operations (fs/ops.h) with the few that concern the whole mount.
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "fs/fuse_fs.h"

#include "fs/fuse_ring.h"
#include "fs/evictor.h"
#include "fs/frontend.h"
#include "fs/metrics.h"
#include "fs/metrics_writer.h"
#include "fs/ops.h"
#include "fs/session_loop.h"

namespace stripefs::fs {
namespace {

void OpInit(void* userdata, fuse_conn_info* conn) {
  conn->max_write = 1 << 20;
  conn->max_readahead = 1 << 20;
  // Room for readahead and async direct I/O to keep several requests in flight.
  conn->max_background = 64;
  conn->congestion_threshold = 48;
  // Adaptive readdirplus: the kernel asks for attributes with the names only
  // when it sees them used (ls -l, find -type), so a plain listing stays cheap.
  if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
  if (conn->capable & FUSE_CAP_READDIRPLUS_AUTO) conn->want |= FUSE_CAP_READDIRPLUS_AUTO;
  // File handles that outlive the kernel's inode cache (open_by_handle_at,
  // NFS): the kernel looks up "." and ".." of a node id (OpLookup).
  if (conn->capable & FUSE_CAP_EXPORT_SUPPORT) conn->want |= FUSE_CAP_EXPORT_SUPPORT;
}

void OpDestroy(void* userdata) {
  auto* f = static_cast<Frontend*>(userdata);
  Status s = f->store().sync();
  if (!s.ok()) spdlog::error("final flush: {}", s.message());
}

void OpStatfs(fuse_req_t req, fuse_ino_t) {
  Pool& p = F(req)->pool();
  struct statvfs st {};
  st.f_bsize = meta::kBlockSize;
  st.f_frsize = meta::kBlockSize;
  // Data at the pool's default replica count, not raw bytes (Pool::usable_space).
  const Pool::UsableSpace usable = p.usable_space();
  st.f_blocks = usable.capacity / meta::kBlockSize;
  st.f_bfree = st.f_bavail = usable.free / meta::kBlockSize;
  // Files are limited by the metadata file system: about 1 KiB of RocksDB
  // data per file (name, inode, one chunk record), above the reserve.
  constexpr uint64_t kMetadataPerFile = 1024;
  auto meta = p.metadata_space();
  const uint64_t room = meta.ok() && meta->free > meta->reserve ? (meta->free - meta->reserve) / kMetadataPerFile : 0;
  st.f_ffree = st.f_favail = std::min<uint64_t>(room, (1ull << 32) - 1);
  st.f_files = st.f_ffree + (meta.ok() ? meta->used / kMetadataPerFile : 0);
  st.f_namemax = meta::kNameMax;
  fuse_reply_statfs(req, &st);
}

fuse_lowlevel_ops MakeOps() {
  fuse_lowlevel_ops ops{};
  ops.init = OpInit;
  ops.destroy = OpDestroy;
  ops.lookup = OpLookup;
  ops.getattr = OpGetattr;
  ops.setattr = OpSetattr;
  ops.readlink = OpReadlink;
  ops.mknod = OpMknod;
  ops.mkdir = OpMkdir;
  ops.symlink = OpSymlink;
  ops.link = OpLink;
  ops.unlink = OpUnlink;
  ops.rmdir = OpRmdir;
  ops.rename = OpRename;
  ops.open = OpOpen;
  ops.create = OpCreate;
  ops.read = OpRead;
  ops.write = OpWrite;
  ops.flush = OpFlush;
  ops.fallocate = OpFallocate;
  ops.lseek = OpLseek;
  ops.release = OpRelease;
  ops.fsync = OpFsync;
  ops.opendir = OpOpendir;
  ops.readdir = OpReaddir;
  ops.readdirplus = OpReaddirplus;
  ops.releasedir = OpReleasedir;
  ops.fsyncdir = OpFsyncdir;
  ops.statfs = OpStatfs;
  ops.setxattr = OpSetxattr;
  ops.getxattr = OpGetxattr;
  ops.listxattr = OpListxattr;
  ops.removexattr = OpRemovexattr;
  return ops;
}

}  // namespace

Status Serve(Pool* pool, const MountOptions& options,
             const std::function<std::shared_ptr<void>(const MountNotices&)>& on_ready) {
  Frontend frontend(pool, options.atime, options.reader);
  static const fuse_lowlevel_ops ops = MakeOps();

  // The mount's source is the metadata directory as an fstab line names it,
  // so mount -a sees the line mounted and skips it. Commas and backslashes
  // in it are escaped for libfuse's option parser.
  std::string source;
  for (char c : options.meta_dir) {
    if (c == ',' || c == '\\') source += '\\';
    source += c;
  }
  std::string opts = fmt::format("fsname={},subtype=stripefs,default_permissions", source);
  if (geteuid() == 0) opts += ",allow_other";
  for (const auto& o : options.fuse_options) opts += "," + o;
  std::vector<std::string> argv_s = {"stripefs", "-o", opts};
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());

  fuse_session* se = fuse_session_new(&args, &ops, sizeof(ops), &frontend);
  if (!se) return Status::Invalid("the mount options were refused (see the message above): " + opts);
  if (fuse_set_signal_handlers(se) != 0) {
    fuse_session_destroy(se);
    return Status::IOError("cannot install signal handlers");
  }
  frontend.set_session(se);
  frontend.control().set_mountpoint(options.mountpoint);
  std::unique_ptr<Evictor> evictor;
  if (options.evict) {
    Evictor::Hooks hooks{
        [&](uint64_t ino) { return frontend.is_open(ino); },
        [&](const meta::InodeRecord& r) { frontend.maybe_reclaim(r); },
        [se](uint64_t parent, const std::string& name) {
          fuse_lowlevel_notify_inval_entry(se, parent, name.c_str(), name.size());
        }};
    evictor = std::make_unique<Evictor>(pool, options.evictor, std::move(hooks));
    if (Status s = evictor->load(); !s.ok()) {
      fuse_remove_signal_handlers(se);
      fuse_session_destroy(se);
      return Status(s.code(), "cache mode: " + s.message());
    }
    frontend.set_evictor(evictor.get());
  }
  // Listening before the mount exists, so a port in use fails the mount with its reason.
  std::unique_ptr<MetricsEndpoint> endpoint;
  if (!options.metrics_listen.empty()) {
    auto started = MetricsEndpoint::Start(options.metrics_listen, [&] { return frontend.stats_json(); });
    if (!started.ok()) {
      evictor.reset();
      fuse_remove_signal_handlers(se);
      fuse_session_destroy(se);
      return started.status();
    }
    endpoint = std::move(started).value();
    spdlog::info("metrics at http://{}/metrics", options.metrics_listen);
  }
  if (fuse_session_mount(se, options.mountpoint.c_str()) != 0) {
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return Status::IOError("cannot mount at " + options.mountpoint);
  }
  const MountNotices notices{
      [se](uint64_t ino) { fuse_lowlevel_notify_inval_inode(se, ino, 0, 0); },
      [se](uint64_t parent, std::string_view name) {
        const std::string terminated(name);  // libfuse sends the name's terminating NUL too
        fuse_lowlevel_notify_inval_entry(se, parent, terminated.c_str(), terminated.size());
      },
      [&](const meta::InodeRecord& r) { frontend.maybe_reclaim(r); }};
  std::shared_ptr<void> beside = on_ready(notices);
  if (evictor) evictor->start();
  MetricsWriter metrics([&] { return frontend.stats_json(); }, options.metrics_file);
  std::string why_not_ring;
  const Transport transport = options.transport.value_or(RingAvailable(&why_not_ring) ? Transport::kUring : Transport::kDev);
  spdlog::info("transport: {}", transport == Transport::kUring ? "uring (FUSE over io_uring)" : "dev (/dev/fuse)");
  RunWorkers(se, options.workers, &frontend.requests(), transport);
  beside.reset();  // before the session its notices go to
  metrics.stop();
  endpoint.reset();
  evictor.reset();  // stopped before the session it notifies goes away
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  return Status::OK();
}

}  // namespace stripefs::fs
