// SPDX-License-Identifier: Apache-2.0
// null_fuse: a FUSE filesystem that stores nothing, to measure the ceiling of
// the FUSE transport on a machine (issue 4). The root directory holds N files
// (f0..f{N-1}, or as --name-format says) of a fixed size; reads are answered
// from one static buffer with fuse_reply_buf, writes are accepted and discarded. The INIT settings are
// stripefs's (fs/fuse_fs.cc), and the session loop is selectable: libfuse's
// single-threaded loop, libfuse's multithreaded loop, or stripefs's fixed set
// of workers, so that fio on this mount shows what each loop leaves of the
// transport, with no filesystem work behind it.
//
//   null_fuse MOUNTPOINT [--files 4] [--size 4G] [--name-format f{}] [--loop single|mt|workers]
//             [--workers 8] [--mt-threads 16] [--fill zero|pattern]
//             [--getxattr enodata|enosys] [--odirect direct_io|cache] [--killpriv] [--transport dev|uring]
//
// Runs in the foreground; SIGINT/SIGTERM (or fusermount3 -u) unmounts and ends
// it. At the end it prints how many WRITE, GETXATTR and SETATTR requests it
// answered, so a run shows what the kernel sends around each write.

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fs/fuse_ring.h"
#include "fs/session_loop.h"

namespace {

constexpr double kTimeout = 60.0;  // entry/attribute timeout, as stripefs
constexpr fuse_ino_t kFirstFile = 2;  // f0 is inode 2, f1 inode 3, ...
constexpr size_t kMaxReply = 1u << 20;  // max_write/max_readahead; libfuse negotiates max_pages from it

struct Config {
  unsigned files = 4;
  uint64_t size = 4ull << 30;
  std::string name_prefix = "f", name_suffix;  // file i is prefix + i + suffix (--name-format)
};
Config g_config;

// Requests answered, printed at the end (see main).
std::atomic<uint64_t> g_writes{0}, g_getxattrs{0}, g_setattrs{0};
bool g_killpriv = false;         // --killpriv: negotiate FUSE_CAP_HANDLE_KILLPRIV
bool g_odirect_direct_io = true; // --odirect direct_io: as stripefs's open (fs/file_ops.cc)

// Reply data: byte i is fill(i mod 4096), and a read at offset off is answered
// from g_data + (off mod 4096), so a file's content is the same at every read.
// Written at start-up (not left as untouched .bss, whose pages would all map
// the one shared zero page and make the copy unrealistically cheap).
alignas(4096) char g_data[kMaxReply + 4096];

bool IsFile(fuse_ino_t ino) { return ino >= kFirstFile && ino < kFirstFile + g_config.files; }

struct stat Attr(fuse_ino_t ino) {
  struct stat st {};
  st.st_ino = ino;
  st.st_uid = getuid();
  st.st_gid = getgid();
  st.st_blksize = 1 << 20;  // as stripefs
  if (ino == FUSE_ROOT_ID) {
    st.st_mode = S_IFDIR | 0755;
    st.st_nlink = 2;
    st.st_size = 4096;
  } else {
    st.st_mode = S_IFREG | 0666;
    st.st_nlink = 1;
    st.st_size = static_cast<off_t>(g_config.size);
    st.st_blocks = static_cast<blkcnt_t>(g_config.size / 512);
  }
  return st;
}

void OpInit(void*, fuse_conn_info* conn) {
  // The same settings as stripefs's OpInit (fs/fuse_fs.cc).
  conn->max_write = kMaxReply;
  conn->max_readahead = kMaxReply;
  conn->max_background = 64;
  conn->congestion_threshold = 48;
  // Not stripefs's setting: for measuring what v1 of "the daemon kills
  // suid/sgid" changes (nothing about the kernel's security.capability query).
  if (g_killpriv && (conn->capable & FUSE_CAP_HANDLE_KILLPRIV)) conn->want |= FUSE_CAP_HANDLE_KILLPRIV;
}

// File i's name: --name-format with its "{}" replaced by i.
std::string FileName(uint64_t i) { return g_config.name_prefix + std::to_string(i) + g_config.name_suffix; }

void OpLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  const std::string_view n(name), pre(g_config.name_prefix), suf(g_config.name_suffix);
  if (parent != FUSE_ROOT_ID || n.size() <= pre.size() + suf.size() || !n.starts_with(pre) || !n.ends_with(suf))
    return (void)fuse_reply_err(req, ENOENT);
  const std::string digits(n.substr(pre.size(), n.size() - pre.size() - suf.size()));
  char* end = nullptr;
  errno = 0;
  unsigned long i = std::strtoul(digits.c_str(), &end, 10);
  if (digits[0] < '0' || digits[0] > '9' || errno != 0 || *end != '\0' || i >= g_config.files ||
      (digits[0] == '0' && digits.size() > 1))
    return (void)fuse_reply_err(req, ENOENT);
  fuse_entry_param e{};
  e.ino = kFirstFile + i;
  e.generation = 1;
  e.attr = Attr(e.ino);
  e.attr_timeout = kTimeout;
  e.entry_timeout = kTimeout;
  fuse_reply_entry(req, &e);
}

void OpGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  if (ino != FUSE_ROOT_ID && !IsFile(ino)) return (void)fuse_reply_err(req, ENOENT);
  struct stat st = Attr(ino);
  fuse_reply_attr(req, &st, kTimeout);
}

// Everything is accepted and nothing changes: a truncate leaves the file at
// --size (the reply carries that size, so the kernel keeps it too).
void OpSetattr(fuse_req_t req, fuse_ino_t ino, struct stat*, int, fuse_file_info*) {
  g_setattrs.fetch_add(1, std::memory_order_relaxed);
  if (ino != FUSE_ROOT_ID && !IsFile(ino)) return (void)fuse_reply_err(req, ENOENT);
  struct stat st = Attr(ino);
  fuse_reply_attr(req, &st, kTimeout);
}

void OpOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (!IsFile(ino)) return (void)fuse_reply_err(req, ino == FUSE_ROOT_ID ? EISDIR : ENOENT);
  fi->keep_cache = 1;  // as stripefs
  // As stripefs: an O_DIRECT open bypasses the page cache anyway; answered
  // with direct_io, its writes skip the kernel's file_remove_privs and so its
  // GETXATTR security.capability (see docs/design.md).
  if (g_odirect_direct_io && (fi->flags & O_DIRECT)) fi->direct_io = 1;
  fuse_reply_open(req, fi);
}

void OpRead(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info*) {
  uint64_t o = static_cast<uint64_t>(off);
  if (o >= g_config.size) return (void)fuse_reply_buf(req, nullptr, 0);
  size = static_cast<size_t>(std::min<uint64_t>({size, g_config.size - o, kMaxReply}));
  fuse_reply_buf(req, g_data + (o & 4095), size);
}

void OpWrite(fuse_req_t req, fuse_ino_t, const char*, size_t size, off_t, fuse_file_info*) {
  g_writes.fetch_add(1, std::memory_order_relaxed);
  fuse_reply_write(req, size);
}

void OpOk(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }
void OpFsync(fuse_req_t req, fuse_ino_t, int, fuse_file_info*) { fuse_reply_err(req, 0); }

void OpReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  if (ino != FUSE_ROOT_ID) return (void)fuse_reply_err(req, ENOTDIR);
  std::vector<char> buf(size);
  size_t used = 0;
  // Entry k: 0 ".", 1 "..", 2+i file i; the offset of an entry is k + 1.
  for (uint64_t k = static_cast<uint64_t>(off); k < 2ull + g_config.files; ++k) {
    std::string name = k == 0 ? "." : k == 1 ? ".." : FileName(k - 2);
    struct stat st {};
    st.st_ino = k < 2 ? FUSE_ROOT_ID : kFirstFile + (k - 2);
    st.st_mode = k < 2 ? S_IFDIR : S_IFREG;
    size_t n = fuse_add_direntry(req, buf.data() + used, size - used, name.c_str(), &st, static_cast<off_t>(k + 1));
    if (n > size - used) break;
    used += n;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void OpStatfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs st {};
  st.f_bsize = st.f_frsize = 4096;
  uint64_t blocks = std::max<uint64_t>(g_config.size / 4096 * g_config.files * 2, 1ull << 20);
  st.f_blocks = blocks;
  st.f_bfree = st.f_bavail = blocks / 2;
  st.f_files = g_config.files + 1;
  st.f_namemax = 255;
  fuse_reply_statfs(req, &st);
}

// No extended attributes. ENODATA, as stripefs answers for a missing one (so
// the kernel still asks for security.capability before every write, as it does
// of stripefs); ENOSYS would make the kernel stop asking.
int g_getxattr_err = ENODATA;
void OpGetxattr(fuse_req_t req, fuse_ino_t, const char*, size_t) {
  g_getxattrs.fetch_add(1, std::memory_order_relaxed);
  fuse_reply_err(req, g_getxattr_err);
}
void OpListxattr(fuse_req_t req, fuse_ino_t, size_t size) {
  if (size == 0) return (void)fuse_reply_xattr(req, 0);
  fuse_reply_buf(req, nullptr, 0);
}

fuse_lowlevel_ops MakeOps() {
  fuse_lowlevel_ops ops{};
  ops.init = OpInit;
  ops.lookup = OpLookup;
  ops.getattr = OpGetattr;
  ops.setattr = OpSetattr;
  ops.open = OpOpen;
  ops.read = OpRead;
  ops.write = OpWrite;
  ops.flush = OpOk;
  ops.release = OpOk;
  ops.fsync = OpFsync;
  ops.readdir = OpReaddir;
  ops.releasedir = OpOk;
  ops.statfs = OpStatfs;
  ops.getxattr = OpGetxattr;
  ops.listxattr = OpListxattr;
  return ops;
}

bool ParseSize(const std::string& s, uint64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str()) return false;
  std::string suffix(end);
  unsigned shift = 0;
  if (suffix.empty()) shift = 0;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB") shift = 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB") shift = 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB") shift = 30;
  else if (suffix == "T" || suffix == "t" || suffix == "TiB") shift = 40;
  else return false;
  if (shift && v > (~0ull >> shift)) return false;
  *out = v << shift;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "null_fuse: a FUSE filesystem that stores nothing (reads return a static buffer, writes are discarded),\n"
      "to measure the FUSE transport's ceiling with stripefs's INIT settings. Runs in the foreground;\n"
      "SIGINT/SIGTERM or `fusermount3 -u MOUNTPOINT` unmounts and ends it.\n"
      "e.g.  null_fuse /mnt/null --loop workers &  then\n"
      "      fio --name=r --directory=/mnt/null --filename_format='f$jobnum' --rw=read --bs=1M --direct=1 \\\n"
      "          --ioengine=psync --numjobs=2 --size=1G --time_based --runtime=5 --ramp_time=1 --group_reporting"};
  std::string mountpoint, size_s = "4G", loop = "workers", fill = "zero", getxattr = "enodata";
  unsigned workers = 8, mt_threads = 16, files = 4;
  bool debug = false;
  app.add_option("mountpoint", mountpoint, "where to mount")->required();
  app.add_option("--files", files, "number of files in the root directory (named by --name-format)")
      ->default_val(4)
      ->check(CLI::Range(1u, 1000000u));
  std::string name_format = "f{}";
  app.add_option("--name-format", name_format,
                 "names of the files, {} standing for 0..N-1 (bench/compare's fio jobs use bench.{}.0)")
      ->default_val("f{}");
  app.add_option("--size", size_s, "size of every file (bytes, or with K/M/G/T, binary)")->default_val("4G");
  app.add_option("--loop", loop,
                 "session loop: single = fuse_session_loop; mt = fuse_session_loop_mt (clone_fd on, "
                 "max_threads --mt-threads); workers = stripefs's fixed workers on the one fd")
      ->default_val("workers")
      ->check(CLI::IsMember({"single", "mt", "workers"}));
  app.add_option("--workers", workers, "threads of --loop workers (stripefs's default: 8)")
      ->default_val(8)
      ->check(CLI::Range(1u, 256u));
  app.add_option("--mt-threads", mt_threads, "max_threads of --loop mt")->default_val(16)->check(CLI::Range(1u, 1024u));
  app.add_option("--fill", fill, "read data: zero, or pattern (byte at offset o is a function of o mod 4096)")
      ->default_val("zero")
      ->check(CLI::IsMember({"zero", "pattern"}));
  app.add_option("--getxattr", getxattr,
                 "reply to getxattr: enodata (as stripefs; the kernel asks before every write) or enosys "
                 "(the kernel stops asking)")
      ->default_val("enodata")
      ->check(CLI::IsMember({"enodata", "enosys"}));
  std::string odirect = "direct_io";
  app.add_option("--odirect", odirect,
                 "reply to an O_DIRECT open: direct_io (as stripefs: its writes skip the kernel's "
                 "security.capability query) or cache (the kernel's generic O_DIRECT path, which asks before every "
                 "write)")
      ->default_val("direct_io")
      ->check(CLI::IsMember({"direct_io", "cache"}));
  app.add_flag("--killpriv", g_killpriv,
               "negotiate FUSE_CAP_HANDLE_KILLPRIV (not stripefs's setting; to measure it)");
  std::string transport = "dev";
  app.add_option("--transport", transport,
                 "with --loop workers: dev (reads and writes of /dev/fuse) or uring (FUSE over io_uring, as "
                 "stripefs's -o transport=uring)")
      ->default_val("dev")
      ->check(CLI::IsMember({"dev", "uring"}));
  app.add_flag("-d,--debug", debug, "libfuse debug output (every request)");
  CLI11_PARSE(app, argc, argv);

  g_config.files = files;
  if (transport == "uring") {
    std::string why;
    if (loop != "workers" || !stripefs::fs::RingAvailable(&why)) {
      std::fprintf(stderr, "null_fuse: --transport uring: %s\n",
                   loop != "workers" ? "needs --loop workers" : why.c_str());
      return 2;
    }
  }
  const size_t slot = name_format.find("{}");
  if (slot == std::string::npos || name_format.find('/') != std::string::npos) {
    std::fprintf(stderr, "null_fuse: --name-format must contain {} and no '/': '%s'\n", name_format.c_str());
    return 2;
  }
  g_config.name_prefix = name_format.substr(0, slot);
  g_config.name_suffix = name_format.substr(slot + 2);
  if (!ParseSize(size_s, &g_config.size)) {
    std::fprintf(stderr, "null_fuse: --size: not a size: '%s'\n", size_s.c_str());
    return 2;
  }
  g_getxattr_err = getxattr == "enosys" ? ENOSYS : ENODATA;
  g_odirect_direct_io = odirect == "direct_io";
  for (size_t i = 0; i < sizeof(g_data); ++i)
    g_data[i] = fill == "zero" ? 0 : static_cast<char>(((i & 4095) * 131 + ((i & 4095) >> 8)) & 0xff);

  static const fuse_lowlevel_ops ops = MakeOps();
  std::string opts = "fsname=null_fuse,subtype=null_fuse,default_permissions";
  if (geteuid() == 0) opts += ",allow_other";
  std::vector<std::string> argv_s = {"null_fuse", "-o", opts};
  if (debug) argv_s.push_back("-d");
  std::vector<char*> fargv;
  for (auto& a : argv_s) fargv.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(fargv.size()), fargv.data());

  fuse_session* se = fuse_session_new(&args, &ops, sizeof(ops), nullptr);
  if (!se) {
    std::fprintf(stderr, "null_fuse: fuse_session_new failed (options: %s)\n", opts.c_str());
    return 1;
  }
  // A shell starts a background command with SIGINT ignored, and libfuse only
  // takes over signals left at their default: reset them, so that SIGINT ends
  // a null_fuse started with `&` from a script too.
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
  if (fuse_set_signal_handlers(se) != 0) {
    std::fprintf(stderr, "null_fuse: cannot install signal handlers\n");
    fuse_session_destroy(se);
    return 1;
  }
  if (fuse_session_mount(se, mountpoint.c_str()) != 0) {
    std::fprintf(stderr, "null_fuse: cannot mount at %s\n", mountpoint.c_str());
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return 1;
  }
  std::fprintf(stderr, "null_fuse: mounted %s: %u files of %llu bytes, loop %s", mountpoint.c_str(), files,
               static_cast<unsigned long long>(g_config.size), loop.c_str());
  if (loop == "workers") std::fprintf(stderr, " (%u workers, transport %s)", workers, transport.c_str());
  if (loop == "mt") std::fprintf(stderr, " (clone_fd, max_threads %u)", mt_threads);
  std::fprintf(stderr, ", fill %s, getxattr %s, odirect %s%s, pid %d\n", fill.c_str(), getxattr.c_str(),
               odirect.c_str(), g_killpriv ? ", killpriv" : "", getpid());

  int rc = 0;
  if (loop == "single") {
    rc = fuse_session_loop(se);
  } else if (loop == "mt") {
    fuse_loop_config* cfg = fuse_loop_cfg_create();
    fuse_loop_cfg_set_clone_fd(cfg, 1);
    fuse_loop_cfg_set_max_threads(cfg, mt_threads);
    rc = fuse_session_loop_mt(se, cfg);
    fuse_loop_cfg_destroy(cfg);
  } else {
    // stripefs's own loop
    stripefs::fs::RunWorkers(se, workers, nullptr,
                             transport == "uring" ? stripefs::fs::Transport::kUring : stripefs::fs::Transport::kDev);
  }
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  std::fprintf(stderr, "null_fuse: unmounted %s; transport %s; requests: write %llu, getxattr %llu, setattr %llu\n",
               mountpoint.c_str(), stripefs::fs::ActiveTransport(), static_cast<unsigned long long>(g_writes.load()),
               static_cast<unsigned long long>(g_getxattrs.load()), static_cast<unsigned long long>(g_setattrs.load()));
  // fuse_session_loop*: 0 on unmount, the signal's number when a signal ended it, -errno on an error.
  return rc < 0 ? 1 : 0;
}
