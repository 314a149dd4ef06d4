// The arithmetic of a chunk's space shared by the object store's files
// (object_store.cc, write_staging.cc, object_ops.cc, checked_reads.cc):
// block rounding, what a chunk takes on the drives, and cutting its replicas
// short. Internal to engine/store/.
#pragma once

#include <cstdint>
#include <vector>

#include "meta/schema.h"

namespace stripefs::store_space {

inline constexpr uint32_t kBlock = meta::kBlockSize;

inline uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// The bytes a chunk holds reserved on the drives, every replica counted.
inline uint64_t Footprint(const meta::ChunkRecord& r) { return uint64_t{r.capacity} * r.replicas.size(); }

// Cuts every replica to its first `keep` bytes; returns what was cut off.
inline std::vector<meta::Replica> CutReplicas(std::vector<meta::Replica>& replicas, uint64_t keep) {
  std::vector<meta::Replica> tails;
  for (meta::Replica& r : replicas) {
    meta::Replica& t = tails.emplace_back();
    t.segment = r.segment;
    r.cut(keep, &t.extents);
  }
  return tails;
}

}  // namespace stripefs::store_space
