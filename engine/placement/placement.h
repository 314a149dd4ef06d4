// SPDX-License-Identifier: Apache-2.0
// Placement: which segments a new chunk's replicas go to. A strategy only
// ranks segments; the Placer reserves the space. Where a chunk ends up is
// recorded in its ChunkRecord and never recomputed (DESIGN invariant 1).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/placement/allocator.h"
#include "engine/io/io_backend.h"  // kMaxSegments
#include "meta/schema.h"
#include "base/status.h"

namespace stripefs {

struct SegmentView {
  uint32_t id;
  uint64_t capacity;
  uint64_t free;
};

struct PlacementRequest {
  uint64_t object_hash;  // ObjectHash(uri)
  uint64_t chunk_index;
  uint64_t length;       // bytes wanted on each replica
  bool spread = false;   // each replica may lie in several free runs; else in one
};

// Thread-safe (strategies keep no shared mutable state).
class PlacementStrategy {
 public:
  virtual ~PlacementStrategy() = default;
  virtual std::string_view name() const = 0;
  // Writes into *order the positions (indexes into segments) of every segment,
  // most preferred first, each exactly once. The Placer takes the first ones
  // that have room, one replica per segment.
  virtual void rank(const PlacementRequest& req, std::span<const SegmentView> segments,
                    std::vector<uint32_t>* order) const = 0;
  // True for the `ram` strategy: its chunks go to RAM segments only. Every
  // other strategy places on drives only.
  virtual bool ram_only() const { return false; }
};

// The per-directory strategy whose files live in the pool's RAM segment only
// (fast, and gone when the pool is mounted again). Not in StrategyNames():
// that lists the strategies for drives.
inline constexpr std::string_view kRamStrategy = meta::kRamStrategyName;

// First 8 bytes of SHA-256(uri), big-endian: stable across restarts and builds.
uint64_t ObjectHash(std::string_view uri);

// By name: "striped", "random", "free-ratio-first", "two-choice", "round-robin",
// or kRamStrategy; kInvalidArgument names the choices otherwise.
Result<std::unique_ptr<PlacementStrategy>> MakeStrategy(std::string_view name);
const std::vector<std::string>& StrategyNames();

// The segments new chunks may go to, and the one routine that places replicas
// on them: used by the object store and by the allocation benchmark alike.
// Thread-safe. Segments can be added while place() runs (a drive added to a
// mounted pool), never removed.
class Placer {
 public:
  struct Segment {
    uint32_t id;
    SegmentAllocator* allocator;  // not owned
    bool ram = false;             // a RAM segment: only ram_only() strategies place there
  };
  explicit Placer(std::vector<Segment> segments);
  Placer(const Placer&) = delete;
  Placer& operator=(const Placer&) = delete;

  // Makes segment s a candidate for every place() that starts after this
  // returns. kInvalidArgument when its id is taken or past the table.
  Status add(Segment s);

  // Reserves req.length bytes on up to `want` distinct segments, in the
  // strategy's order: in one free run each, or spread over several
  // (req.spread). Succeeds when at least `min` replicas were placed (1 <= min
  // <= want); otherwise releases what it reserved and returns kNoSpace
  // (describe_free() says why). The filesystem asks for min == want: a chunk
  // is stored with all its replicas or not at all.
  Result<std::vector<meta::Replica>> place(const PlacementStrategy& strategy, const PlacementRequest& req,
                                           uint32_t want, uint32_t min) const;
  // Gives every extent of the replicas back to its segment.
  void release(const std::vector<meta::Replica>& replicas) const;
  // The free bytes and the longest free run of each segment of the kind a
  // strategy places on, for messages: "drive 0: 12.0 KiB free (longest run 4.0 KiB), ...".
  std::string describe_free(bool ram) const;
  size_t size() const { return count_.load(std::memory_order_acquire); }

 private:
  // Growing without a lock on the read side: both tables are sized once, at
  // construction, and never reallocated. add() fills the next free entry (and
  // by_id_[id]) and only then publishes it by storing count_ with release;
  // place() loads count_ with acquire and reads only entries below it, so it
  // sees each entry whole. release() looks up ids that place() handed out, so
  // their by_id_ entries were published before. add_mu_ orders adders only.
  std::vector<Segment> segments_;         // [0, count_) are live
  std::vector<SegmentAllocator*> by_id_;  // segment id -> allocator (null: not placeable)
  std::atomic<size_t> count_{0};
  std::mutex add_mu_;
};

}  // namespace stripefs
