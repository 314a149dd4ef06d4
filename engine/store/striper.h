// SPDX-License-Identifier: Apache-2.0
// The striper: cuts a byte range of an object into per-chunk pieces.
#pragma once

#include <cstdint>
#include <vector>

namespace stripefs {

struct ChunkPiece {
  uint64_t index;         // chunk number in the object
  uint32_t offset;        // offset inside the chunk
  uint32_t length;        // bytes of this piece
  uint64_t buffer_offset; // where the piece starts in the caller's buffer
};

// Pieces of [offset, offset+length) in order. REQUIRES: chunk_size > 0.
inline std::vector<ChunkPiece> SplitRange(uint64_t offset, uint64_t length, uint32_t chunk_size) {
  std::vector<ChunkPiece> pieces;
  uint64_t done = 0;
  while (done < length) {
    uint64_t pos = offset + done;
    uint32_t in_chunk = static_cast<uint32_t>(pos % chunk_size);
    uint64_t n = std::min<uint64_t>(chunk_size - in_chunk, length - done);
    pieces.push_back({pos / chunk_size, in_chunk, static_cast<uint32_t>(n), done});
    done += n;
  }
  return pieces;
}

}  // namespace stripefs
