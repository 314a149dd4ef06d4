// SPDX-License-Identifier: Apache-2.0
// The SegmentAllocator contract, one suite for every registered allocator
// (AllocatorNames()) at both allocation units, the drives' 4 KiB and the RAM
// segment's 64 bytes (see registered_allocators.h): a new allocator gets all
// of it by being registered.
#include "engine/placement/allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/registered_allocators.h"

namespace stripefs {
namespace {

class AllocatorContract : public testing::TestWithParam<AllocatorUnderTest> {
 protected:
  uint64_t u() const { return GetParam().unit; }
  std::unique_ptr<SegmentAllocator> Make(uint64_t units) { return GetParam().make(units * u()); }
};

struct Extent {
  uint64_t off, len;
};

// Live extents must lie inside the segment, be unit aligned and not overlap.
void ExpectDisjoint(const std::vector<Extent>& live, uint64_t capacity, uint64_t unit) {
  std::vector<Extent> sorted = live;
  std::sort(sorted.begin(), sorted.end(), [](const Extent& a, const Extent& b) { return a.off < b.off; });
  for (size_t i = 0; i < sorted.size(); ++i) {
    EXPECT_EQ(sorted[i].off % unit, 0u);
    EXPECT_LE(sorted[i].off + sorted[i].len, capacity) << "extent at " << sorted[i].off << " leaves the segment";
    if (i > 0) {
      EXPECT_LE(sorted[i - 1].off + sorted[i - 1].len, sorted[i].off)
          << "extents at " << sorted[i - 1].off << " and " << sorted[i].off << " overlap";
    }
  }
}

std::vector<std::pair<uint64_t, uint64_t>> FreeRuns(const SegmentAllocator& a) {
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  a.for_each_free([&](uint64_t off, uint64_t len) { runs.emplace_back(off, len); });
  std::sort(runs.begin(), runs.end());
  return runs;
}

TEST_P(AllocatorContract, FreshSegmentIsOneFreeRun) {
  auto a = Make(64);
  EXPECT_EQ(a->unit(), u());
  EXPECT_EQ(a->capacity(), 64 * u());
  EXPECT_EQ(a->free_bytes(), 64 * u());
  EXPECT_EQ(a->fragmentation(), 0.0);
  using Runs = std::vector<std::pair<uint64_t, uint64_t>>;
  EXPECT_EQ(FreeRuns(*a), (Runs{{0, 64 * u()}}));
}

TEST_P(AllocatorContract, NoOverlapAndExactFreeBytes) {
  auto a = Make(256);
  std::vector<Extent> live;
  uint64_t used = 0;
  for (uint64_t units : {1, 3, 8, 2, 16, 1, 5, 7, 4, 32, 1, 9}) {
    auto off = a->allocate(units * u());
    ASSERT_TRUE(off.ok()) << off.status().message();
    live.push_back({off.value(), units * u()});
    used += units * u();
    EXPECT_EQ(a->free_bytes(), a->capacity() - used);
  }
  ExpectDisjoint(live, a->capacity(), u());
  // Free every other extent, then allocate into the gaps.
  for (size_t i = 0; i < live.size(); i += 2) {
    a->release(live[i].off, live[i].len);
    used -= live[i].len;
    EXPECT_EQ(a->free_bytes(), a->capacity() - used);
  }
  std::vector<Extent> kept;
  for (size_t i = 1; i < live.size(); i += 2) kept.push_back(live[i]);
  for (uint64_t units : {1, 1, 2, 3, 8}) {
    auto off = a->allocate(units * u());
    ASSERT_TRUE(off.ok()) << off.status().message();
    kept.push_back({off.value(), units * u()});
    used += units * u();
    EXPECT_EQ(a->free_bytes(), a->capacity() - used);
  }
  ExpectDisjoint(kept, a->capacity(), u());
}

TEST_P(AllocatorContract, FullSegmentGivesNoSpace) {
  auto a = Make(16);
  auto all = a->allocate(16 * u());
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all.value(), 0u);
  EXPECT_EQ(a->free_bytes(), 0u);
  auto more = a->allocate(u());
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().code(), Code::kNoSpace);
  EXPECT_EQ(a->free_bytes(), 0u);
}

TEST_P(AllocatorContract, AllocateRefusesWhatDoesNotFit) {
  auto a = Make(16);
  auto x = a->allocate(17 * u());
  ASSERT_FALSE(x.ok());
  EXPECT_EQ(x.status().code(), Code::kNoSpace);
  EXPECT_EQ(a->free_bytes(), 16 * u()) << "a refused allocate changed the free space";
  // Free space split 8 + 7 units: 8 fits, 9 does not though 15 are free.
  ASSERT_TRUE(a->mark_used(8 * u(), u()).ok());
  x = a->allocate(9 * u());
  ASSERT_FALSE(x.ok());
  EXPECT_EQ(x.status().code(), Code::kNoSpace);
  EXPECT_EQ(a->free_bytes(), 15 * u());
  x = a->allocate(8 * u());
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x.value(), 0u);
  EXPECT_EQ(a->free_bytes(), 7 * u());
}

TEST_P(AllocatorContract, FragmentedFreeSpaceWithoutALongEnoughRunGivesNoSpace) {
  auto a = Make(4);
  std::vector<uint64_t> offs;
  for (int i = 0; i < 4; ++i) {
    auto off = a->allocate(u());
    ASSERT_TRUE(off.ok());
    offs.push_back(off.value());
  }
  std::sort(offs.begin(), offs.end());
  a->release(offs[0], u());
  a->release(offs[2], u());
  EXPECT_EQ(a->free_bytes(), 2 * u());
  auto r = a->allocate(2 * u());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNoSpace);
  EXPECT_EQ(a->free_bytes(), 2 * u());
  // The single units are still there.
  EXPECT_TRUE(a->allocate(u()).ok());
  EXPECT_TRUE(a->allocate(u()).ok());
  EXPECT_EQ(a->free_bytes(), 0u);
}

// What allocate() cannot place in one run, allocate_spread() places in
// several: every free byte can be taken.
TEST_P(AllocatorContract, SpreadTakesScatteredRunsLongestFirst) {
  auto a = Make(16);
  std::vector<uint64_t> offs;
  for (int i = 0; i < 16; ++i) offs.push_back(a->allocate(u()).value());
  std::sort(offs.begin(), offs.end());
  // Free: units 1, 4-5, 8-10 (runs of 1, 2 and 3).
  for (int i : {1, 4, 5, 8, 9, 10}) a->release(offs[i], u());
  EXPECT_EQ(a->largest_free_run(), 3 * u());
  EXPECT_EQ(a->allocate(4 * u()).status().code(), Code::kNoSpace);
  std::vector<meta::Extent> got;
  ASSERT_TRUE(a->allocate_spread(4 * u(), &got).ok());
  // The longest run whole, then the best fit for the last unit (the single one).
  EXPECT_EQ(got, (std::vector<meta::Extent>{{offs[8], 3 * u()}, {offs[1], u()}}));
  EXPECT_EQ(a->free_bytes(), 2 * u());
  // More than is free: refused, nothing taken.
  got.clear();
  EXPECT_EQ(a->allocate_spread(3 * u(), &got).code(), Code::kNoSpace);
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(a->free_bytes(), 2 * u());
  // A run long enough: one extent, the best fit.
  ASSERT_TRUE(a->allocate_spread(2 * u(), &got).ok());
  EXPECT_EQ(got, (std::vector<meta::Extent>{{offs[4], 2 * u()}}));
  EXPECT_EQ(a->free_bytes(), 0u);
  EXPECT_EQ(a->largest_free_run(), 0u);
}

TEST_P(AllocatorContract, SpreadOfEveryFreeByteAfterChurn) {
  auto a = Make(256);
  std::mt19937_64 rng(7);
  std::vector<uint64_t> offs;
  for (int i = 0; i < 256; ++i) offs.push_back(a->allocate(u()).value());
  std::shuffle(offs.begin(), offs.end(), rng);
  for (int i = 0; i < 128; ++i) a->release(offs[i], u());
  std::vector<meta::Extent> got;
  ASSERT_TRUE(a->allocate_spread(128 * u(), &got).ok());
  uint64_t total = 0;
  std::vector<Extent> live;
  for (const meta::Extent& e : got) {
    total += e.length;
    live.push_back({e.offset, e.length});
  }
  for (int i = 128; i < 256; ++i) live.push_back({offs[i], u()});
  EXPECT_EQ(total, 128 * u());
  EXPECT_EQ(a->free_bytes(), 0u);
  ExpectDisjoint(live, 256 * u(), u());
}

TEST_P(AllocatorContract, ReleaseCoalesces) {
  const uint64_t n = 64;
  auto a = Make(n);
  std::vector<uint64_t> offs;
  for (uint64_t i = 0; i < n; ++i) {
    auto off = a->allocate(u());
    ASSERT_TRUE(off.ok());
    offs.push_back(off.value());
  }
  EXPECT_EQ(a->free_bytes(), 0u);
  // Free in an order that needs merging on the left, the right and both sides.
  std::mt19937 rng(42);
  std::shuffle(offs.begin(), offs.end(), rng);
  for (uint64_t off : offs) a->release(off, u());
  EXPECT_EQ(a->free_bytes(), n * u());
  auto all = a->allocate(n * u());
  ASSERT_TRUE(all.ok()) << "free space did not coalesce: " << all.status().message();
  EXPECT_EQ(all.value(), 0u);
  EXPECT_EQ(a->free_bytes(), 0u);
}

TEST_P(AllocatorContract, ReleaseCoalescesBothNeighbours) {
  auto a = Make(3);
  auto x = a->allocate(u()), y = a->allocate(u()), z = a->allocate(u());
  ASSERT_TRUE(x.ok() && y.ok() && z.ok());
  std::vector<uint64_t> o = {x.value(), y.value(), z.value()};
  std::sort(o.begin(), o.end());
  a->release(o[0], u());
  a->release(o[2], u());
  a->release(o[1], u());  // joins both neighbours
  size_t runs = 0;
  a->for_each_free([&](uint64_t off, uint64_t len) {
    ++runs;
    EXPECT_EQ(off, 0u);
    EXPECT_EQ(len, 3 * u());
  });
  EXPECT_EQ(runs, 1u);
  EXPECT_TRUE(a->allocate(3 * u()).ok());
}

TEST_P(AllocatorContract, FragmentationAndFreeRuns) {
  auto a = Make(64);
  EXPECT_EQ(a->fragmentation(), 0.0);
  std::vector<uint64_t> offs;
  for (int i = 0; i < 64; ++i) {
    auto x = a->allocate(u());
    ASSERT_TRUE(x.ok());
    offs.push_back(x.value());
  }
  EXPECT_EQ(a->free_bytes(), 0u);
  EXPECT_TRUE(FreeRuns(*a).empty());
  std::sort(offs.begin(), offs.end());
  // Splinter: free every other unit, then a run of three.
  for (size_t i = 0; i < offs.size(); i += 2) a->release(offs[i], u());
  auto check_runs = [&](const char* when) {
    auto runs = FreeRuns(*a);
    uint64_t sum = 0, prev_end = 0;
    for (const auto& [off, len] : runs) {
      EXPECT_GT(len, 0u) << when;
      EXPECT_EQ(off % u(), 0u) << when;
      EXPECT_EQ(len % u(), 0u) << when;
      EXPECT_GE(off, prev_end) << when << ": runs overlap";
      EXPECT_LE(off + len, a->capacity()) << when;
      prev_end = off + len;
      sum += len;
    }
    EXPECT_EQ(sum, a->free_bytes()) << when;
    return runs.size();
  };
  EXPECT_EQ(check_runs("every other unit free"), 32u);
  EXPECT_EQ(a->free_bytes(), 32 * u());
  EXPECT_GT(a->fragmentation(), 0.0);
  EXPECT_LE(a->fragmentation(), 1.0);
  double splintered = a->fragmentation();
  a->release(offs[1], u());  // joins runs 0 and 2: one run of three
  EXPECT_EQ(check_runs("one run of three"), 31u);
  EXPECT_GT(a->fragmentation(), 0.0);
  EXPECT_LT(a->fragmentation(), splintered) << "a longer largest run is less fragmented";
  // Everything back: one run again.
  for (size_t i = 3; i < offs.size(); i += 2) a->release(offs[i], u());
  EXPECT_EQ(check_runs("all free"), 1u);
  EXPECT_EQ(a->free_bytes(), a->capacity());
  EXPECT_EQ(a->fragmentation(), 0.0);
  // Two free runs: > 0.
  auto x = a->allocate(2 * u());
  auto y = a->allocate(2 * u());
  ASSERT_TRUE(x.ok() && y.ok());
  a->release(x.value(), 2 * u());
  if (x.value() == 0) {
    EXPECT_EQ(check_runs("a hole and the tail"), 2u);
    EXPECT_GT(a->fragmentation(), 0.0);
  }
  a->release(y.value(), 2 * u());
  EXPECT_EQ(a->fragmentation(), 0.0);
  EXPECT_EQ(check_runs("all free again"), 1u);
}

TEST_P(AllocatorContract, MarkUsedOverlappingIsCorruption) {
  auto a = Make(32);
  ASSERT_TRUE(a->mark_used(4 * u(), 3 * u()).ok());  // [4, 7)
  EXPECT_EQ(a->free_bytes(), 29 * u());
  struct Case {
    uint64_t off, len;
  };
  for (Case c : {Case{4, 3}, Case{5, 1}, Case{2, 3}, Case{6, 2}, Case{3, 5}, Case{0, 32}, Case{6, 1}}) {
    Status s = a->mark_used(c.off * u(), c.len * u());
    EXPECT_EQ(s.code(), Code::kCorruption) << "[" << c.off << ", " << c.off + c.len << ") overlaps [4, 7)";
    EXPECT_EQ(a->free_bytes(), 29 * u()) << "a refused mark_used changed the free space";
  }
  EXPECT_TRUE(a->mark_used(7 * u(), 1 * u()).ok());  // adjacent is fine
  EXPECT_TRUE(a->mark_used(0, 4 * u()).ok());
  EXPECT_EQ(a->free_bytes(), 24 * u());
  // allocate() never hands out marked bytes.
  while (true) {
    auto x = a->allocate(u());
    if (!x.ok()) break;
    EXPECT_GE(x.value(), 8 * u());
  }
  EXPECT_EQ(a->free_bytes(), 0u);
}

TEST_P(AllocatorContract, MarkUsedOutsideSegmentIsCorruption) {
  auto a = Make(32);
  EXPECT_EQ(a->mark_used(31 * u(), 2 * u()).code(), Code::kCorruption);
  EXPECT_EQ(a->mark_used(32 * u(), u()).code(), Code::kCorruption);
  EXPECT_EQ(a->mark_used(100 * u(), u()).code(), Code::kCorruption);
  EXPECT_EQ(a->free_bytes(), 32 * u());
  EXPECT_EQ(FreeRuns(*a).size(), 1u);
}

// A corrupted chunk record can carry any 64-bit offset: one so large that
// offset + len wraps around must be refused, not carved out of the segment.
TEST_P(AllocatorContract, MarkUsedRejectsExtentsThatWrapAround) {
  auto a = Make(32);
  const uint64_t top = std::numeric_limits<uint64_t>::max() - u() + 1;  // unit-aligned, last unit of 2^64
  EXPECT_EQ(a->mark_used(top, 2 * u()).code(), Code::kCorruption) << "offset " << top << " len " << 2 * u();
  EXPECT_EQ(a->free_bytes(), 32 * u());
  EXPECT_EQ(a->mark_used(u(), top).code(), Code::kCorruption) << "offset " << u() << " len " << top;
  EXPECT_EQ(a->free_bytes(), 32 * u());
  using Runs = std::vector<std::pair<uint64_t, uint64_t>>;
  EXPECT_EQ(FreeRuns(*a), (Runs{{0, 32 * u()}}));
}

TEST_P(AllocatorContract, MarkUsedOfAllocatedSpaceIsCorruption) {
  auto a = Make(8);
  auto off = a->allocate(2 * u());
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(a->mark_used(off.value(), 2 * u()).code(), Code::kCorruption);
  EXPECT_EQ(a->mark_used(off.value() + u(), u()).code(), Code::kCorruption);
  EXPECT_EQ(a->free_bytes(), 6 * u());
}

TEST_P(AllocatorContract, MarkUsedThenReleaseRoundTrips) {
  auto a = Make(8);
  ASSERT_TRUE(a->mark_used(0, 8 * u()).ok());
  EXPECT_EQ(a->free_bytes(), 0u);
  EXPECT_EQ(a->allocate(u()).status().code(), Code::kNoSpace);
  a->release(0, 8 * u());
  EXPECT_EQ(a->free_bytes(), 8 * u());
  EXPECT_TRUE(a->allocate(8 * u()).ok());
}

TEST_P(AllocatorContract, TryExtend) {
  auto a = Make(64);
  auto x = a->allocate(2 * u());
  ASSERT_TRUE(x.ok());
  uint64_t free = a->free_bytes();
  // Grows into free space after it.
  ASSERT_TRUE(a->try_extend(x.value(), 2 * u(), 5 * u()));
  EXPECT_EQ(a->free_bytes(), free - 3 * u());
  free = a->free_bytes();
  // Allocations never land in the grown part.
  std::vector<std::pair<uint64_t, uint64_t>> others;
  while (true) {
    auto y = a->allocate(3 * u());
    if (!y.ok()) {
      EXPECT_EQ(y.status().code(), Code::kNoSpace);
      break;
    }
    EXPECT_TRUE(y.value() + 3 * u() <= x.value() || y.value() >= x.value() + 5 * u())
        << "allocation at " << y.value() << " overlaps the extended extent at " << x.value();
    others.emplace_back(y.value(), 3 * u());
  }
  ASSERT_FALSE(others.empty());
  free = a->free_bytes();
  // Cannot grow into used bytes (nor partly): nothing changes.
  for (const auto& [off, len] : others) {
    EXPECT_FALSE(a->try_extend(off, len, len + 3 * u())) << off << " has neighbours or the end after it";
    EXPECT_EQ(a->free_bytes(), free);
  }
  // Free the neighbour after x (if one exists) and grow into exactly its space.
  auto after = std::find_if(others.begin(), others.end(), [&](auto& o) { return o.first == x.value() + 5 * u(); });
  if (after != others.end()) {
    a->release(after->first, after->second);
    EXPECT_FALSE(a->try_extend(x.value(), 5 * u(), 9 * u())) << "only 3 units are free after it";
    EXPECT_EQ(a->free_bytes(), free + 3 * u());
    EXPECT_TRUE(a->try_extend(x.value(), 5 * u(), 8 * u()));
    EXPECT_EQ(a->free_bytes(), free);
    others.erase(after);
    a->release(x.value(), 8 * u());
  } else {
    a->release(x.value(), 5 * u());
  }
  for (const auto& [off, len] : others) a->release(off, len);
  // Not past the end of the segment.
  auto tail = Make(8);
  ASSERT_TRUE(tail->mark_used(6 * u(), 2 * u()).ok());
  EXPECT_FALSE(tail->try_extend(6 * u(), 2 * u(), 3 * u()));
  EXPECT_EQ(tail->free_bytes(), 6 * u());
  EXPECT_EQ(a->free_bytes(), a->capacity());
  EXPECT_EQ(a->fragmentation(), 0.0);
}

TEST_P(AllocatorContract, TryExtendWhenSpaceAfterIsFree) {
  auto a = Make(16);
  ASSERT_TRUE(a->mark_used(0, 2 * u()).ok());
  EXPECT_TRUE(a->try_extend(0, 2 * u(), 6 * u()));
  EXPECT_EQ(a->free_bytes(), 10 * u());
  // The extension is really held: [0, 6 units) can no longer be marked.
  EXPECT_EQ(a->mark_used(5 * u(), u()).code(), Code::kCorruption);
  EXPECT_TRUE(a->mark_used(6 * u(), u()).ok());
  EXPECT_EQ(a->free_bytes(), 9 * u());
  // Releasing the grown extent gives all of it back.
  a->release(0, 6 * u());
  EXPECT_EQ(a->free_bytes(), 15 * u());
}

TEST_P(AllocatorContract, TryExtendFailsWhenSpaceAfterIsTaken) {
  auto a = Make(16);
  ASSERT_TRUE(a->mark_used(0, 2 * u()).ok());
  ASSERT_TRUE(a->mark_used(4 * u(), u()).ok());
  EXPECT_FALSE(a->try_extend(0, 2 * u(), 5 * u()));  // would run into the unit at 4
  EXPECT_EQ(a->free_bytes(), 13 * u()) << "a failed try_extend must not change the free space";
  EXPECT_TRUE(a->try_extend(0, 2 * u(), 4 * u()));  // exactly up to it
  EXPECT_EQ(a->free_bytes(), 11 * u());
  EXPECT_FALSE(a->try_extend(0, 4 * u(), 5 * u()));  // directly adjacent
  EXPECT_EQ(a->free_bytes(), 11 * u());
}

// A random allocate / release / try_extend sequence checked against a bitmap of units.
TEST_P(AllocatorContract, RandomizedAgainstOracle) {
  const uint64_t n = 512;
  const uint64_t unit = u();  // the loops below call a unit's index u
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
      ASSERT_EQ(off % unit, 0u);
      ASSERT_EQ(len % unit, 0u);
      ASSERT_LE(off + len, n * unit);
      for (uint64_t u = off / unit; u < (off + len) / unit; ++u) {
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
      auto off = a->allocate(units * unit);
      if (off.ok()) {
        uint64_t o = off.value();
        ASSERT_EQ(o % unit, 0u) << "op " << op;
        ASSERT_LE(o / unit + units, n) << "op " << op;
        for (uint64_t u = o / unit; u < o / unit + units; ++u) {
          ASSERT_FALSE(used[u]) << "op " << op << ": allocation at " << o << " overlaps a live one at unit " << u;
          used[u] = true;
        }
        used_units += units;
        live[o] = units * unit;
      } else {
        ASSERT_EQ(off.status().code(), Code::kNoSpace) << "op " << op;
        ASSERT_LT(longest_free_run(), units)
            << "op " << op << ": kNoSpace for " << units << " units but a long enough run is free";
      }
    } else if (kind < 90) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      a->release(it->first, it->second);
      for (uint64_t u = it->first / unit; u < (it->first + it->second) / unit; ++u) used[u] = false;
      used_units -= it->second / unit;
      live.erase(it);
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      uint64_t extra = 1 + rng() % 4;
      uint64_t first = (it->first + it->second) / unit;
      bool room = first + extra <= n;
      for (uint64_t u = first; room && u < first + extra; ++u) room = !used[u];
      bool grew = a->try_extend(it->first, it->second, it->second + extra * unit);
      ASSERT_EQ(grew, room) << "op " << op << ": try_extend of " << it->first << "+" << it->second;
      if (grew) {
        for (uint64_t u = first; u < first + extra; ++u) used[u] = true;
        used_units += extra;
        it->second += extra * unit;
      }
    }
    ASSERT_EQ(a->free_bytes(), (n - used_units) * unit) << "op " << op;
    if (op % 50 == 0) {
      check_free_map(op);
      if (HasFatalFailure()) return;
    }
  }
  check_free_map(kOps);
  // Give everything back: one run of full capacity.
  for (auto [off, len] : live) a->release(off, len);
  EXPECT_EQ(a->free_bytes(), n * unit);
  auto all = a->allocate(n * unit);
  EXPECT_TRUE(all.ok()) << all.status().message();
}

// The registry itself: every listed name makes an allocator, the pool's is
// among them, and an unknown name is refused with the choices named.
TEST(AllocatorRegistry, MakesEveryListedAllocatorAndRefusesOthers) {
  ASSERT_FALSE(AllocatorNames().empty());
  for (const std::string& name : AllocatorNames()) {
    auto a = MakeAllocator(name, 64 * kRamAllocationUnit, kRamAllocationUnit);
    ASSERT_TRUE(a.ok()) << name << ": " << a.status().message();
    EXPECT_EQ((*a)->capacity(), 64 * kRamAllocationUnit) << name;
    EXPECT_EQ((*a)->unit(), kRamAllocationUnit) << name;
  }
  const auto& names = AllocatorNames();
  EXPECT_NE(std::find(names.begin(), names.end(), kPoolAllocator), names.end()) << "the pool's allocator is registered";
  auto unknown = MakeAllocator("worst-fit", 64 * kDriveAllocationUnit, kDriveAllocationUnit);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), Code::kInvalidArgument);
  for (const std::string& name : names) {
    EXPECT_NE(unknown.status().message().find(name), std::string::npos) << unknown.status().message();
  }
}

INSTANTIATE_TEST_SUITE_P(Registered, AllocatorContract, testing::ValuesIn(AllocatorsUnderTest()),
                         [](const testing::TestParamInfo<AllocatorUnderTest>& info) { return info.param.test_name(); });

}  // namespace
}  // namespace stripefs
