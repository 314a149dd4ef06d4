// SegmentAllocator contract tests, parameterized over allocator factories so
// new allocators can be added to kFactories and get the same coverage.
#include "engine/placement/allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace stripefs {
namespace {

constexpr uint64_t kUnit = 4096;

struct Factory {
  std::string name;
  std::function<std::unique_ptr<SegmentAllocator>(uint64_t capacity, uint64_t unit)> make;
};

void PrintTo(const Factory& f, std::ostream* os) { *os << f.name; }

const std::vector<Factory> kFactories = {
    {"BestFit", [](uint64_t c, uint64_t u) { return NewBestFitAllocator(c, u); }},
};

class AllocatorTest : public testing::TestWithParam<Factory> {
 protected:
  std::unique_ptr<SegmentAllocator> Make(uint64_t units) { return GetParam().make(units * kUnit, kUnit); }
};

struct Extent {
  uint64_t off, len;
};

// Live extents must lie inside the segment, be unit aligned and not overlap.
void ExpectDisjoint(const std::vector<Extent>& live, uint64_t capacity) {
  std::vector<Extent> sorted = live;
  std::sort(sorted.begin(), sorted.end(), [](const Extent& a, const Extent& b) { return a.off < b.off; });
  for (size_t i = 0; i < sorted.size(); ++i) {
    EXPECT_EQ(sorted[i].off % kUnit, 0u);
    EXPECT_LE(sorted[i].off + sorted[i].len, capacity) << "extent at " << sorted[i].off << " leaves the segment";
    if (i > 0) {
      EXPECT_LE(sorted[i - 1].off + sorted[i - 1].len, sorted[i].off)
          << "extents at " << sorted[i - 1].off << " and " << sorted[i].off << " overlap";
    }
  }
}

TEST_P(AllocatorTest, FreshAllocatorIsAllFree) {
  auto a = Make(64);
  EXPECT_EQ(a->capacity(), 64 * kUnit);
  EXPECT_EQ(a->free_bytes(), 64 * kUnit);
  EXPECT_EQ(a->unit(), kUnit);
  uint64_t total = 0;
  a->for_each_free([&](uint64_t, uint64_t len) { total += len; });
  EXPECT_EQ(total, 64 * kUnit);
}

TEST_P(AllocatorTest, NoOverlapAndExactFreeBytes) {
  auto a = Make(256);
  std::vector<Extent> live;
  uint64_t used = 0;
  for (uint64_t units : {1, 3, 8, 2, 16, 1, 5, 7, 4, 32, 1, 9}) {
    auto off = a->allocate(units * kUnit);
    ASSERT_TRUE(off.ok()) << off.status().message();
    live.push_back({off.value(), units * kUnit});
    used += units * kUnit;
    EXPECT_EQ(a->free_bytes(), a->capacity() - used);
  }
  ExpectDisjoint(live, a->capacity());
  // Free every other extent, then allocate into the gaps.
  for (size_t i = 0; i < live.size(); i += 2) {
    a->release(live[i].off, live[i].len);
    used -= live[i].len;
    EXPECT_EQ(a->free_bytes(), a->capacity() - used);
  }
  std::vector<Extent> kept;
  for (size_t i = 1; i < live.size(); i += 2) kept.push_back(live[i]);
  for (uint64_t units : {1, 1, 2, 3, 8}) {
    auto off = a->allocate(units * kUnit);
    ASSERT_TRUE(off.ok()) << off.status().message();
    kept.push_back({off.value(), units * kUnit});
    used += units * kUnit;
    EXPECT_EQ(a->free_bytes(), a->capacity() - used);
  }
  ExpectDisjoint(kept, a->capacity());
}

TEST_P(AllocatorTest, FullSegmentGivesNoSpace) {
  auto a = Make(16);
  auto all = a->allocate(16 * kUnit);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all.value(), 0u);
  EXPECT_EQ(a->free_bytes(), 0u);
  auto more = a->allocate(kUnit);
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().code(), Code::kNoSpace);
  EXPECT_EQ(a->free_bytes(), 0u);
}

TEST_P(AllocatorTest, RequestLargerThanCapacityGivesNoSpace) {
  auto a = Make(16);
  auto r = a->allocate(17 * kUnit);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNoSpace);
  EXPECT_EQ(a->free_bytes(), 16 * kUnit);
}

TEST_P(AllocatorTest, FragmentedFreeSpaceWithoutALongEnoughRunGivesNoSpace) {
  auto a = Make(4);
  std::vector<uint64_t> offs;
  for (int i = 0; i < 4; ++i) {
    auto off = a->allocate(kUnit);
    ASSERT_TRUE(off.ok());
    offs.push_back(off.value());
  }
  std::sort(offs.begin(), offs.end());
  a->release(offs[0], kUnit);
  a->release(offs[2], kUnit);
  EXPECT_EQ(a->free_bytes(), 2 * kUnit);
  auto r = a->allocate(2 * kUnit);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNoSpace);
  EXPECT_EQ(a->free_bytes(), 2 * kUnit);
  // The single units are still there.
  EXPECT_TRUE(a->allocate(kUnit).ok());
  EXPECT_TRUE(a->allocate(kUnit).ok());
  EXPECT_EQ(a->free_bytes(), 0u);
}

// What allocate() cannot place in one run, allocate_spread() places in
// several: every free byte can be taken.
TEST_P(AllocatorTest, SpreadTakesScatteredRunsLongestFirst) {
  auto a = Make(16);
  std::vector<uint64_t> offs;
  for (int i = 0; i < 16; ++i) offs.push_back(a->allocate(kUnit).value());
  std::sort(offs.begin(), offs.end());
  // Free: units 1, 4-5, 8-10 (runs of 1, 2 and 3).
  for (int i : {1, 4, 5, 8, 9, 10}) a->release(offs[i], kUnit);
  EXPECT_EQ(a->largest_free_run(), 3 * kUnit);
  EXPECT_EQ(a->allocate(4 * kUnit).status().code(), Code::kNoSpace);
  std::vector<meta::Extent> got;
  ASSERT_TRUE(a->allocate_spread(4 * kUnit, &got).ok());
  // The longest run whole, then the best fit for the last unit (the single one).
  EXPECT_EQ(got, (std::vector<meta::Extent>{{offs[8], 3 * kUnit}, {offs[1], kUnit}}));
  EXPECT_EQ(a->free_bytes(), 2 * kUnit);
  // More than is free: refused, nothing taken.
  got.clear();
  EXPECT_EQ(a->allocate_spread(3 * kUnit, &got).code(), Code::kNoSpace);
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(a->free_bytes(), 2 * kUnit);
  // A run long enough: one extent, the best fit.
  ASSERT_TRUE(a->allocate_spread(2 * kUnit, &got).ok());
  EXPECT_EQ(got, (std::vector<meta::Extent>{{offs[4], 2 * kUnit}}));
  EXPECT_EQ(a->free_bytes(), 0u);
  EXPECT_EQ(a->largest_free_run(), 0u);
}

TEST_P(AllocatorTest, SpreadOfEveryFreeByteAfterChurn) {
  auto a = Make(256);
  std::mt19937_64 rng(7);
  std::vector<uint64_t> offs;
  for (int i = 0; i < 256; ++i) offs.push_back(a->allocate(kUnit).value());
  std::shuffle(offs.begin(), offs.end(), rng);
  for (int i = 0; i < 128; ++i) a->release(offs[i], kUnit);
  std::vector<meta::Extent> got;
  ASSERT_TRUE(a->allocate_spread(128 * kUnit, &got).ok());
  uint64_t total = 0;
  std::vector<Extent> live;
  for (const meta::Extent& e : got) {
    total += e.length;
    live.push_back({e.offset, e.length});
  }
  for (int i = 128; i < 256; ++i) live.push_back({offs[i], kUnit});
  EXPECT_EQ(total, 128 * kUnit);
  EXPECT_EQ(a->free_bytes(), 0u);
  ExpectDisjoint(live, 256 * kUnit);
}

TEST_P(AllocatorTest, ReleaseCoalesces) {
  const uint64_t n = 64;
  auto a = Make(n);
  std::vector<uint64_t> offs;
  for (uint64_t i = 0; i < n; ++i) {
    auto off = a->allocate(kUnit);
    ASSERT_TRUE(off.ok());
    offs.push_back(off.value());
  }
  EXPECT_EQ(a->free_bytes(), 0u);
  // Free in an order that needs merging on the left, the right and both sides.
  std::mt19937 rng(42);
  std::shuffle(offs.begin(), offs.end(), rng);
  for (uint64_t off : offs) a->release(off, kUnit);
  EXPECT_EQ(a->free_bytes(), n * kUnit);
  auto all = a->allocate(n * kUnit);
  ASSERT_TRUE(all.ok()) << "free space did not coalesce: " << all.status().message();
  EXPECT_EQ(all.value(), 0u);
  EXPECT_EQ(a->free_bytes(), 0u);
}

TEST_P(AllocatorTest, ReleaseCoalescesBothNeighbours) {
  auto a = Make(3);
  auto x = a->allocate(kUnit), y = a->allocate(kUnit), z = a->allocate(kUnit);
  ASSERT_TRUE(x.ok() && y.ok() && z.ok());
  std::vector<uint64_t> o = {x.value(), y.value(), z.value()};
  std::sort(o.begin(), o.end());
  a->release(o[0], kUnit);
  a->release(o[2], kUnit);
  a->release(o[1], kUnit);  // joins both neighbours
  size_t runs = 0;
  a->for_each_free([&](uint64_t off, uint64_t len) {
    ++runs;
    EXPECT_EQ(off, 0u);
    EXPECT_EQ(len, 3 * kUnit);
  });
  EXPECT_EQ(runs, 1u);
  EXPECT_TRUE(a->allocate(3 * kUnit).ok());
}

TEST_P(AllocatorTest, MarkUsedRejectsOverlapAndOutOfRange) {
  auto a = Make(16);
  ASSERT_TRUE(a->mark_used(4 * kUnit, 4 * kUnit).ok());
  EXPECT_EQ(a->free_bytes(), 12 * kUnit);

  auto overlap = [&](uint64_t off, uint64_t len) {
    Status s = a->mark_used(off, len);
    EXPECT_EQ(s.code(), Code::kCorruption) << "mark_used(" << off << ", " << len << ")";
  };
  overlap(4 * kUnit, 4 * kUnit);  // the same extent
  overlap(2 * kUnit, 4 * kUnit);  // overlaps its start
  overlap(7 * kUnit, 2 * kUnit);  // overlaps its end
  overlap(5 * kUnit, kUnit);      // inside it
  overlap(0, 16 * kUnit);         // covers it
  EXPECT_EQ(a->free_bytes(), 12 * kUnit) << "a rejected mark_used must not change the free space";

  auto outside = [&](uint64_t off, uint64_t len) {
    Status s = a->mark_used(off, len);
    EXPECT_EQ(s.code(), Code::kCorruption) << "mark_used(" << off << ", " << len << ")";
  };
  outside(16 * kUnit, kUnit);       // just past the end
  outside(15 * kUnit, 2 * kUnit);   // straddles the end
  outside(1000 * kUnit, kUnit);     // far out
  EXPECT_EQ(a->free_bytes(), 12 * kUnit);

  // Allocations avoid the marked extent.
  std::vector<Extent> live = {{4 * kUnit, 4 * kUnit}};
  for (int i = 0; i < 12; ++i) {
    auto off = a->allocate(kUnit);
    ASSERT_TRUE(off.ok());
    live.push_back({off.value(), kUnit});
  }
  ExpectDisjoint(live, a->capacity());
  EXPECT_EQ(a->free_bytes(), 0u);
}

TEST_P(AllocatorTest, MarkUsedOfAllocatedSpaceIsCorruption) {
  auto a = Make(8);
  auto off = a->allocate(2 * kUnit);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(a->mark_used(off.value(), 2 * kUnit).code(), Code::kCorruption);
  EXPECT_EQ(a->mark_used(off.value() + kUnit, kUnit).code(), Code::kCorruption);
  EXPECT_EQ(a->free_bytes(), 6 * kUnit);
}

TEST_P(AllocatorTest, MarkUsedThenReleaseRoundTrips) {
  auto a = Make(8);
  ASSERT_TRUE(a->mark_used(0, 8 * kUnit).ok());
  EXPECT_EQ(a->free_bytes(), 0u);
  EXPECT_EQ(a->allocate(kUnit).status().code(), Code::kNoSpace);
  a->release(0, 8 * kUnit);
  EXPECT_EQ(a->free_bytes(), 8 * kUnit);
  EXPECT_TRUE(a->allocate(8 * kUnit).ok());
}

TEST_P(AllocatorTest, TryExtendWhenSpaceAfterIsFree) {
  auto a = Make(16);
  ASSERT_TRUE(a->mark_used(0, 2 * kUnit).ok());
  EXPECT_TRUE(a->try_extend(0, 2 * kUnit, 6 * kUnit));
  EXPECT_EQ(a->free_bytes(), 10 * kUnit);
  // The extension is really held: [0, 6 units) can no longer be marked.
  EXPECT_EQ(a->mark_used(5 * kUnit, kUnit).code(), Code::kCorruption);
  EXPECT_TRUE(a->mark_used(6 * kUnit, kUnit).ok());
  EXPECT_EQ(a->free_bytes(), 9 * kUnit);
  // Releasing the grown extent gives all of it back.
  a->release(0, 6 * kUnit);
  EXPECT_EQ(a->free_bytes(), 15 * kUnit);
}

TEST_P(AllocatorTest, TryExtendFailsWhenSpaceAfterIsTaken) {
  auto a = Make(16);
  ASSERT_TRUE(a->mark_used(0, 2 * kUnit).ok());
  ASSERT_TRUE(a->mark_used(4 * kUnit, kUnit).ok());
  EXPECT_FALSE(a->try_extend(0, 2 * kUnit, 5 * kUnit));  // would run into the unit at 4
  EXPECT_EQ(a->free_bytes(), 13 * kUnit) << "a failed try_extend must not change the free space";
  EXPECT_TRUE(a->try_extend(0, 2 * kUnit, 4 * kUnit));  // exactly up to it
  EXPECT_EQ(a->free_bytes(), 11 * kUnit);
  EXPECT_FALSE(a->try_extend(0, 4 * kUnit, 5 * kUnit));  // directly adjacent
  EXPECT_EQ(a->free_bytes(), 11 * kUnit);
}

TEST_P(AllocatorTest, TryExtendFailsPastTheEnd) {
  auto a = Make(8);
  ASSERT_TRUE(a->mark_used(6 * kUnit, 2 * kUnit).ok());
  EXPECT_FALSE(a->try_extend(6 * kUnit, 2 * kUnit, 3 * kUnit));
  EXPECT_EQ(a->free_bytes(), 6 * kUnit);
}

// A random allocate / release / try_extend sequence checked against a bitmap of units.
TEST_P(AllocatorTest, RandomizedAgainstOracle) {
  const uint64_t n = 512;
  auto a = Make(n);
  std::vector<bool> used(n, false);
  std::map<uint64_t, uint64_t> live;  // offset -> length, bytes
  std::mt19937_64 rng(0x5eed);
  uint64_t used_units = 0;

  auto longest_free_run = [&] {
    uint64_t best = 0, cur = 0;
    for (uint64_t i = 0; i < n; ++i) {
      cur = used[i] ? 0 : cur + 1;
      best = std::max(best, cur);
    }
    return best;
  };
  auto check_free_map = [&](int op) {
    std::vector<bool> free_seen(n, false);
    a->for_each_free([&](uint64_t off, uint64_t len) {
      ASSERT_EQ(off % kUnit, 0u);
      ASSERT_EQ(len % kUnit, 0u);
      ASSERT_LE(off + len, n * kUnit);
      for (uint64_t u = off / kUnit; u < (off + len) / kUnit; ++u) {
        ASSERT_FALSE(free_seen[u]) << "free runs overlap at unit " << u << " (op " << op << ")";
        free_seen[u] = true;
      }
    });
    for (uint64_t u = 0; u < n; ++u) {
      ASSERT_EQ(free_seen[u], !used[u]) << "unit " << u << " (op " << op << ")";
    }
  };

  const int kOps = 4000;
  for (int op = 0; op < kOps; ++op) {
    int kind = static_cast<int>(rng() % 100);
    if (kind < 50 || live.empty()) {
      // Mostly small, sometimes large.
      uint64_t units = (rng() % 8 == 0) ? 1 + rng() % 64 : 1 + rng() % 8;
      auto off = a->allocate(units * kUnit);
      if (off.ok()) {
        uint64_t o = off.value();
        ASSERT_EQ(o % kUnit, 0u) << "op " << op;
        ASSERT_LE(o / kUnit + units, n) << "op " << op;
        for (uint64_t u = o / kUnit; u < o / kUnit + units; ++u) {
          ASSERT_FALSE(used[u]) << "op " << op << ": allocation at " << o << " overlaps a live one at unit " << u;
          used[u] = true;
        }
        used_units += units;
        live[o] = units * kUnit;
      } else {
        ASSERT_EQ(off.status().code(), Code::kNoSpace) << "op " << op;
        ASSERT_LT(longest_free_run(), units)
            << "op " << op << ": kNoSpace for " << units << " units but a long enough run is free";
      }
    } else if (kind < 90) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      a->release(it->first, it->second);
      for (uint64_t u = it->first / kUnit; u < (it->first + it->second) / kUnit; ++u) used[u] = false;
      used_units -= it->second / kUnit;
      live.erase(it);
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      uint64_t extra = 1 + rng() % 4;
      uint64_t first = (it->first + it->second) / kUnit;
      bool room = first + extra <= n;
      for (uint64_t u = first; room && u < first + extra; ++u) room = !used[u];
      bool grew = a->try_extend(it->first, it->second, it->second + extra * kUnit);
      ASSERT_EQ(grew, room) << "op " << op << ": try_extend of " << it->first << "+" << it->second;
      if (grew) {
        for (uint64_t u = first; u < first + extra; ++u) used[u] = true;
        used_units += extra;
        it->second += extra * kUnit;
      }
    }
    ASSERT_EQ(a->free_bytes(), (n - used_units) * kUnit) << "op " << op;
    if (op % 50 == 0) {
      check_free_map(op);
      if (HasFatalFailure()) return;
    }
  }
  check_free_map(kOps);
  // Give everything back: one run of full capacity.
  for (auto [off, len] : live) a->release(off, len);
  EXPECT_EQ(a->free_bytes(), n * kUnit);
  auto all = a->allocate(n * kUnit);
  EXPECT_TRUE(all.ok()) << all.status().message();
}

INSTANTIATE_TEST_SUITE_P(Allocators, AllocatorTest, testing::ValuesIn(kFactories),
                         [](const testing::TestParamInfo<Factory>& info) { return info.param.name; });

}  // namespace
}  // namespace stripefs
