// SPDX-License-Identifier: Apache-2.0
// The RAM tier's write-back buffer for small objects put through the object
// API. A put is kept in memory and answered at once; the bytes reach the
// drives (ObjectStore::replace_many: up to 512 objects per commit) when the
// owner syncs, on a timer, or on close; once 512 objects (or half its byte
// limit) are waiting, the flusher thread starts at once, and at the limit
// puts wait for it (back-pressure). Readers see buffered data first, so the
// buffer never changes what a get returns.
//
// A new object can be buffered before it has a namespace entry: take() is
// then given the entry reserved for it (Namespace::reserve), and the flush
// that first stores the object stores the entry in the same commit. Until
// then the object is "unnamed": lookups in the namespace do not find it.
//
// Nothing leaves the buffer before it is stored: a flush that fails (a full
// pool, a drive error) keeps the object dirty and the next flush tries again;
// flush_all() reports the failure, which is how sync() learns of it. While
// the drives have less free space than everything buffered plus the new
// object (and some slack), take() stores everything buffered and refuses, so
// what was put earlier gets its room first and a put on a nearly full pool
// is written through and gets its ENOSPC at once.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/store/object_store.h"

namespace stripefs {

struct WriteBackOptions {
  uint64_t max_bytes = 64ull << 20;    // dirty bytes held at most; past half, the flusher starts; at it, puts wait
  uint64_t max_object = 256ull << 10;  // larger objects are written through
  uint32_t interval_ms = 1000;         // the timer: everything dirty is flushed this often
};

struct WriteBackStats {
  uint64_t dirty_bytes = 0, dirty_objects = 0;
};

class WriteBackBuffer {
 public:
  // free_bytes: the drives' free space (Pool::drive_free).
  WriteBackBuffer(ObjectStore* store, std::function<uint64_t()> free_bytes, WriteBackOptions options);
  ~WriteBackBuffer();  // stops the timer and flushes; failures are logged

  // Buffers data as the whole new contents of obj; entry: obj's reserved
  // namespace entry, when obj is new (kept until a flush stores it, across
  // later takes). False when the caller must write it through itself (too
  // large, empty, or the drives too full to promise room for it); an entry
  // is then not kept.
  bool take(std::shared_ptr<ObjectStore::Object> obj, std::string_view data,
            std::shared_ptr<const meta::NewEntry> entry = nullptr);
  // Whether take() buffers a put of this many bytes when there is room.
  bool takes(size_t bytes) const;
  // The reserved entry of ino while no flush has stored it; null otherwise.
  std::shared_ptr<const meta::NewEntry> unnamed(uint64_t ino) const;
  // The entries of every object not stored yet.
  std::vector<std::shared_ptr<const meta::NewEntry>> unnamed_entries() const;
  // Up to length bytes from offset of a buffered object into place(n), n
  // being how many there are; how many were copied, or nullopt when ino is
  // not buffered (place is then not called). *object_size, when given, is
  // set to the buffered object's size.
  template <typename Place>
  std::optional<uint64_t> read(uint64_t ino, uint64_t offset, uint64_t length, Place place,
                               uint64_t* object_size = nullptr) const {
    if (dirty_count_.load(std::memory_order_acquire) == 0) return std::nullopt;
    std::lock_guard lock(mu_);
    auto it = dirty_.find(ino);
    if (it == dirty_.end()) return std::nullopt;
    const std::string& data = *it->second.data;
    const uint64_t n = offset >= data.size() ? 0 : std::min<uint64_t>(length, data.size() - offset);
    if (object_size) *object_size = data.size();
    char* to = place(n);
    if (n) memcpy(to, data.data() + offset, n);
    return n;
  }
  // The size of a buffered object; nullopt when ino is not buffered.
  std::optional<uint64_t> size(uint64_t ino) const;
  // Writes ino's buffered contents now (before an append extends them, or
  // a write-through replaces an unnamed object, which then has its entry).
  Status flush(uint64_t ino);
  // Drops ino's buffered contents unwritten (it is being removed, or replaced
  // by a write-through), after any flush of it in progress has finished.
  // True when ino was unnamed: it never reached the namespace, and now never will.
  bool discard(uint64_t ino);
  // Writes everything buffered; the first failure, with every failed object
  // still buffered.
  Status flush_all();
  WriteBackStats stats() const;

 private:
  struct Dirty {
    std::shared_ptr<ObjectStore::Object> obj;
    std::shared_ptr<const std::string> data;  // shared with a flush in progress
    uint64_t generation = 0;                  // bumped by each take(): a flush removes only what it wrote
    std::shared_ptr<const meta::NewEntry> entry;  // until a flush stores it (see take())
  };
  // Stores a batch of entries in one commit and drops the ones stored (or
  // removed meanwhile); the first failure. REQUIRES: flush_mu_ held.
  Status flush_locked(std::span<const std::pair<uint64_t, Dirty>> batch);
  // Removes an entry, and wakes writers waiting for room. REQUIRES: mu_ held.
  void drop_locked(std::unordered_map<uint64_t, Dirty>::iterator it);
  void run();

  ObjectStore* store_;
  const std::function<uint64_t()> free_bytes_;
  const WriteBackOptions options_;

  std::mutex flush_mu_;  // one flush at a time, so an object's versions reach the drives in order
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Dirty> dirty_;  // GUARDED_BY(mu_)
  std::atomic<size_t> dirty_count_{0};         // dirty_.size(), read without mu_ so clean reads skip the lock
  uint64_t dirty_bytes_ = 0;                   // GUARDED_BY(mu_)
  uint64_t next_generation_ = 1;               // GUARDED_BY(mu_)
  bool stop_ = false;                          // GUARDED_BY(mu_)
  bool flush_soon_ = false;                    // GUARDED_BY(mu_): past half the limit, or a writer waits for room
  bool flush_failed_ = false;                  // GUARDED_BY(mu_): the last flush_all() failed
  std::condition_variable wake_;               // the flusher: timer, flush_soon_, stop_
  std::condition_variable room_;               // writers waiting for the flusher to free room
  std::thread timer_;
};

}  // namespace stripefs
