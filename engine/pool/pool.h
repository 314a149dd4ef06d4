// SPDX-License-Identifier: Apache-2.0
// A pool: its metadata store, its drives (each with a superblock naming the
// pool), their allocators, the namespace and the object store on top.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/placement/allocator.h"
#include "engine/io/io_backend.h"
#include "engine/store/object_store.h"
#include "meta/kv_store.h"
#include "meta/namespace.h"

namespace stripefs {

inline constexpr uint64_t kDataOffset = 1 << 20;  // the data area starts after the superblock

struct DriveSpec {
  std::string path;
  uint64_t size = 0;  // 0: use the existing file or device size
};

struct FormatOptions {
  std::string meta_dir;
  std::vector<DriveSpec> drives;
  uint64_t ram_size = 0;
  uint32_t chunk_size = 4u << 20;
  std::string strategy = "striped";
  uint32_t replicas = 1;
  bool force = false;  // overwrite drives and a metadata dir that hold a pool
};

struct SegmentUsage {
  uint32_t id;
  std::string kind;
  std::string path;
  uint64_t capacity;
  uint64_t used;
  bool missing = false;  // a drive left out of a degraded mount: nothing known of its use
};

// The most bytes of data that copies on `replicas` different drives can take
// from drives with these amounts each: the largest W with
// sum(min(bytes_i, W)) >= replicas * W, that is the least over j < replicas
// of (the sum of all but the j largest) / (replicas - j). Every byte of it
// can be written: each piece's copies go to the drives with the most room.
uint64_t UsableAtReplicas(std::vector<uint64_t> bytes, uint32_t replicas);

// A scrub report in the JSON of `stripefs scrub --json`:
// {"chunks","bytes","repaired_blocks","missing_replicas","unrepairable":[...]}.
nlohmann::json ScrubReportJson(const ScrubReport& r);

// Validates options, writes a superblock to every drive and creates the metadata store.
Status FormatPool(const FormatOptions& options, uint32_t root_uid, uint32_t root_gid);

// Parses "4M", "1G", "512" (powers of 1024).
Result<uint64_t> ParseSize(std::string_view text);
// A chunk size must be a power of two from 1 MiB to 64 MiB (pool default and per-directory layout alike).
Status CheckChunkSize(uint64_t bytes);

class Pool {
 public:
  enum class Mode {
    kMount,     // read-write, exclusive; rebuilds allocators and reclaims orphans
    kCheck,     // read-write lock held, nothing changed (fsck)
    kInspect,   // read-only, works beside a running daemon (placement, df)
  };
  // Opens the pool whose metadata lives in meta_dir. Refuses a missing, foreign,
  // reordered or truncated drive with a message naming it; with degraded, a
  // missing or unreadable drive is left out instead (its chunks are read from
  // their other replicas, and rewritten onto present drives when written).
  static Result<std::unique_ptr<Pool>> Open(const std::string& meta_dir, Mode mode, bool degraded = false);
  // Drives left out by a degraded open, as "drive N (path): reason".
  const std::vector<std::string>& missing_drives() const { return missing_; }
  ~Pool();

  // A copy: a mounted pool's segment list can grow (add_drive) while other
  // threads ask.
  meta::PoolConfig config() const;
  meta::KvStore& kv() { return *kv_; }
  meta::Namespace& ns() { return *ns_; }
  ObjectStore& store() { return *store_; }

  // Capacity and used bytes of every segment (drives from the allocators when
  // mounted, from the chunk records otherwise; RAM as configured).
  Result<std::vector<SegmentUsage>> usage();
  // usage() in the df contract's JSON: {"segments":[{"id","kind","path","capacity","used"}]}.
  Result<nlohmann::json> usage_json();
  uint64_t drive_capacity() const;
  uint64_t drive_free() const;
  // What statfs reports (df(1)): the present drives' capacity and free space
  // as data at the pool's default replica count (UsableAtReplicas), so what
  // df calls free can be written to a directory with the default layout.
  struct UsableSpace {
    uint32_t replicas;
    uint64_t capacity, free;
  };
  UsableSpace usable_space() const;
  // Bytes of the RAM segment (0 without one): the RAM tier's capacity.
  uint64_t ram_capacity() const;

  // The metadata store's room: RocksDB stops taking any write, deletes
  // included, once its directory's file system is full, and etcd once its
  // database reaches the cluster's quota. So new data and new names are
  // refused (kNoSpace) while less than the reserve is free there; deletes can
  // still commit. Default reserve: 64 MiB or a tenth of that room, the smaller.
  struct MetadataSpace {
    uint64_t used;     // bytes the metadata store takes
    uint64_t free;     // bytes it may still grow by
    uint64_t reserve;  // kept free for deletes
  };
  Result<MetadataSpace> metadata_space() const;
  void set_metadata_reserve(uint64_t bytes) { metadata_reserve_ = bytes; }
  // kNoSpace with a message when the metadata store's room is below the reserve.
  // Looks at most every 100 ms (it is on the write path).
  Status check_metadata_room();
  // The reserve kept for deletes in a metadata store of this size.
  uint64_t reserve_for(uint64_t metadata_size) const;
  // The placement contract's JSON for a regular file. With max_chunk_bytes, one
  // page of it (a live mount answers at most 64 KiB at a time): only the chunks
  // from index first_chunk on whose JSON fits in max_chunk_bytes (at least one),
  // plus "next", the first chunk index of the next page or null after the last,
  // and "ctime_ns", the file's change time, that the pages of one read share.
  Result<nlohmann::json> placement(const meta::InodeRecord& inode, const std::string& path,
                                   uint64_t first_chunk = 0, size_t max_chunk_bytes = 0);
  // Resolves an absolute path inside the pool ("/a/b").
  Result<meta::InodeRecord> resolve(const std::string& path);
  // Every inconsistency found, one line each; empty when clean. With verify,
  // also reads every block and checks its checksum.
  // progress sees, after each chunk, the bytes read and checked so far (with
  // verify) or the space of the chunks checked (without), and about how many
  // it will reach (the files' allocated space).
  Result<std::vector<std::string>> fsck(bool verify, std::vector<std::string>* notes,
                                        const std::function<void(uint64_t bytes, uint64_t about)>& progress = {});
  // Scrubs every file of a pool opened with Mode::kMount (see ObjectStore::scrub)
  // and syncs the repairs; progress sees the running total after each file.
  Result<ScrubReport> scrub(const std::function<void(const ScrubReport&)>& progress);

  // Puts a new drive in place of drive segment `id` (missing or failing) of
  // the unmounted pool in meta_dir: the new drive gets the segment's
  // superblock and the pool records its path; then every replica the segment
  // held is rebuilt from the chunk's other replicas (a scrub of the pool).
  // Chunks with no other intact replica are listed in the report's
  // unrepairable lines. Safe to run again after an interruption.
  // Adds a drive to the unmounted pool in meta_dir: it gets a superblock and
  // the next segment id; the next mount places new chunks on it as well.
  // Existing chunks stay where they are. Returns the new drive's segment id.
  static Result<uint32_t> AddDrive(const std::string& meta_dir, const DriveSpec& drive, bool force);
  // AddDrive on this pool, opened with Mode::kMount and in use: the drive gets
  // its superblock, the configuration records it (synced), and new chunks are
  // placed on it from the moment this returns; reads and writes in other
  // threads go on meanwhile. Refused on a degraded mount. Returns the id.
  Result<uint32_t> add_drive(const DriveSpec& drive, bool force);

  static Result<ScrubReport> ReplaceDrive(const std::string& meta_dir, uint32_t id, const DriveSpec& drive, bool force,
                                          const std::function<void(const ScrubReport&)>& progress);

 private:
  Pool() = default;
  Status open_drives(Mode mode, bool degraded);
  Status open_drive(const meta::SegmentConfig& seg, Mode mode);
  Status rebuild_allocators();
  // Whether a chunk may name segment id: a drive, or the RAM segment (files of
  // ram directories, until the next mount drops them).
  bool holds_chunks(uint32_t id) const;
  // The RAM segment at mount: memory behind a file descriptor, empty.
  Status open_ram_segment(const meta::SegmentConfig& seg);
  // At mount: files of ram directories lost their data with the last mount;
  // their names and records go (before the allocators are rebuilt).
  Status drop_ram_files();

  std::string meta_dir_;
  // config_.segments, fds_ and allocators_ grow when add_drive() runs on a
  // mounted pool: readers outside the data path (df, placement, statfs) take
  // config_mu_ shared, add_drive() takes it exclusive to append. The data
  // path does not use these: it goes through the object store, whose tables
  // are sized once and filled in place (see ObjectStore::add_drive).
  mutable std::shared_mutex config_mu_;
  std::mutex add_drive_mu_;  // one add_drive() at a time, start to end
  meta::PoolConfig config_;
  std::unique_ptr<meta::KvStore> kv_;
  std::unique_ptr<meta::Namespace> ns_;
  std::vector<int> fds_;  // by segment id; -1 for RAM
  std::vector<std::unique_ptr<SegmentAllocator>> allocators_;  // by segment id; null for RAM
  std::unique_ptr<IoBackend> io_;
  std::unique_ptr<ObjectStore> store_;
  bool mounted_ = false;
  std::vector<std::string> missing_;
  std::optional<uint64_t> metadata_reserve_;           // unset: the default
  std::atomic<int64_t> metadata_checked_ns_{0};        // when metadata_low_ was last decided
  std::atomic<bool> metadata_low_{false};
};

}  // namespace stripefs
