// Placement strategies: which segments a new chunk should go to. A strategy
// only ranks segments; the chunk's actual location is recorded in its
// ChunkRecord and never recomputed (DESIGN invariant 1).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "meta/status.h"

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
};

// Thread-safe.
class PlacementStrategy {
 public:
  virtual ~PlacementStrategy() = default;
  virtual std::string_view name() const = 0;
  // Every candidate segment, most preferred first. The caller allocates on the
  // first ones that have room, one replica per segment.
  virtual std::vector<uint32_t> rank(const PlacementRequest& req,
                                     const std::vector<SegmentView>& drives) const = 0;
};

// First 8 bytes of SHA-256(uri), big-endian: stable across restarts and builds.
uint64_t ObjectHash(std::string_view uri);

// "striped", "random" or "free-ratio-first"; kInvalidArgument names the choices otherwise.
Result<std::unique_ptr<PlacementStrategy>> MakeStrategy(std::string_view name);
const std::vector<std::string>& StrategyNames();

}  // namespace stripefs
