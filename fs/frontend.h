// SPDX-License-Identifier: Apache-2.0
// The state of a mounted pool's FUSE frontend, and the replies every op
// shares: a request's Frontend, Status turned into errno (here only, at the
// FUSE edge), an inode record turned into stat and entry replies. The ops
// themselves are in fs/ops.h.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <vector>

#include "engine/pool/pool.h"
#include "fs/control_server.h"
#include "fs/evictor.h"
#include "fs/fuse_fs.h"
#include "fs/request_stats.h"

namespace stripefs::fs {

// How long the kernel may cache entries and attributes, in seconds. Every
// change goes through this daemon, and the kernel drops what a change through
// the mount makes stale (a write, unlink, rename, setattr); the one change it
// cannot see, space given back when the last handle closes, is announced
// explicitly (see OpRelease).
constexpr double kTimeout = 60.0;
// The same for a reader mount (MountOptions::reader): the pool's writer is
// another process, whose changes a reader learns of only by asking again.
// A file the writer has closed is visible there within this bound, plus the
// writer's send to etcd (milliseconds).
constexpr double kReaderTimeout = 1.0;

struct FileHandle {
  std::shared_ptr<ObjectStore::Object> obj;
};

struct DirHandle {
  // Snapshot taken at opendir, and again when a reader that read from it
  // starts over at offset 0 (rewinddir); "." and ".." first.
  std::vector<meta::Listing> entries;
  bool read_since_listed = false;
};

// The version this daemon was built as (the project's version).
const char* Version();

// One per mount: the request handlers' shared state.
class Frontend {
 public:
  // A reader records no atime: it cannot write.
  Frontend(Pool* pool, AtimeMode atime, bool reader = false)
      : pool_(pool),
        atime_(reader ? AtimeMode::kNever : atime),
        reader_(reader),
        control_(pool, [this] { return stats_json(); }) {}

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
    j["version"] = Version();
    j["uptime_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    j["transport"] = ActiveTransport();  // "uring" or "dev"
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
  // relatime by default, as the kernel does for local file systems: a read
  // moves atime when it is not after the last change or is a day old. Every
  // read with -o strictatime; none with -o noatime.
  void maybe_touch_atime(uint64_t ino, const meta::Namespace::Brief& r) {
    constexpr int64_t kDayNs = 24ll * 3600 * 1000000000;
    if (atime_ == AtimeMode::kNever) return;
    const int64_t now = meta::NowNs();
    if (atime_ == AtimeMode::kRelative && r.atime_ns > r.mtime_ns && r.atime_ns > r.ctime_ns &&
        now - r.atime_ns < kDayNs) {
      return;
    }
    meta::AttrChange c;
    c.atime_ns = now;
    c.keep_ctime = true;
    auto changed = ns().setattr(ino, c);
    if (!changed.ok()) spdlog::warn("updating atime of inode {}: {}", ino, changed.status().message());
  }
  AtimeMode atime() const { return atime_; }
  bool reader() const { return reader_; }
  // How long the kernel may cache an entry or attributes this mount answers.
  double cache_timeout() const { return reader_ ? kReaderTimeout : kTimeout; }
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
  // Open directories, so that one removed (rmdir, or renamed over) while
  // open still answers fstat until it is closed, as a regular file does.
  void dir_opened(const meta::InodeRecord& r) {
    std::lock_guard lock(mu_);
    auto& d = open_dirs_[r.ino];
    d.handles++;
    d.last_seen = r;
  }
  void dir_closed(uint64_t ino) {
    std::lock_guard lock(mu_);
    auto it = open_dirs_.find(ino);
    if (it != open_dirs_.end() && --it->second.handles == 0) open_dirs_.erase(it);
  }
  // An open directory the namespace no longer has: as last seen, with no links.
  std::optional<meta::InodeRecord> removed_open_dir(uint64_t ino) {
    std::lock_guard lock(mu_);
    auto it = open_dirs_.find(ino);
    if (it == open_dirs_.end()) return std::nullopt;
    meta::InodeRecord r = it->second.last_seen;
    r.nlink = 0;
    return r;
  }

  // An inode that lost its last link is reclaimed now unless a handle holds it.
  void maybe_reclaim(const meta::InodeRecord& r) {
    if (S_ISDIR(r.mode)) return;  // directories are deleted by rmdir itself
    if (r.nlink != 0 || is_open(r.ino)) return;
    Status s = store().reclaim(r.ino);
    if (!s.ok()) spdlog::error("reclaiming inode {}: {} (the next mount retries)", r.ino, s.message());
  }

 private:
  Pool* pool_;
  const AtimeMode atime_;
  const bool reader_;
  Evictor* evictor_ = nullptr;
  RequestStats requests_;
  std::atomic<uint64_t> eio_{0}, enospc_{0};
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  ControlServer control_;

  fuse_session* session_ = nullptr;
  std::mutex mu_;
  std::unordered_map<uint64_t, int> opens_;  // GUARDED_BY(mu_)
  struct OpenDir {
    int handles = 0;
    meta::InodeRecord last_seen;  // at its latest opendir
  };
  std::unordered_map<uint64_t, OpenDir> open_dirs_;  // GUARDED_BY(mu_)
};

// The Frontend a request came to.
inline Frontend* F(fuse_req_t req) { return static_cast<Frontend*>(fuse_req_userdata(req)); }

// An inode record as the kernel sees it: its stat, its entry (cached kTimeout).
struct stat ToStat(const meta::InodeRecord& r);
fuse_entry_param ToEntry(const meta::InodeRecord& r, double timeout);
// Replies with the errno of s, logging what the user cannot see from errno alone.
void ReplyError(fuse_req_t req, const Status& s, const char* op);

// Replies with r's error if it failed; true when it did.
template <typename T>
bool Failed(fuse_req_t req, const Result<T>& r, const char* op) {
  if (r.ok()) return false;
  ReplyError(req, r.status(), op);
  return true;
}
// Replies with r's entry, or with its error.
void ReplyEntry(fuse_req_t req, const Result<meta::InodeRecord>& r, const char* op);

}  // namespace stripefs::fs
