// SPDX-License-Identifier: Apache-2.0
// The plan of one chunk's part of a staged write (ObjectStore::StagedWrite),
// shared by the write path (write_staging.cc) and the deferred writes
// (deferred_writes.cc). Internal to engine/store/.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/store/aligned_buffer.h"
#include "engine/store/chunk_space.h"
#include "engine/store/object_store.h"
#include "engine/store/striper.h"

namespace stripefs {

// One chunk's part of a staged write.
struct ObjectStore::StagedWrite::Plan {
  ChunkPiece piece;
  bool existed = false;
  bool relocated = false;  // the chunk's data moves to new extents
  bool moved = false;      // out of place: the blocks it overwrites move to new extents (in `fresh`)
  std::vector<meta::Replica> fresh;       // moved: the new extents, given back if the write fails
  std::vector<FreeLedger::Freed> replaced;  // moved: the old extents, freed by the commit
  std::shared_ptr<const AlignedBuffer> deferred;  // deferred: blocks [first_block, last_block), as in the record
  meta::ChunkRecord before, after;
  uint32_t first_block = 0;
  uint32_t last_block = 0;
  AlignedBuffer buf;            // when the caller's bytes cannot be written as they are
  const char* bytes = nullptr;  // blocks [first_block, last_block) as they go to the drives
  size_t length() const { return size_t{last_block - first_block} * store_space::kBlock; }
};

}  // namespace stripefs
