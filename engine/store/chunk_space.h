// SPDX-License-Identifier: Apache-2.0
// The arithmetic of a chunk's space shared by the object store's files
// (object_store.cc, write_staging.cc, object_ops.cc, checked_reads.cc):
// block rounding, what a chunk takes on the drives, and cutting its replicas
// short. Internal to engine/store/.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/crc32c.h"
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

// r with its bytes [pos, pos+len) moved to the extents `fresh` (as long).
inline meta::Replica SpliceReplica(const meta::Replica& r, uint64_t pos, uint64_t len,
                                   const std::vector<meta::Extent>& fresh) {
  meta::Replica m;
  m.segment = r.segment;
  r.map(0, pos, [&](uint64_t at, uint64_t, uint64_t n) { m.append({at, n}); });
  for (const meta::Extent& e : fresh) m.append(e);
  r.map(pos + len, r.bytes() - pos - len, [&](uint64_t at, uint64_t, uint64_t n) { m.append({at, n}); });
  return m;
}

// Whether the chunk's last block, when the chunk's length ends inside it,
// verifies with its bytes past the length zeroed (and zeroes them). Bytes
// past the length are not data: a write appended there may have reached the
// drive while its commit was lost, and a block's checksum is of its bytes
// with zeros past the length (writes and truncates store it so).
inline bool TailVerifiesZeroed(const meta::ChunkRecord& rec, uint32_t block, char* bytes) {
  const uint64_t start = uint64_t{block} * kBlock;
  if (block + 1 != rec.blocks() || rec.length - start >= kBlock) return false;
  const size_t valid = rec.length - start;
  std::memset(bytes + valid, 0, kBlock - valid);
  return rec.block_matches(block, Crc32c(bytes, kBlock));
}

}  // namespace stripefs::store_space
