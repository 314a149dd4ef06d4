// SPDX-License-Identifier: Apache-2.0
// Cache mode (-o on_full=evict): the pool as a cache that makes room instead
// of failing when full. Whole objects (regular files) are evicted, least
// recently used first: in the background once drive use passes the high
// watermark, down to the low one; and at once when a write finds no room.
// A file with the xattr user.stripefs.pin = 1, or open, is never evicted.
// Evicted files disappear from the namespace.
//
// The evictor learns names and accesses from the FUSE frontend (created,
// linked, renamed, unlinked, read, written) and, at mount, from the namespace.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/pool/pool.h"

namespace stripefs::fs {

inline constexpr const char* kPinXattr = "user.stripefs.pin";

struct EvictorOptions {
  double high_watermark = 0.90;  // start evicting above this share of the drives' capacity
  double low_watermark = 0.80;   // ... and stop below this one
};

struct EvictorStats {
  uint64_t objects = 0, bytes = 0;  // evicted since mount
};

class Evictor {
 public:
  // Hooks into the frontend: whether a file is open (it is then skipped),
  // what to do with an inode that lost its last name (reclaim it), and how
  // to tell the kernel a name is gone (called from the evictor's own thread,
  // never while a request waits on the evictor).
  struct Hooks {
    std::function<bool(uint64_t ino)> is_open;
    std::function<void(const meta::InodeRecord& r)> reclaim;
    std::function<void(uint64_t parent, const std::string& name)> forget_name;
  };
  Evictor(Pool* pool, EvictorOptions options, Hooks hooks);
  ~Evictor();  // stops the thread

  // Reads every regular file's names and times from the namespace.
  Status load();
  void start();

  // What the frontend tells it.
  void named(uint64_t ino, uint64_t parent, const std::string& name, int64_t when_ns);
  void unnamed(uint64_t parent, const std::string& name);
  // exchange: RENAME_EXCHANGE, the two names swap their files.
  void renamed(uint64_t parent, const std::string& name, uint64_t new_parent, const std::string& new_name,
               bool exchange);
  void accessed(uint64_t ino);

  // A write found no room: evicts least recently used objects, at least one,
  // until `bytes` are free (or nothing else can go). True when the write is
  // worth retrying: this call freed something, or another eviction pass
  // ended while it waited for its turn.
  bool make_room(uint64_t bytes);
  EvictorStats stats() const;

 private:
  struct Tracked {
    int64_t last_ns = 0;
    std::set<std::pair<uint64_t, std::string>> names;
  };
  void run();
  double used_share() const;
  // Evicts least recently used objects until enough(evicted so far) says
  // stop; returns objects evicted. REQUIRES: evict_mu_ held.
  uint64_t evict_until(const std::function<bool(uint64_t evicted)>& enough);
  // Unlinks every name of ino; true if it went (not pinned, not open, still there).
  bool evict_one(uint64_t ino, std::vector<std::pair<uint64_t, std::string>>* gone_names);
  void touch_locked(uint64_t ino, int64_t when_ns);  // REQUIRES: mu_ held

  Pool* pool_;
  const EvictorOptions options_;
  const Hooks hooks_;

  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Tracked> files_;          // GUARDED_BY(mu_)
  std::multimap<int64_t, uint64_t> by_time_;             // GUARDED_BY(mu_): last access -> inode
  std::unordered_map<uint64_t, std::multimap<int64_t, uint64_t>::iterator> where_;  // GUARDED_BY(mu_)
  std::map<std::pair<uint64_t, std::string>, uint64_t> by_name_;  // GUARDED_BY(mu_)
  EvictorStats stats_;                                   // GUARDED_BY(mu_)
  std::vector<std::pair<uint64_t, std::string>> to_forget_;  // GUARDED_BY(mu_): names for the kernel to drop
  std::mutex evict_mu_;  // one eviction pass at a time
  std::atomic<uint64_t> passes_freed_{0};  // eviction passes that freed space
  bool stop_ = false;    // GUARDED_BY(mu_)
  std::condition_variable wake_;
  std::thread thread_;
};

}  // namespace stripefs::fs
