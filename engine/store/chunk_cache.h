// SPDX-License-Identifier: Apache-2.0
// The RAM tier's read cache: the verified contents of whole chunks, by
// (inode, chunk index), within the capacity of the pool's RAM segment.
// Which chunks stay is an EvictionPolicy's decision (LRU or S3-FIFO).
//
// Coherence is the object store's job: it erases a chunk before changing it
// (write, truncate, punch, reclaim) while holding the object exclusively, and
// inserts only under the object's shared lock, so a stale copy is never put
// back after an erase.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace stripefs {

// Tracks entries by id; told of every insertion, hit and erase; names the
// next entry to evict. Not thread-safe: the cache calls it under its lock.
class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  // Returns the entry's handle: the cache keeps it with the entry and passes
  // it to accessed(), so a hit reaches the policy's state without a second
  // lookup. Valid until the id is erased or returned by victim().
  virtual void* inserted(uint64_t id) = 0;
  virtual void accessed(void* handle) = 0;
  virtual void erased(uint64_t id) = 0;
  // The entry to evict now, no longer tracked; nullopt when empty.
  virtual std::optional<uint64_t> victim() = 0;
};

// Least recently used first.
std::unique_ptr<EvictionPolicy> NewLruPolicy();
// S3-FIFO (Yang et al., SOSP'23): new entries go to a small FIFO (a tenth of
// the entries); those hit while there move to the main FIFO, the rest leave
// and are remembered in a ghost FIFO, and come back straight to main. A
// scan of once-read chunks only ever passes through the small queue.
std::unique_ptr<EvictionPolicy> NewS3FifoPolicy();
// "lru" or "s3fifo".
std::unique_ptr<EvictionPolicy> NewEvictionPolicy(const std::string& name);

struct CacheStats {
  uint64_t hits = 0, misses = 0, insertions = 0, evictions = 0;
  uint64_t bytes = 0, capacity = 0, entries = 0;
};

using PolicyFactory = std::function<std::unique_ptr<EvictionPolicy>()>;

class ChunkCache {
 public:
  // taken: bytes of the same memory in use elsewhere (files of ram
  // directories share the RAM segment); the cache keeps to what is left.
  // A large cache is split into shards by inode, each with its own lock,
  // policy and an equal part of the capacity, so a flush inserting chunks
  // does not hold up readers of other objects.
  ChunkCache(uint64_t capacity_bytes, const PolicyFactory& make_policy, std::function<uint64_t()> taken = {});

  // Copies [offset, offset + len) of a cached chunk into out (bytes past the
  // chunk's length as zeros). False on a miss.
  bool read(uint64_t ino, uint64_t index, uint32_t offset, uint32_t len, char* out);
  // Caches the first `length` bytes of a chunk (its whole valid data).
  // Chunks larger than a quarter of a shard's capacity are not taken.
  void insert(uint64_t ino, uint64_t index, const char* data, uint32_t length);
  void erase(uint64_t ino, uint64_t index);
  void erase_object(uint64_t ino);
  CacheStats stats() const;

 private:
  struct Key {
    uint64_t ino, index;
    bool operator==(const Key& o) const { return ino == o.ino && index == o.index; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<uint64_t>()(k.ino * 0x9e3779b97f4a7c15ULL ^ k.index); }
  };
  struct Entry {
    uint64_t id;
    void* policy_handle;
    std::unique_ptr<char[]> data;
    uint32_t length;
  };
  // All chunks of an inode are in one shard, so erase_object locks one.
  struct Shard {
    uint64_t capacity = 0;
    mutable std::mutex mu;
    std::unique_ptr<EvictionPolicy> policy;                  // GUARDED_BY(mu)
    std::unordered_map<Key, Entry, KeyHash> entries;         // GUARDED_BY(mu)
    std::unordered_map<uint64_t, Key> by_id;                 // GUARDED_BY(mu)
    std::unordered_map<uint64_t, std::set<uint64_t>> by_ino; // GUARDED_BY(mu): chunk indexes cached per inode
    CacheStats stats;                                        // GUARDED_BY(mu)
    void erase_locked(const Key& k);                         // REQUIRES: mu held
  };
  Shard& shard(uint64_t ino) const;

  const uint64_t capacity_;
  const std::function<uint64_t()> taken_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace stripefs
