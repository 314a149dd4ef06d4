// SPDX-License-Identifier: Apache-2.0
// stripefs object API: the objects of a pool, in-process, without FUSE.
//
//   stripefs::api::Error err;
//   auto pool = stripefs::api::ObjectPool::Open("/srv/pool/meta", {}, &err);
//   if (!pool) die(err.message);
//   std::string uri;
//   pool->put("models/a.bin", bytes, &uri);   // directories are created as needed
//   std::string back;
//   pool->get(uri, &back);                    // by URI, or by the same name
//
// An unmounted pool is opened in-process: its metadata store is opened here,
// exclusively. A mounted pool is reached through its daemon instead, over
// the object channel (a Unix socket to connect, memory shared with the
// daemon for requests and data; see api/object_channel.h): what the API writes, the mount
// shows at once, and the other way round. path() says which way was taken.
// Either way it is the same namespace. An ObjectPool is thread-safe. Link with the stripefs_engine library; see
// examples/object_api_example.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace stripefs::api {

// code: 0 on success, otherwise an errno value (ENOENT, ENOSPC, EIO, ...);
// message says what went wrong.
struct Error {
  int code = 0;
  std::string message;
  explicit operator bool() const { return code != 0; }
};

struct Options {
  std::string ram_cache = "s3fifo";  // the RAM tier: "s3fifo", "lru" or "off"
  uint64_t ram_cache_bytes = 0;      // 0: the size of the pool's RAM segment
  bool sync_writes = false;          // put, append and remove return once durable
  // The RAM tier's write-back buffer (on when the RAM tier is, unless
  // sync_writes): a put of at most 256 KiB is held in memory and stored on
  // sync(), on a timer, when the buffer is full, or on close. sync() reports
  // any failure to store it (ENOSPC, EIO), as fsync(2) does for a page cache.
  bool write_back = true;
  uint64_t write_back_bytes = 0;          // 0: a quarter of the RAM tier, at most 64 MiB
  uint32_t write_back_interval_ms = 1000;  // the timer
  // Where a mount's daemon serves the object channel: "" for its default,
  // objects.sock in the pool's directory (for an etcd pool, in the daemon's
  // state directory under /run/stripefs). Through the channel the daemon's
  // mount options apply; ram_cache and the write-back settings above do not
  // (the daemon writes through).
  std::string channel_socket;
};

struct Stats {
  uint64_t gets = 0, puts = 0, appends = 0, removes = 0, not_found = 0;
  uint64_t bytes_read = 0, bytes_written = 0;
  uint64_t cache_hits = 0, cache_misses = 0, cache_evictions = 0, cache_bytes = 0, cache_capacity = 0;
  uint64_t dirty_bytes = 0, dirty_objects = 0;  // in the write-back buffer, not yet on the drives
};

// Memory a read can fill without a copy in the caller's process (from
// ObjectPool::alloc_buffer): through the object channel it is shared with
// the mount's daemon, which reads into it directly; in-process it is plain
// memory, as any buffer is filled directly there. It may outlive its pool.
class IoBuffer {
 public:
  virtual ~IoBuffer() = default;
  virtual std::span<char> span() = 0;
};

class ObjectPool {
 public:
  // Opens the pool whose metadata directory is meta_dir: through the daemon
  // of its mount when one serves the channel, else in-process. Null and
  // *error set when it cannot (EBUSY: mounted, with no channel found).
  static std::unique_ptr<ObjectPool> Open(const std::string& meta_dir, const Options& options, Error* error);
  virtual ~ObjectPool() = default;

  // Names are paths inside the pool, "a/b/c" ("/a/b/c" is the same). To read,
  // an object's URI (stripefs://<pool uuid>/<inode>, as put returns it and
  // `stripefs placement` prints it) works as well.

  // Creates or replaces the object; directories on the way are created.
  virtual Error put(std::string_view name, std::string_view data, std::string* uri = nullptr) = 0;
  // Adds data at the end of the object (created if missing).
  virtual Error append(std::string_view name, std::string_view data) = 0;
  // The whole object.
  virtual Error get(std::string_view name, std::string* data) = 0;
  // Up to length bytes from offset (fewer at the end of the object).
  virtual Error read(std::string_view name, uint64_t offset, size_t length, std::string* data) = 0;
  // Up to buffer.size() bytes from offset into the caller's memory, with no
  // copy on the way; *got is how many (fewer at the end of the object), and
  // *object_size, when given, the size of the whole object.
  virtual Error read_into(std::string_view name, uint64_t offset, std::span<char> buffer, size_t* got,
                          uint64_t* object_size = nullptr) = 0;
  // The object's size in bytes: ENOENT when there is none of that name.
  virtual Error size(std::string_view name, uint64_t* size) = 0;
  virtual Error remove(std::string_view name) = 0;
  // The names in directory dir ("" is the root), sorted.
  virtual Error list(std::string_view dir, std::vector<std::string>* names) = 0;
  // get() of each name: (*data)[i] and (*errors)[i] belong to names[i].
  virtual void multi_get(std::span<const std::string> names, std::vector<std::string>* data,
                         std::vector<Error>* errors);
  // Makes everything written so far durable: the write-back buffer stored,
  // drives flushed, metadata synced. An object the buffer could not store
  // stays buffered (readable, retried by the next sync) and is reported here.
  virtual Error sync() = 0;
  virtual Stats stats() const = 0;
  // A buffer of size bytes for read_into: a read into any part of it makes
  // no copy in this process (the 3FS USRBIO shape). Null and *error set when
  // it cannot be made. Allocate few and reuse them: each is a mapping.
  virtual std::unique_ptr<IoBuffer> alloc_buffer(size_t size, Error* error) = 0;
  // How the pool is reached: "in-process" (its metadata store opened here)
  // or "daemon" (the object channel of the mount's daemon).
  virtual const char* path() const = 0;
};

}  // namespace stripefs::api
