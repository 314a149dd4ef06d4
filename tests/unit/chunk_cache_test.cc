// SPDX-License-Identifier: Apache-2.0
// The RAM tier's read cache: eviction policies and coherence with writes.
#include "engine/store/chunk_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace stripefs {
namespace {

std::string Bytes(size_t n, char c) { return std::string(n, c); }

TEST(ChunkCacheTest, HitsCopyTheRangeAndZerosPastTheChunk) {
  ChunkCache cache(1 << 20, NewLruPolicy);
  std::string out(100, 'x');
  EXPECT_FALSE(cache.read(1, 0, 0, 100, out.data()));
  cache.insert(1, 0, "hello world", 11);
  ASSERT_TRUE(cache.read(1, 0, 6, 10, out.data()));
  EXPECT_EQ(out.substr(0, 10), std::string("world") + std::string(5, '\0'));
  const CacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.bytes, 11u);
  EXPECT_EQ(s.entries, 1u);
}

TEST(ChunkCacheTest, StaysWithinCapacityAndRefusesHugeChunks) {
  ChunkCache cache(8000, NewLruPolicy);
  for (uint64_t i = 0; i < 50; ++i) cache.insert(7, i, Bytes(900, 'a').data(), 900);
  const CacheStats s = cache.stats();
  EXPECT_LE(s.bytes, 8000u);
  EXPECT_EQ(s.entries, 8u);
  EXPECT_EQ(s.evictions, 42u);
  cache.insert(8, 0, Bytes(2001, 'b').data(), 2001);  // above a quarter of the capacity
  std::string out(10, '\0');
  EXPECT_FALSE(cache.read(8, 0, 0, 10, out.data()));
}

TEST(ChunkCacheTest, EraseAndEraseObject) {
  ChunkCache cache(1 << 20, NewS3FifoPolicy);
  for (uint64_t i = 0; i < 4; ++i) cache.insert(3, i, "abc", 3);
  cache.insert(4, 0, "xyz", 3);
  std::string out(3, '\0');
  cache.erase(3, 1);
  EXPECT_FALSE(cache.read(3, 1, 0, 3, out.data()));
  EXPECT_TRUE(cache.read(3, 2, 0, 3, out.data()));
  cache.erase_object(3);
  for (uint64_t i = 0; i < 4; ++i) EXPECT_FALSE(cache.read(3, i, 0, 3, out.data())) << i;
  EXPECT_TRUE(cache.read(4, 0, 0, 3, out.data()));
  EXPECT_EQ(out, "xyz");
  EXPECT_EQ(cache.stats().bytes, 3u);
}

// A working set read again and again, then a long scan of chunks read once:
// LRU lets the scan push the working set out; S3-FIFO keeps it.
size_t WorkingSetLeftAfterScan(const PolicyFactory& policy) {
  ChunkCache cache(100 * 1000, policy);  // room for 100 chunks of 1000 B
  const std::string chunk = Bytes(1000, 'w');
  std::string out(1000, '\0');
  for (int round = 0; round < 3; ++round) {
    for (uint64_t i = 0; i < 50; ++i) {
      if (!cache.read(1, i, 0, 1000, out.data())) cache.insert(1, i, chunk.data(), 1000);
    }
  }
  for (uint64_t i = 0; i < 1000; ++i) {
    if (!cache.read(2, i, 0, 1000, out.data())) cache.insert(2, i, chunk.data(), 1000);
  }
  size_t left = 0;
  for (uint64_t i = 0; i < 50; ++i) left += cache.read(1, i, 0, 1000, out.data());
  return left;
}

TEST(ChunkCacheTest, S3FifoKeepsTheWorkingSetThroughAScanLruDoesNot) {
  EXPECT_EQ(WorkingSetLeftAfterScan(NewLruPolicy), 0u);
  EXPECT_EQ(WorkingSetLeftAfterScan(NewS3FifoPolicy), 50u);
}

TEST(ChunkCacheTest, S3FifoGhostsComeBackToMain) {
  auto p = NewS3FifoPolicy();
  for (uint64_t id = 1; id <= 20; ++id) p->inserted(id);
  auto first = p->victim();  // small queue, never hit: leaves as a ghost
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, 1u);
  p->inserted(1);  // read again soon: straight to main
  for (int i = 0; i < 18; ++i) {
    auto v = p->victim();
    ASSERT_TRUE(v.has_value());
    EXPECT_NE(*v, 1u) << "the returning ghost is evicted before the small queue is empty";
  }
}

// A cache of 128 MiB is split in shards: together they keep to the
// capacity, count every entry, and erase_object finds an inode's chunks.
TEST(ChunkCacheTest, ShardsTogetherKeepToTheCapacityAndCountEveryEntry) {
  constexpr uint64_t kCapacity = 128ull << 20;
  constexpr uint32_t kChunk = 1 << 20;
  ChunkCache cache(kCapacity, NewS3FifoPolicy);
  const std::string chunk = Bytes(kChunk, 'c');
  for (uint64_t ino = 1; ino <= 160; ++ino) cache.insert(ino, 0, chunk.data(), kChunk);
  CacheStats s = cache.stats();
  EXPECT_EQ(s.capacity, kCapacity);
  EXPECT_LE(s.bytes, kCapacity);
  EXPECT_EQ(s.insertions, 160u);
  EXPECT_EQ(s.entries + s.evictions, 160u);
  EXPECT_EQ(s.bytes, s.entries * kChunk);
  EXPECT_GE(s.entries, 100u) << "each shard fills before it evicts";
  std::string out(8, '\0');
  uint64_t cached = 0;
  for (uint64_t ino = 1; ino <= 160; ++ino) cached += cache.read(ino, 0, 0, 8, out.data());
  EXPECT_EQ(cached, s.entries);
  // Several chunks of one inode, then erase_object: only that inode's go.
  for (uint64_t i = 1; i < 4; ++i) cache.insert(500, i, "abc", 3);
  const uint64_t before = cache.stats().entries;
  cache.erase_object(500);
  EXPECT_EQ(cache.stats().entries, before - 3);
  for (uint64_t i = 1; i < 4; ++i) EXPECT_FALSE(cache.read(500, i, 0, 3, out.data()));
}

// Readers, writers and erasers of different objects at once (run under TSan).
TEST(ChunkCacheTest, ConcurrentReadsInsertsAndErasesKeepEveryChunkWhole) {
  ChunkCache cache(128ull << 20, NewS3FifoPolicy);
  std::vector<std::thread> threads;
  std::atomic<int> torn{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::string out(4096, '\0');
      for (uint64_t round = 0; round < 2000; ++round) {
        const uint64_t ino = t * 1000 + round % 50;
        const std::string chunk = Bytes(4096, static_cast<char>('a' + round % 26));
        cache.insert(ino, 0, chunk.data(), 4096);
        if (cache.read(ino, 0, 0, 4096, out.data()) && out != std::string(4096, out[0])) torn++;
        if (round % 7 == 0) cache.erase_object(ino);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(torn.load(), 0);
  const CacheStats s = cache.stats();
  EXPECT_EQ(s.insertions, 8000u);
  EXPECT_EQ(s.bytes, s.entries * 4096);
}

TEST(ChunkCacheTest, UnknownPolicyIsRefused) { EXPECT_THROW(NewEvictionPolicy("mru"), std::invalid_argument); }

}  // namespace
}  // namespace stripefs
