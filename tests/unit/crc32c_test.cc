// SPDX-License-Identifier: Apache-2.0
// CRC-32C: known vectors, agreement with a bitwise reference, and chaining.
//
// Seed semantics (engine/crc32c.cc): Crc32c(data, len, seed) starts from ~seed
// and returns the final complement, so the value returned for a prefix is the
// seed that continues the computation: Crc32c(ab) == Crc32c(b, Crc32c(a)).
#include "base/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace stripefs {
namespace {

// Bit-at-a-time reference over the reflected Castagnoli polynomial.
uint32_t Reference(const void* data, size_t len, uint32_t seed = 0) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t crc = ~seed;
  for (size_t i = 0; i < len; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(Crc32cTest, KnownVectors) {
  const char* digits = "123456789";
  EXPECT_EQ(Crc32c(digits, 9), 0xE3069283u);
  const std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  const std::vector<uint8_t> ones(32, 0xff);
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62A8AB43u);  // RFC 3720 B.4
  std::vector<uint8_t> inc(32);
  for (size_t i = 0; i < 32; ++i) inc[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32c(inc.data(), inc.size()), 0x46DD794Eu);  // RFC 3720 B.4
  EXPECT_EQ(Crc32c(nullptr, 0), 0u);
}

TEST(Crc32cTest, MatchesBitwiseReferenceForAllLengthsAndAlignments) {
  auto bytes = RandomBytes(4096 + 64, 7);
  for (size_t align = 0; align < 8; ++align) {
    for (size_t len = 0; len <= 80; ++len) {
      ASSERT_EQ(Crc32c(bytes.data() + align, len), Reference(bytes.data() + align, len))
          << "align=" << align << " len=" << len;
    }
  }
  // A whole block, the size stripefs checksums.
  EXPECT_EQ(Crc32c(bytes.data(), 4096), Reference(bytes.data(), 4096));
  EXPECT_EQ(Crc32c(bytes.data() + 3, 4096), Reference(bytes.data() + 3, 4096));
}

TEST(Crc32cTest, SeedsMatchReference) {
  auto bytes = RandomBytes(100, 11);
  for (uint32_t seed : {0u, 1u, 0xDEADBEEFu, 0xFFFFFFFFu}) {
    EXPECT_EQ(Crc32c(bytes.data(), bytes.size(), seed), Reference(bytes.data(), bytes.size(), seed))
        << "seed=" << seed;
  }
}

TEST(Crc32cTest, SeedsChain) {
  const std::string ab = "The quick brown fox jumps over the lazy dog, twice over.";
  for (size_t split = 0; split <= ab.size(); ++split) {
    uint32_t a = Crc32c(ab.data(), split);
    EXPECT_EQ(Crc32c(ab.data() + split, ab.size() - split, a), Crc32c(ab.data(), ab.size()))
        << "split=" << split;
  }
  // Three pieces over a block of random data.
  auto bytes = RandomBytes(4096, 3);
  uint32_t c = Crc32c(bytes.data(), 1000);
  c = Crc32c(bytes.data() + 1000, 1, c);
  c = Crc32c(bytes.data() + 1001, 4096 - 1001, c);
  EXPECT_EQ(c, Crc32c(bytes.data(), 4096));
}

TEST(Crc32cTest, DetectsEverySingleBitFlipInABlock) {
  auto bytes = RandomBytes(4096, 5);
  const uint32_t good = Crc32c(bytes.data(), bytes.size());
  for (size_t i = 0; i < bytes.size(); i += 97) {
    for (int bit = 0; bit < 8; ++bit) {
      bytes[i] ^= static_cast<uint8_t>(1u << bit);
      ASSERT_NE(Crc32c(bytes.data(), bytes.size()), good) << "byte " << i << " bit " << bit;
      bytes[i] ^= static_cast<uint8_t>(1u << bit);
    }
  }
  EXPECT_EQ(Crc32c(bytes.data(), bytes.size()), good);
}

TEST(Crc32cTest, BlocksMatchOneAtATime) {
  // Every count from 0 to 8 exercises the three-at-a-time path and its remainder.
  std::vector<uint8_t> data(8 * 4096);
  uint32_t x = 12345;
  for (auto& b : data) b = static_cast<uint8_t>((x = x * 1103515245 + 12345) >> 16);
  for (size_t block : {size_t{4096}, size_t{512}, size_t{12}}) {
    for (size_t count = 0; count * block <= data.size() && count <= 8; ++count) {
      std::vector<uint32_t> got(count + 1, 0xdeadbeef);
      Crc32cBlocks(data.data(), block, count, got.data());
      for (size_t i = 0; i < count; ++i) {
        EXPECT_EQ(got[i], Crc32c(data.data() + i * block, block)) << "block " << block << " count " << count << " i " << i;
      }
      EXPECT_EQ(got[count], 0xdeadbeefu) << "wrote past the last block";
    }
  }
}

}  // namespace
}  // namespace stripefs
