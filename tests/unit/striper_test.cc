// SPDX-License-Identifier: Apache-2.0
// SplitRange: cutting a byte range of an object into per-chunk pieces.
#include "engine/store/striper.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <tuple>
#include <vector>

namespace stripefs {

// Found by argument-dependent lookup, so they live in stripefs itself (file-local).
static bool operator==(const ChunkPiece& a, const ChunkPiece& b) {
  return a.index == b.index && a.offset == b.offset && a.length == b.length && a.buffer_offset == b.buffer_offset;
}

[[maybe_unused]] static void PrintTo(const ChunkPiece& p, std::ostream* os) {
  *os << "{index=" << p.index << " offset=" << p.offset << " length=" << p.length
      << " buffer_offset=" << p.buffer_offset << "}";
}

namespace {

// The invariants every split must satisfy, whatever the inputs.
void CheckSplit(uint64_t offset, uint64_t length, uint32_t chunk_size) {
  SCOPED_TRACE(testing::Message() << "offset=" << offset << " length=" << length << " chunk=" << chunk_size);
  auto pieces = SplitRange(offset, length, chunk_size);
  if (length == 0) {
    EXPECT_TRUE(pieces.empty());
    return;
  }
  ASSERT_FALSE(pieces.empty());
  uint64_t expect_buffer = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const ChunkPiece& p = pieces[i];
    EXPECT_GT(p.length, 0u) << "piece " << i;
    EXPECT_EQ(p.buffer_offset, expect_buffer) << "piece " << i << " is not contiguous";
    EXPECT_LT(p.offset, chunk_size) << "piece " << i;
    EXPECT_LE(uint64_t{p.offset} + p.length, chunk_size) << "piece " << i << " crosses its chunk";
    // The piece maps back to exactly the right object bytes.
    EXPECT_EQ(p.index * chunk_size + p.offset, offset + p.buffer_offset) << "piece " << i;
    if (i > 0) {
      EXPECT_EQ(p.index, pieces[i - 1].index + 1) << "piece " << i;
      EXPECT_EQ(p.offset, 0u) << "only the first piece may start inside a chunk";
    }
    if (i + 1 < pieces.size()) {
      EXPECT_EQ(uint64_t{p.offset} + p.length, chunk_size) << "only the last piece may end inside a chunk";
    }
    expect_buffer += p.length;
  }
  EXPECT_EQ(expect_buffer, length) << "piece lengths must sum to the request";
}

TEST(SplitRangeTest, InsideOneChunk) {
  EXPECT_EQ(SplitRange(100, 200, 4096), (std::vector<ChunkPiece>{{0, 100, 200, 0}}));
  EXPECT_EQ(SplitRange(0, 4096, 4096), (std::vector<ChunkPiece>{{0, 0, 4096, 0}}));
  // Inside a later chunk.
  EXPECT_EQ(SplitRange(3 * 4096 + 7, 10, 4096), (std::vector<ChunkPiece>{{3, 7, 10, 0}}));
  // Ending exactly at the chunk's end.
  EXPECT_EQ(SplitRange(4000, 96, 4096), (std::vector<ChunkPiece>{{0, 4000, 96, 0}}));
}

TEST(SplitRangeTest, AcrossBoundaries) {
  EXPECT_EQ(SplitRange(4000, 200, 4096), (std::vector<ChunkPiece>{{0, 4000, 96, 0}, {1, 0, 104, 96}}));
  // Spanning three chunks, first and last partial.
  EXPECT_EQ(SplitRange(1000, 2 * 4096, 4096),
            (std::vector<ChunkPiece>{{0, 1000, 3096, 0}, {1, 0, 4096, 3096}, {2, 0, 1000, 7192}}));
  // One byte on each side of a boundary.
  EXPECT_EQ(SplitRange(4095, 2, 4096), (std::vector<ChunkPiece>{{0, 4095, 1, 0}, {1, 0, 1, 1}}));
}

TEST(SplitRangeTest, ExactMultiples) {
  EXPECT_EQ(SplitRange(8192, 8192, 4096), (std::vector<ChunkPiece>{{2, 0, 4096, 0}, {3, 0, 4096, 4096}}));
  const uint32_t mib = 1 << 20;
  auto pieces = SplitRange(0, 4ull * mib, mib);
  ASSERT_EQ(pieces.size(), 4u);
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(pieces[i], (ChunkPiece{i, 0, mib, i * mib}));
  }
}

TEST(SplitRangeTest, ZeroLength) {
  EXPECT_TRUE(SplitRange(0, 0, 4096).empty());
  EXPECT_TRUE(SplitRange(12345, 0, 4096).empty());
  EXPECT_TRUE(SplitRange(4096, 0, 4096).empty());
}

TEST(SplitRangeTest, LargeOffsetsBeyond4GiB) {
  const uint32_t chunk = 4u << 20;
  const uint64_t off = (5ull << 30) + 10;  // 5 GiB + 10: chunk 1280
  EXPECT_EQ(SplitRange(off, 100, chunk), (std::vector<ChunkPiece>{{1280, 10, 100, 0}}));
  CheckSplit((1ull << 40) - 3, 10, chunk);
}

TEST(SplitRangeTest, ChunkSizeOne) {
  auto pieces = SplitRange(5, 3, 1);
  EXPECT_EQ(pieces, (std::vector<ChunkPiece>{{5, 0, 1, 0}, {6, 0, 1, 1}, {7, 0, 1, 2}}));
}

TEST(SplitRangeTest, InvariantsOverManyRanges) {
  const std::vector<uint32_t> chunks = {1, 512, 4096, 4096 * 3 + 1, 1u << 20, 4u << 20};
  const std::vector<uint64_t> offsets = {0, 1, 511, 4095, 4096, 4097, 12289, (1u << 20) - 1, 1u << 20,
                                         (3ull << 20) + 77, (1ull << 33) + 5};
  const std::vector<uint64_t> lengths = {0, 1, 2, 4095, 4096, 4097, 12288, (1u << 20) + 1, 9ull << 20};
  for (uint32_t c : chunks) {
    for (uint64_t o : offsets) {
      for (uint64_t l : lengths) {
        if (c == 1 && l > 5000) continue;  // keeps the piece count reasonable
        CheckSplit(o, l, c);
      }
    }
  }
}

}  // namespace
}  // namespace stripefs
