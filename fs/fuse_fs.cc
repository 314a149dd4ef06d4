// FUSE low-level operations over a Pool.
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <condition_variable>
#include <functional>
#include <thread>
#include <mutex>
#include <unordered_map>

#include "engine/pool/layout.h"
#include "fs/fuse_fs.h"
#include "fs/control.h"
#include "fs/control_server.h"
#include "fs/evictor.h"
#include "fs/metrics_writer.h"
#include "fs/request_stats.h"
#include "fs/session_loop.h"

namespace stripefs::fs {
namespace {

using meta::InodeRecord;

// How long the kernel may cache entries and attributes, in seconds. Every
// change goes through this daemon, and the kernel drops what a change through
// the mount makes stale (a write, unlink, rename, setattr); the one change it
// cannot see, space given back when the last handle closes, is announced
// explicitly (see OpRelease).
constexpr double kTimeout = 60.0;

struct FileHandle {
  std::shared_ptr<ObjectStore::Object> obj;
};

struct DirHandle {
  std::vector<meta::Listing> entries;  // snapshot taken at opendir; "." and ".." first
};

class Frontend {
 public:
  Frontend(Pool* pool, bool update_atime)
      : pool_(pool), update_atime_(update_atime), control_(pool, [this] { return stats_json(); }) {}

  void set_session(fuse_session* se) { session_ = se; }

  ControlServer& control() { return control_; }
  // Cache mode: null unless mounted with -o on_full=evict.
  void set_evictor(Evictor* e) { evictor_ = e; }
  Evictor* evictor() { return evictor_; }
  RequestStats& requests() { return requests_; }
  void count_error(int err) {
    if (err == EIO) eio_.fetch_add(1, std::memory_order_relaxed);
    if (err == ENOSPC) enospc_.fetch_add(1, std::memory_order_relaxed);
  }

  // The stats document: `stripefs stats --json`, the metrics file.
  Result<nlohmann::json> stats_json() {
    nlohmann::json j;
    j["uptime_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    j["requests"] = requests_.json();
    j["errors"] = {{"EIO", eio_.load()}, {"ENOSPC", enospc_.load()}};
    const CacheStats c = store().cache_stats();
    j["cache"] = {{"capacity", c.capacity}, {"bytes", c.bytes},           {"entries", c.entries},
                  {"hits", c.hits},         {"misses", c.misses},         {"insertions", c.insertions},
                  {"evictions", c.evictions}};
    j["dirty_bytes"] = 0;  // a mount writes through (the write-back buffer serves the object API)
    const EvictorStats e = evictor_ ? evictor_->stats() : EvictorStats{};
    j["eviction"] = {{"mode", evictor_ ? "evict" : "enospc"}, {"objects", e.objects}, {"bytes", e.bytes}};
    j["repaired_blocks"] = store().repaired_blocks();
    SFS_ASSIGN_OR_RETURN(nlohmann::json usage, pool().usage_json());
    j["segments"] = usage["segments"];
    j["metadata"] = usage["metadata"];
    return j;
  }
  // Tells the kernel that ino's cached attributes are stale.
  void attributes_changed(uint64_t ino) {
    if (session_) fuse_lowlevel_notify_inval_inode(session_, ino, -1, 0);
  }

  Pool& pool() { return *pool_; }
  // relatime, as the kernel does for local file systems: a read moves atime
  // when it is not after the last change or is a day old. Off with -o noatime.
  void maybe_touch_atime(uint64_t ino, const meta::Namespace::Brief& r) {
    constexpr int64_t kDayNs = 24ll * 3600 * 1000000000;
    if (!update_atime_) return;
    const int64_t now = meta::NowNs();
    if (r.atime_ns > r.mtime_ns && r.atime_ns > r.ctime_ns && now - r.atime_ns < kDayNs) return;
    meta::AttrChange c;
    c.atime_ns = now;
    c.keep_ctime = true;
    auto changed = ns().setattr(ino, c);
    if (!changed.ok()) spdlog::warn("updating atime of inode {}: {}", ino, changed.status().message());
  }
  meta::Namespace& ns() { return pool_->ns(); }
  ObjectStore& store() { return pool_->store(); }

  // Open-handle counts decide when an unlinked file's space goes back.
  void opened(uint64_t ino) {
    std::lock_guard lock(mu_);
    opens_[ino]++;
  }
  // Returns true when this was the last handle.
  bool closed(uint64_t ino) {
    std::lock_guard lock(mu_);
    if (--opens_[ino] > 0) return false;
    opens_.erase(ino);
    return true;
  }
  bool is_open(uint64_t ino) {
    std::lock_guard lock(mu_);
    return opens_.count(ino) > 0;
  }
  // An inode that lost its last link is reclaimed now unless a handle holds it.
  void maybe_reclaim(const InodeRecord& r) {
    if (S_ISDIR(r.mode)) return;  // directories are deleted by rmdir itself
    if (r.nlink != 0 || is_open(r.ino)) return;
    Status s = store().reclaim(r.ino);
    if (!s.ok()) spdlog::error("reclaiming inode {}: {} (the next mount retries)", r.ino, s.message());
  }

 private:
  Pool* pool_;
  const bool update_atime_;
  Evictor* evictor_ = nullptr;
  RequestStats requests_;
  std::atomic<uint64_t> eio_{0}, enospc_{0};
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  ControlServer control_;

  fuse_session* session_ = nullptr;
  std::mutex mu_;
  std::unordered_map<uint64_t, int> opens_;  // GUARDED_BY(mu_)
};

Frontend* F(fuse_req_t req) { return static_cast<Frontend*>(fuse_req_userdata(req)); }

struct timespec ToTimespec(int64_t ns) {
  int64_t sec = ns / 1000000000, rem = ns % 1000000000;
  if (rem < 0) {  // times before 1970: tv_nsec must stay in [0, 1e9)
    --sec;
    rem += 1000000000;
  }
  return {static_cast<time_t>(sec), static_cast<long>(rem)};
}

struct stat ToStat(const InodeRecord& r) {
  struct stat st {};
  st.st_ino = r.ino;
  st.st_mode = r.mode;
  st.st_nlink = r.nlink;
  st.st_uid = r.uid;
  st.st_gid = r.gid;
  st.st_rdev = r.rdev;
  st.st_size = S_ISDIR(r.mode) ? 4096 : static_cast<off_t>(r.size);
  st.st_blksize = 1 << 20;
  st.st_blocks = static_cast<blkcnt_t>((S_ISDIR(r.mode) ? 4096 : r.allocated) / 512);
  st.st_atim = ToTimespec(r.atime_ns);
  st.st_mtim = ToTimespec(r.mtime_ns);
  st.st_ctim = ToTimespec(r.ctime_ns);
  return st;
}

fuse_entry_param ToEntry(const InodeRecord& r) {
  fuse_entry_param e{};
  e.ino = r.ino;
  e.generation = 1;
  e.attr = ToStat(r);
  e.attr_timeout = kTimeout;
  e.entry_timeout = kTimeout;
  return e;
}

// Replies with the errno of s, logging what the user cannot see from errno alone.
void ReplyError(fuse_req_t req, const Status& s, const char* op) {
  int err = ToErrno(s);
  F(req)->count_error(err);
  if (err == EIO || err == ENOSPC) spdlog::error("{}: {}", op, s.message());
  fuse_reply_err(req, err);
}

template <typename T>
bool Failed(fuse_req_t req, const Result<T>& r, const char* op) {
  if (r.ok()) return false;
  ReplyError(req, r.status(), op);
  return true;
}

void ReplyEntry(fuse_req_t req, const Result<InodeRecord>& r, const char* op) {
  if (Failed(req, r, op)) return;
  fuse_entry_param e = ToEntry(r.value());
  fuse_reply_entry(req, &e);
}

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
}

void OpDestroy(void* userdata) {
  auto* f = static_cast<Frontend*>(userdata);
  Status s = f->store().sync();
  if (!s.ok()) spdlog::error("final flush: {}", s.message());
}

void OpLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto r = F(req)->ns().lookup(parent, name);
  if (!r.ok() && r.status().code() == Code::kNotFound) {
    // A negative entry, cached like a positive one: every change goes through this daemon.
    fuse_entry_param e{};
    e.entry_timeout = kTimeout;
    fuse_reply_entry(req, &e);
    return;
  }
  ReplyEntry(req, r, "lookup");
}

void OpGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  auto r = F(req)->ns().get(ino);
  if (Failed(req, r, "getattr")) return;
  struct stat st = ToStat(r.value());
  fuse_reply_attr(req, &st, kTimeout);
}

void OpSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi) {
  Frontend* f = F(req);
  auto r = f->ns().get(ino);
  if (Failed(req, r, "setattr")) return;
  int64_t now = meta::NowNs();
  if (to_set & FUSE_SET_ATTR_SIZE) {
    if (!S_ISREG(r->mode)) return (void)fuse_reply_err(req, S_ISDIR(r->mode) ? EISDIR : EINVAL);
    std::shared_ptr<ObjectStore::Object> obj;
    if (fi && fi->fh) {
      obj = reinterpret_cast<FileHandle*>(fi->fh)->obj;
    } else {
      auto o = f->store().object(r.value());
      if (Failed(req, o, "truncate")) return;
      obj = o.value();
    }
    r = f->store().truncate(*obj, static_cast<uint64_t>(attr->st_size), now);
    obj.reset();
    f->store().forget_if_unused(ino);
    if (Failed(req, r, "truncate")) return;
  }
  meta::AttrChange c;
  if (to_set & FUSE_SET_ATTR_MODE) c.mode = attr->st_mode;
  if (to_set & FUSE_SET_ATTR_UID) c.uid = attr->st_uid;
  if (to_set & FUSE_SET_ATTR_GID) c.gid = attr->st_gid;
  if (to_set & FUSE_SET_ATTR_ATIME) c.atime_ns = int64_t{attr->st_atim.tv_sec} * 1000000000 + attr->st_atim.tv_nsec;
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) c.atime_ns = now;
  if (to_set & FUSE_SET_ATTR_MTIME) c.mtime_ns = int64_t{attr->st_mtim.tv_sec} * 1000000000 + attr->st_mtim.tv_nsec;
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) c.mtime_ns = now;
  if (c.mode || c.uid || c.gid || c.atime_ns || c.mtime_ns || (to_set & FUSE_SET_ATTR_CTIME)) {
    r = f->ns().setattr(ino, c);
    if (Failed(req, r, "setattr")) return;
  }
  struct stat st = ToStat(r.value());
  fuse_reply_attr(req, &st, kTimeout);
}

void OpReadlink(fuse_req_t req, fuse_ino_t ino) {
  auto r = F(req)->ns().get(ino);
  if (Failed(req, r, "readlink")) return;
  if (!S_ISLNK(r->mode)) return (void)fuse_reply_err(req, EINVAL);
  fuse_reply_readlink(req, r->symlink.c_str());
}

// Ownership of a new inode: the caller's uid; the gid of a set-group-ID parent, else the caller's.
Result<meta::NewInode> NewFor(fuse_req_t req, fuse_ino_t parent, uint32_t mode) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  Frontend* f = F(req);
  meta::NewInode n;
  n.mode = mode;
  n.uid = ctx->uid;
  n.gid = ctx->gid;
  auto dir = f->ns().get(parent);
  if (dir.ok() && (dir->mode & S_ISGID)) {
    n.gid = dir->gid;
    if (S_ISDIR(mode)) n.mode |= S_ISGID;
  }
  if (S_ISREG(mode)) {
    SFS_ASSIGN_OR_RETURN(FileLayout layout, LayoutForNewFile(f->ns(), parent, f->pool().config()));
    n.chunk_size = layout.chunk_size;
    n.strategy = layout.strategy;
    n.replicas = layout.replicas;
  } else if (S_ISDIR(mode)) {
    SFS_ASSIGN_OR_RETURN(n.xattrs, InheritedLayoutXattrs(f->ns(), parent));
  }
  return n;
}

// Creates an inode from NewFor's description, or replies with the error.
Result<InodeRecord> CreateChild(fuse_req_t req, fuse_ino_t parent, const char* name, uint32_t mode,
                                const std::function<void(meta::NewInode&)>& fill = {}) {
  SFS_RETURN_IF_ERROR(F(req)->pool().check_metadata_room());
  SFS_ASSIGN_OR_RETURN(meta::NewInode n, NewFor(req, parent, mode));
  if (fill) fill(n);
  return F(req)->ns().create(parent, name, n);
}

// Cache mode learns every name a regular file gets.
void Named(fuse_req_t req, const Result<InodeRecord>& r, fuse_ino_t parent, const char* name) {
  if (Evictor* e = F(req)->evictor(); e && r.ok() && S_ISREG(r->mode)) e->named(r->ino, parent, name, meta::NowNs());
}

void OpMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  auto r = CreateChild(req, parent, name, mode, [&](meta::NewInode& n) { n.rdev = rdev; });
  Named(req, r, parent, name);
  ReplyEntry(req, r, "mknod");
}

void OpMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  ReplyEntry(req, CreateChild(req, parent, name, S_IFDIR | (mode & 07777)), "mkdir");
}

void OpSymlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  ReplyEntry(req, CreateChild(req, parent, name, S_IFLNK | 0777, [&](meta::NewInode& n) { n.symlink = target; }),
             "symlink");
}

void OpLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char* name) {
  if (Status room = F(req)->pool().check_metadata_room(); !room.ok()) return ReplyError(req, room, "link");
  auto r = F(req)->ns().link(ino, parent, name);
  Named(req, r, parent, name);
  ReplyEntry(req, r, "link");
}

void OpUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto r = F(req)->ns().unlink(parent, name);
  if (Failed(req, r, "unlink")) return;
  if (Evictor* e = F(req)->evictor()) e->unnamed(parent, name);
  F(req)->maybe_reclaim(r.value());
  fuse_reply_err(req, 0);
}

void OpRmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Status s = F(req)->ns().rmdir(parent, name);
  fuse_reply_err(req, ToErrno(s));
}

void OpRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
              unsigned int flags) {
  auto r = F(req)->ns().rename(parent, name, newparent, newname, flags);
  if (Failed(req, r, "rename")) return;
  if (Evictor* e = F(req)->evictor()) e->renamed(parent, name, newparent, newname, flags & RENAME_EXCHANGE);
  if (r.value()) F(req)->maybe_reclaim(*r.value());
  fuse_reply_err(req, 0);
}

void OpenFile(fuse_req_t req, const InodeRecord& r, fuse_file_info* fi, bool created) {
  Frontend* f = F(req);
  auto obj = f->store().object(r, /*just_created=*/created);  // a new file has no chunks to load
  if (Failed(req, obj, "open")) return;
  auto* h = new FileHandle{obj.value()};
  fi->fh = reinterpret_cast<uint64_t>(h);
  // Cached pages stay valid across opens: all writes pass through here, and
  // the kernel drops them itself when it sees size or mtime change.
  fi->keep_cache = 1;
  f->opened(r.ino);
  if (created) {
    fuse_entry_param e = ToEntry(r);
    if (fuse_reply_create(req, &e, fi) != 0) {
      f->closed(r.ino);
      delete h;
    }
  } else if (fuse_reply_open(req, fi) != 0) {
    f->closed(r.ino);
    delete h;
  }
}

void OpOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto r = F(req)->ns().get(ino);
  if (Failed(req, r, "open")) return;
  if (S_ISDIR(r->mode)) return (void)fuse_reply_err(req, EISDIR);
  if (!S_ISREG(r->mode)) return (void)fuse_reply_err(req, ENXIO);
  if ((fi->flags & O_TRUNC) && r->size > 0) {  // atomic O_TRUNC: the kernel leaves the cut to us
    auto obj = F(req)->store().object(r.value());
    if (Failed(req, obj, "open")) return;
    r = F(req)->store().truncate(*obj.value(), 0, meta::NowNs());
    if (Failed(req, r, "open")) return;  // the handle opened below keeps the cached state
  }
  OpenFile(req, r.value(), fi, false);
}

void OpCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  auto r = CreateChild(req, parent, name, S_IFREG | (mode & 07777));
  if (Failed(req, r, "create")) return;
  Named(req, r, parent, name);
  OpenFile(req, r.value(), fi, true);
}

void OpRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  Frontend* f = F(req);
  auto r = f->ns().brief(ino);
  if (Failed(req, r, "read")) return;
  uint64_t file_size = r->size;
  if (static_cast<uint64_t>(off) >= file_size) return (void)fuse_reply_buf(req, nullptr, 0);
  size = static_cast<size_t>(std::min<uint64_t>(size, file_size - static_cast<uint64_t>(off)));
  auto* h = reinterpret_cast<FileHandle*>(fi->fh);
  thread_local AlignedBuffer buf;  // one per worker, reused: the reply is sent from it
  auto bytes = f->store().read(*h->obj, static_cast<uint64_t>(off), size, buf);
  if (Failed(req, bytes, "read")) return;
  // Before the reply: once the reader has its bytes, its next stat may be
  // answered by another worker, and must already see the new atime.
  f->maybe_touch_atime(ino, r.value());
  fuse_reply_buf(req, bytes.value(), size);
  if (Evictor* e = f->evictor()) e->accessed(ino);
}

void OpWrite(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
  if (Status room = F(req)->pool().check_metadata_room(); !room.ok()) return ReplyError(req, room, "write");
  auto* h = reinterpret_cast<FileHandle*>(fi->fh);
  auto r = F(req)->store().write(*h->obj, static_cast<uint64_t>(off), buf, size);
  // Cache mode: no room is a reason to evict, not to fail. Room for a whole
  // chunk on every replica, as a write reserves.
  Evictor* e = F(req)->evictor();
  for (int attempt = 0; e && attempt < 3 && !r.ok() && r.status().code() == Code::kNoSpace; ++attempt) {
    if (!e->make_room(size + uint64_t{h->obj->chunk_size} * h->obj->replicas)) break;
    r = F(req)->store().write(*h->obj, static_cast<uint64_t>(off), buf, size);
  }
  if (Failed(req, r, "write")) return;
  if (e) e->accessed(ino);
  fuse_reply_write(req, size);
}

void OpFallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length, fuse_file_info* fi) {
  if (offset < 0 || length <= 0) return (void)fuse_reply_err(req, EINVAL);
  auto* h = reinterpret_cast<FileHandle*>(fi->fh);
  const auto off = static_cast<uint64_t>(offset), len = static_cast<uint64_t>(length);
  Status s;
  if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)) {
    s = F(req)->store().punch_hole(*h->obj, off, len);
  } else if (mode == 0 || mode == FALLOC_FL_KEEP_SIZE) {
    s = F(req)->pool().check_metadata_room();
    if (s.ok()) s = F(req)->store().allocate(*h->obj, off, len, mode == FALLOC_FL_KEEP_SIZE);
  } else {
    return (void)fuse_reply_err(req, EOPNOTSUPP);  // zero-range, collapse and insert-range are not offered
  }
  if (!s.ok()) return ReplyError(req, s, "fallocate");
  F(req)->attributes_changed(ino);
  fuse_reply_err(req, 0);
}

void OpLseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, fuse_file_info* fi) {
  if (whence != SEEK_DATA && whence != SEEK_HOLE) return (void)fuse_reply_err(req, EINVAL);  // the kernel does the rest
  auto r = F(req)->ns().get(ino);
  if (Failed(req, r, "lseek")) return;
  auto* h = reinterpret_cast<FileHandle*>(fi->fh);
  auto pos = F(req)->store().seek(*h->obj, static_cast<uint64_t>(std::max<off_t>(off, 0)), whence == SEEK_DATA, r->size);
  if (Failed(req, pos, "lseek")) return;
  fuse_reply_lseek(req, static_cast<off_t>(pos.value()));
}

void OpFlush(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

void OpRelease(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Frontend* f = F(req);
  auto* h = reinterpret_cast<FileHandle*>(fi->fh);
  if (f->closed(ino)) {
    auto trimmed = f->store().trim(*h->obj);
    if (!trimmed.ok()) spdlog::warn("giving back unused space of inode {}: {}", ino, trimmed.status().message());
    auto r = f->ns().get(ino);
    if (r.ok()) f->maybe_reclaim(r.value());
    // The trim changed st_blocks behind the kernel's back. Safe from here: the
    // kernel does not wait for a release while holding the inode.
    if (trimmed.ok() && trimmed.value() && r.ok() && r->nlink > 0) f->attributes_changed(ino);
  }
  delete h;
  f->store().forget_if_unused(ino);
  fuse_reply_err(req, 0);
}

void OpFsync(fuse_req_t req, fuse_ino_t, int, fuse_file_info* fi) {
  // A file of a ram directory has nothing to make durable: it is gone at the
  // next mount whatever is synced, so its fsync does no work.
  auto* h = fi ? reinterpret_cast<FileHandle*>(fi->fh) : nullptr;
  if (h && h->obj->strategy->ram_only()) return (void)fuse_reply_err(req, 0);
  Status s = F(req)->store().sync();
  if (!s.ok()) return ReplyError(req, s, "fsync");
  fuse_reply_err(req, 0);
}

void OpOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Frontend* f = F(req);
  auto dir = f->ns().get(ino);
  if (Failed(req, dir, "opendir")) return;
  auto list = f->ns().list(ino);
  if (Failed(req, list, "opendir")) return;
  auto* h = new DirHandle;
  h->entries.push_back({".", {ino, S_IFDIR}});
  h->entries.push_back({"..", {dir->parent ? dir->parent : ino, S_IFDIR}});
  for (auto& l : list.value()) h->entries.push_back(std::move(l));
  fi->fh = reinterpret_cast<uint64_t>(h);
  if (fuse_reply_open(req, fi) != 0) delete h;
}

void ReadDir(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi, bool plus) {
  auto* h = reinterpret_cast<DirHandle*>(fi->fh);
  std::vector<char> buf(size);
  size_t used = 0;
  for (size_t i = static_cast<size_t>(off); i < h->entries.size(); ++i) {
    const auto& l = h->entries[i];
    size_t n;
    if (plus) {
      fuse_entry_param e{};
      bool dots = l.name == "." || l.name == "..";
      if (!dots) {
        auto r = F(req)->ns().get(l.entry.ino);
        if (!r.ok()) continue;  // removed since opendir
        e = ToEntry(r.value());
      } else {
        e.attr.st_ino = l.entry.ino;
        e.attr.st_mode = S_IFDIR;
      }
      n = fuse_add_direntry_plus(req, buf.data() + used, size - used, l.name.c_str(), &e, static_cast<off_t>(i + 1));
    } else {
      struct stat st {};
      st.st_ino = l.entry.ino;
      st.st_mode = l.entry.type;
      n = fuse_add_direntry(req, buf.data() + used, size - used, l.name.c_str(), &st, static_cast<off_t>(i + 1));
    }
    if (n > size - used) break;
    used += n;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void OpReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  ReadDir(req, ino, size, off, fi, false);
}
void OpReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  ReadDir(req, ino, size, off, fi, true);
}
void OpReleasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  delete reinterpret_cast<DirHandle*>(fi->fh);
  fuse_reply_err(req, 0);
}
void OpFsyncdir(fuse_req_t req, fuse_ino_t, int, fuse_file_info*) {
  Status s = F(req)->pool().kv().sync();
  fuse_reply_err(req, ToErrno(s));
}

void OpStatfs(fuse_req_t req, fuse_ino_t) {
  Pool& p = F(req)->pool();
  struct statvfs st {};
  st.f_bsize = meta::kBlockSize;
  st.f_frsize = meta::kBlockSize;
  st.f_blocks = p.drive_capacity() / meta::kBlockSize;
  st.f_bfree = st.f_bavail = p.drive_free() / meta::kBlockSize;
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

bool IsUserXattr(const char* name) { return std::strncmp(name, "user.", 5) == 0; }

void ReplyXattr(fuse_req_t req, const std::string& value, size_t size) {
  if (size == 0) return (void)fuse_reply_xattr(req, value.size());
  if (size < value.size()) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, value.data(), value.size());
}

void OpSetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size, int flags) {
  if (!IsUserXattr(name)) return (void)fuse_reply_err(req, EOPNOTSUPP);
  Frontend* f = F(req);
  if (IsControlXattr(name)) {
    const fuse_ctx* ctx = fuse_req_ctx(req);
    Status s = f->control().set(ino, name, std::string_view(value, size), {ctx->uid, ctx->pid});
    return (void)fuse_reply_err(req, ToErrno(s));
  }
  if (Status room = f->pool().check_metadata_room(); !room.ok()) return ReplyError(req, room, "setxattr");
  std::string_view v(value, size);
  std::string canonical;
  if (IsLayoutXattr(name)) {  // only on directories, and only values the pool can honour
    auto r = f->ns().get(ino);
    if (Failed(req, r, "setxattr")) return;
    if (!S_ISDIR(r->mode)) return (void)fuse_reply_err(req, EINVAL);
    auto checked = ValidateLayoutXattr(name, v, f->pool().config());
    if (!checked.ok()) {
      spdlog::warn("setxattr {} on inode {}: {}", name, ino, checked.status().message());
      return ReplyError(req, checked.status(), "setxattr");
    }
    canonical = std::move(checked).value();
    v = canonical;
  }
  Status s = f->ns().setxattr(ino, name, v, flags);
  fuse_reply_err(req, ToErrno(s));
}

void OpGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  if (!IsUserXattr(name)) return (void)fuse_reply_err(req, ENODATA);
  if (IsControlXattr(name)) {
    const fuse_ctx* ctx = fuse_req_ctx(req);
    auto v = F(req)->control().get(ino, name, {ctx->uid, ctx->pid});
    if (Failed(req, v, "getxattr")) return;
    return ReplyXattr(req, v.value(), size);
  }
  auto v = F(req)->ns().getxattr(ino, name);
  if (Failed(req, v, "getxattr")) return;
  ReplyXattr(req, v.value(), size);
}

void OpListxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  auto names = F(req)->ns().listxattr(ino);
  if (Failed(req, names, "listxattr")) return;
  std::string all;
  for (const auto& n : names.value()) {
    all += n;
    all.push_back('\0');
  }
  ReplyXattr(req, all, size);
}

void OpRemovexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  if (!IsUserXattr(name)) return (void)fuse_reply_err(req, EOPNOTSUPP);
  Status s = F(req)->ns().removexattr(ino, name);
  fuse_reply_err(req, ToErrno(s));
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

Status Serve(Pool* pool, const MountOptions& options, const std::function<void()>& on_ready) {
  const auto& o = options.fuse_options;
  Frontend frontend(pool, std::find(o.begin(), o.end(), "noatime") == o.end());
  static const fuse_lowlevel_ops ops = MakeOps();

  std::string opts = fmt::format("fsname=stripefs:{},subtype=stripefs,default_permissions", options.meta_dir);
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
        [&](const InodeRecord& r) { frontend.maybe_reclaim(r); },
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
  if (fuse_session_mount(se, options.mountpoint.c_str()) != 0) {
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return Status::IOError("cannot mount at " + options.mountpoint);
  }
  on_ready();
  if (evictor) evictor->start();
  MetricsWriter metrics([&] { return frontend.stats_json(); }, options.metrics_file);
  RunWorkers(se, options.workers, &frontend.requests());
  metrics.stop();
  evictor.reset();  // stopped before the session it notifies goes away
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  return Status::OK();
}

}  // namespace stripefs::fs
