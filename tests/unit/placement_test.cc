// SPDX-License-Identifier: Apache-2.0
// Placement strategies and the object hash.
#include "engine/placement/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace stripefs {
namespace {

// Ids deliberately differ from positions, so a strategy returning indexes is caught.
std::vector<SegmentView> Drives(size_t n) {
  std::vector<SegmentView> d;
  for (size_t i = 0; i < n; ++i) d.push_back({static_cast<uint32_t>(10 + 3 * i), 1u << 30, 1u << 29});
  return d;
}

// The strategy's order as segment ids (rank() gives positions in the list).
std::vector<uint32_t> Rank(const PlacementStrategy& s, const PlacementRequest& req,
                           const std::vector<SegmentView>& segs) {
  std::vector<uint32_t> order;
  s.rank(req, segs, &order);
  for (auto& pos : order) pos = segs.at(pos).id;
  return order;
}

std::unique_ptr<PlacementStrategy> Make(const std::string& name) {
  auto s = MakeStrategy(name);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : nullptr;
}

void ExpectEveryDriveOnce(const std::vector<uint32_t>& ranked, const std::vector<SegmentView>& drives) {
  std::vector<uint32_t> got = ranked, want;
  for (const auto& d : drives) want.push_back(d.id);
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
}

TEST(ObjectHashTest, StableAndDistinct) {
  const std::string uri = "stripefs://pool/0000000000000002";
  EXPECT_EQ(ObjectHash(uri), ObjectHash(uri));
  EXPECT_EQ(ObjectHash(uri), ObjectHash(std::string(uri)));
  EXPECT_NE(ObjectHash(uri), ObjectHash("stripefs://pool/0000000000000003"));
  EXPECT_NE(ObjectHash("a"), ObjectHash("b"));
  EXPECT_NE(ObjectHash(""), ObjectHash("a"));
  // First 8 bytes of SHA-256, big-endian: SHA-256("abc") = ba7816bf8f01cfea...
  EXPECT_EQ(ObjectHash("abc"), 0xba7816bf8f01cfeaull);
  EXPECT_EQ(ObjectHash(""), 0xe3b0c44298fc1c14ull);  // SHA-256 of the empty string
}

TEST(ObjectHashTest, ManyUrisGiveDistinctHashes) {
  std::map<uint64_t, std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    std::string uri = "stripefs://pool/" + std::to_string(i);
    auto [it, inserted] = seen.emplace(ObjectHash(uri), uri);
    EXPECT_TRUE(inserted) << uri << " collides with " << it->second;
  }
}

TEST(PlacementTest, StripedRanksChunkIFirstOnHashPlusI) {
  auto s = Make("striped");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->name(), "striped");
  for (size_t n : {1, 2, 3, 4, 7}) {
    auto drives = Drives(n);
    for (uint64_t hash : std::vector<uint64_t>{0, 1, 5, 0xFFFFFFFFFFFFFFFFull, ObjectHash("stripefs://pool/x")}) {
      for (uint64_t i = 0; i < 20; ++i) {
        auto ranked = Rank(*s, {hash, i, 1 << 20}, drives);
        ASSERT_EQ(ranked.size(), n);
        // (hash + i) mod n computed without 64-bit wraparound.
        size_t want = static_cast<size_t>((hash % n + i % n) % n);
        EXPECT_EQ(ranked[0], drives[want].id) << "n=" << n << " hash=" << hash << " chunk=" << i;
        ExpectEveryDriveOnce(ranked, drives);
      }
    }
  }
}

TEST(PlacementTest, StripedIsDeterministic) {
  auto s = Make("striped");
  ASSERT_NE(s, nullptr);
  auto drives = Drives(5);
  PlacementRequest req{ObjectHash("stripefs://pool/7"), 3, 4096};
  EXPECT_EQ(Rank(*s, req, drives), Rank(*s, req, drives));
  auto s2 = Make("striped");
  EXPECT_EQ(Rank(*s, req, drives), Rank(*s2, req, drives));
}

TEST(PlacementTest, StripedConsecutiveChunksRotate) {
  auto s = Make("striped");
  ASSERT_NE(s, nullptr);
  auto drives = Drives(4);
  uint64_t h = ObjectHash("stripefs://pool/rotate");
  std::vector<uint32_t> firsts;
  for (uint64_t i = 0; i < 4; ++i) firsts.push_back(Rank(*s, {h, i, 4096}, drives)[0]);
  ExpectEveryDriveOnce(firsts, drives);
}

TEST(PlacementTest, RandomListsEveryDriveOnce) {
  auto s = Make("random");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->name(), "random");
  for (size_t n : {1, 2, 4, 9}) {
    auto drives = Drives(n);
    for (int trial = 0; trial < 50; ++trial) {
      auto ranked = Rank(*s, {ObjectHash("u" + std::to_string(trial)), static_cast<uint64_t>(trial), 4096}, drives);
      ASSERT_EQ(ranked.size(), n);
      ExpectEveryDriveOnce(ranked, drives);
    }
  }
}

TEST(PlacementTest, EmptyDriveListRanksNothing) {
  for (const auto& name : StrategyNames()) {
    auto s = Make(name);
    ASSERT_NE(s, nullptr);
    EXPECT_TRUE(Rank(*s, {1, 2, 3}, {}).empty()) << name;
  }
}

TEST(PlacementTest, UnknownStrategyIsInvalidArgument) {
  auto s = MakeStrategy("nope");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
  // The message names the choices.
  for (const auto& name : StrategyNames()) {
    EXPECT_NE(s.status().message().find(name), std::string::npos) << s.status().message();
  }
  EXPECT_EQ(MakeStrategy("").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(MakeStrategy("Striped").status().code(), Code::kInvalidArgument);
}

TEST(PlacementTest, RamStrategyPlacesOnRamSegmentsOnlyAndTheOthersNever) {
  auto d0 = NewBestFitAllocator(64 << 20, 4096), d1 = NewBestFitAllocator(64 << 20, 4096);
  auto ram = NewBestFitAllocator(8 << 20, 4096);
  Placer placer({{0, d0.get()}, {1, d1.get()}, {2, ram.get(), /*ram=*/true}});
  for (const std::string& name : StrategyNames()) {
    auto s = Make(name);
    for (uint64_t i = 0; i < 40; ++i) {
      auto e = placer.place(*s, {ObjectHash("stripefs://t/" + name), i, 1 << 20}, 1, 1);
      ASSERT_TRUE(e.ok()) << name << ": " << e.status().message();
      EXPECT_NE(e->at(0).segment, 2u) << name << " placed chunk " << i << " on the RAM segment";
      placer.release(e.value());
    }
  }
  auto r = Make(std::string(kRamStrategy));
  ASSERT_TRUE(r->ram_only());
  std::vector<std::vector<meta::Replica>> held;
  for (int i = 0; i < 8; ++i) {
    auto e = placer.place(*r, {ObjectHash("stripefs://t/ram"), static_cast<uint64_t>(i), 1 << 20}, 1, 1);
    ASSERT_TRUE(e.ok()) << e.status().message();
    EXPECT_EQ(e->at(0).segment, 2u);
    held.push_back(e.value());
  }
  auto full = placer.place(*r, {ObjectHash("stripefs://t/ram"), 8, 1 << 20}, 1, 1);
  EXPECT_EQ(full.status().code(), Code::kNoSpace) << "a full RAM segment does not spill onto the drives";

  Placer drives_only({{0, d0.get()}});
  auto none = drives_only.place(*r, {1, 0, 4096}, 1, 1);
  EXPECT_EQ(none.status().code(), Code::kNoSpace);
  EXPECT_NE(none.status().message().find("no RAM segment"), std::string::npos) << none.status().message();
}

TEST(PlacementTest, StrategyNamesAreAllConstructible) {
  const auto& names = StrategyNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "striped"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "random"), names.end());
  for (const auto& name : names) {
    auto s = MakeStrategy(name);
    ASSERT_TRUE(s.ok()) << name;
    EXPECT_EQ(s.value()->name(), name);
  }
}

TEST(PlacementTest, StripedSpreadsChunkZeroOverDrives) {
  auto s = Make("striped");
  ASSERT_NE(s, nullptr);
  auto drives = Drives(4);
  std::map<uint32_t, int> count;
  for (int n = 0; n < 200; ++n) {
    std::string uri = "stripefs://pool/" + std::to_string(n);
    count[Rank(*s, {ObjectHash(uri), 0, 1 << 20}, drives)[0]]++;
  }
  for (const auto& d : drives) {
    EXPECT_GE(count[d.id], 13) << "drive " << d.id << " is preferred for chunk 0 only " << count[d.id]
                               << " times out of 200";
  }
}

}  // namespace
}  // namespace stripefs
