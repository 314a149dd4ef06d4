// SPDX-License-Identifier: Apache-2.0
// Placement contract suite: every allocator implementation x every placement
// strategy, driven through Placer::place (the routine the object store uses)
// and checked after every operation against an oracle that tracks each live
// extent. A new allocator is picked up from AllocatorNames() (see
// registered_allocators.h), a new strategy from StrategyNames().
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/placement/allocator.h"
#include "engine/placement/placement.h"
#include "meta/schema.h"
#include "tests/unit/registered_allocators.h"

namespace stripefs {
namespace {

using Extents = std::vector<meta::Replica>;  // from contiguous placement: one extent each

std::string Describe(const Extents& ex) {
  std::ostringstream os;
  os << "{";
  for (size_t i = 0; i < ex.size(); ++i) os << (i ? ", " : "") << ex[i].segment << "@" << ex[i].extents.at(0).offset;
  os << "}";
  return os.str();
}

// ---------------------------------------------------------------------------
// The oracle: a pool of segments built with one allocator under test, and every
// extent the test believes is live on each of them.

class Pool {
 public:
  explicit Pool(const AllocatorUnderTest& f) : f_(f) {}

  uint64_t unit() const { return f_.unit; }

  // Adds a segment of `units` allocation units under segment id `id`.
  void Add(uint32_t id, uint64_t units) {
    Seg s;
    s.capacity = units * f_.unit;
    s.alloc = f_.make(s.capacity);
    segs_.emplace(id, std::move(s));
    ids_.push_back(id);
  }
  const std::vector<uint32_t>& ids() const { return ids_; }
  SegmentAllocator& alloc(uint32_t id) { return *segs_.at(id).alloc; }
  uint64_t capacity(uint32_t id) const { return segs_.at(id).capacity; }

  Placer MakePlacer(const std::vector<uint32_t>& ids) const {
    std::vector<Placer::Segment> v;
    for (uint32_t id : ids) v.push_back({id, segs_.at(id).alloc.get()});
    return Placer(std::move(v));
  }
  Placer MakePlacer() const { return MakePlacer(ids_); }

  // Each segment's free bytes as its allocator reports them.
  std::map<uint32_t, uint64_t> FreeBytes() const {
    std::map<uint32_t, uint64_t> m;
    for (const auto& [id, s] : segs_) m[id] = s.alloc->free_bytes();
    return m;
  }
  uint64_t TotalCapacity() const {
    uint64_t t = 0;
    for (const auto& [id, s] : segs_) t += s.capacity;
    return t;
  }
  uint64_t TotalLive() const {
    uint64_t t = 0;
    for (const auto& [id, s] : segs_) {
      for (const auto& [off, len] : s.live) t += len;
    }
    return t;
  }

  // The oracle's view: does segment `id` have a free run of at least len bytes?
  bool HasRoom(uint32_t id, uint64_t len) const {
    const Seg& s = segs_.at(id);
    uint64_t at = 0;
    for (const auto& [off, l] : s.live) {
      if (off - at >= len) return true;
      at = off + l;
    }
    return s.capacity - at >= len;
  }
  size_t SegmentsWithRoom(uint64_t len, const std::vector<uint32_t>& ids) const {
    size_t n = 0;
    for (uint32_t id : ids) n += HasRoom(id, len) ? 1 : 0;
    return n;
  }
  size_t SegmentsWithRoom(uint64_t len) const { return SegmentsWithRoom(len, ids_); }

  // Records the extents of one successful placement of len bytes per replica,
  // checking them first: on segments in `placeable`, distinct, aligned, inside
  // the segment and overlapping no live extent.
  testing::AssertionResult Record(const Extents& ex, uint64_t len, const std::vector<uint32_t>& placeable) {
    if (ex.empty()) return testing::AssertionFailure() << "placement returned no extents";
    std::set<uint32_t> seen;
    for (const auto& e : ex) {
      if (std::find(placeable.begin(), placeable.end(), e.segment) == placeable.end()) {
        return testing::AssertionFailure() << "extent on segment " << e.segment << " which the Placer does not hold; "
                                           << Describe(ex);
      }
      if (!seen.insert(e.segment).second) {
        return testing::AssertionFailure() << "two replicas on segment " << e.segment << ": " << Describe(ex);
      }
      const Seg& s = segs_.at(e.segment);
      if (e.extents.at(0).offset % f_.unit != 0) {
        return testing::AssertionFailure() << "offset " << e.extents.at(0).offset << " on segment " << e.segment
                                           << " is not a multiple of the unit " << f_.unit;
      }
      if (e.extents.at(0).offset > s.capacity || s.capacity - e.extents.at(0).offset < len) {
        return testing::AssertionFailure() << "extent " << e.extents.at(0).offset << "+" << len << " on segment " << e.segment
                                           << " runs past the capacity " << s.capacity;
      }
      auto next = s.live.lower_bound(e.extents.at(0).offset);
      if (next != s.live.end() && next->first < e.extents.at(0).offset + len) {
        return testing::AssertionFailure() << "extent " << e.extents.at(0).offset << "+" << len << " on segment " << e.segment
                                           << " overlaps live extent " << next->first << "+" << next->second;
      }
      if (next != s.live.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second > e.extents.at(0).offset) {
          return testing::AssertionFailure() << "extent " << e.extents.at(0).offset << "+" << len << " on segment " << e.segment
                                             << " overlaps live extent " << prev->first << "+" << prev->second;
        }
      }
    }
    for (const auto& e : ex) segs_.at(e.segment).live.emplace(e.extents.at(0).offset, len);
    return testing::AssertionSuccess();
  }

  void Forget(const Extents& ex, uint64_t len) {
    for (const auto& e : ex) {
      auto& live = segs_.at(e.segment).live;
      auto it = live.find(e.extents.at(0).offset);
      ASSERT_TRUE(it != live.end() && it->second == len) << "forgetting an extent the oracle does not hold";
      live.erase(it);
    }
  }

  // For every segment: free_bytes() == capacity - live bytes, and the free
  // runs for_each_free() reports are exactly the space between live extents.
  testing::AssertionResult CheckAccounting() const {
    for (const auto& [id, s] : segs_) {
      uint64_t live_bytes = 0;
      for (const auto& [off, len] : s.live) live_bytes += len;
      if (s.alloc->capacity() != s.capacity) {
        return testing::AssertionFailure() << "segment " << id << " capacity() " << s.alloc->capacity()
                                           << " != " << s.capacity;
      }
      if (s.alloc->free_bytes() != s.capacity - live_bytes) {
        return testing::AssertionFailure() << "segment " << id << ": free_bytes() " << s.alloc->free_bytes()
                                           << " != capacity " << s.capacity << " - live " << live_bytes;
      }
      std::vector<std::pair<uint64_t, uint64_t>> runs;
      s.alloc->for_each_free([&](uint64_t off, uint64_t len) { runs.emplace_back(off, len); });
      std::sort(runs.begin(), runs.end());
      std::vector<std::pair<uint64_t, uint64_t>> merged;  // adjacent runs joined
      for (const auto& r : runs) {
        if (!merged.empty() && merged.back().first + merged.back().second == r.first) {
          merged.back().second += r.second;
        } else {
          merged.push_back(r);
        }
      }
      std::vector<std::pair<uint64_t, uint64_t>> gaps;
      uint64_t at = 0;
      for (const auto& [off, len] : s.live) {
        if (off > at) gaps.emplace_back(at, off - at);
        at = off + len;
      }
      if (s.capacity > at) gaps.emplace_back(at, s.capacity - at);
      if (merged != gaps) {
        auto out = testing::AssertionFailure();
        out << "segment " << id << ": free runs {";
        for (const auto& [o, l] : merged) out << " " << o << "+" << l;
        out << " } differ from the space between live extents {";
        for (const auto& [o, l] : gaps) out << " " << o << "+" << l;
        return out << " }";
      }
    }
    return testing::AssertionSuccess();
  }

 private:
  struct Seg {
    uint64_t capacity = 0;
    std::unique_ptr<SegmentAllocator> alloc;
    std::map<uint64_t, uint64_t> live;  // offset -> length
  };
  const AllocatorUnderTest& f_;
  std::map<uint32_t, Seg> segs_;
  std::vector<uint32_t> ids_;  // in the order added (= positions in MakePlacer())
};

struct Placement {
  Extents extents;
  uint64_t len;
};

std::vector<uint32_t> Rank(const PlacementStrategy& s, const PlacementRequest& req,
                           const std::vector<SegmentView>& segs) {
  std::vector<uint32_t> order(segs.size() + 3, 0xDEAD);  // stale contents must not survive
  s.rank(req, segs, &order);
  return order;
}

double Ratio(const SegmentView& v) { return v.capacity ? static_cast<double>(v.free) / v.capacity : 0.0; }

// ---------------------------------------------------------------------------
// The suite: allocators x strategies.

using Param = std::tuple<AllocatorUnderTest, std::string>;

class PlacementSuite : public testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    auto s = MakeStrategy(std::get<1>(GetParam()));
    ASSERT_TRUE(s.ok()) << s.status().message();
    strategy_ = std::move(s).value();
  }
  const AllocatorUnderTest& allocator() const { return std::get<0>(GetParam()); }
  const std::string& strategy_name() const { return std::get<1>(GetParam()); }
  const PlacementStrategy& strategy() const { return *strategy_; }
  uint64_t unit() const { return allocator().unit; }

  // Releases every placement through `placer`, checking the accounting after each.
  void ReleaseAll(Pool& pool, const Placer& placer, std::vector<Placement>& live) {
    for (const auto& p : live) {
      placer.release(p.extents);
      pool.Forget(p.extents, p.len);
      ASSERT_TRUE(pool.CheckAccounting());
    }
    live.clear();
  }

  std::unique_ptr<PlacementStrategy> strategy_;
};

// rank() lists every position exactly once, whatever the segments' fill.
TEST_P(PlacementSuite, RankListsEveryPositionOnce) {
  std::mt19937_64 rng(1);
  EXPECT_TRUE(Rank(strategy(), {rng(), 0, unit()}, {}).empty()) << "no segments, no positions";
  for (size_t n = 1; n <= 16; ++n) {
    std::vector<uint32_t> all(n);
    for (size_t i = 0; i < n; ++i) all[i] = static_cast<uint32_t>(i);
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<SegmentView> segs;
      for (size_t i = 0; i < n; ++i) {
        uint64_t cap = (trial % 7 == 3 && i == 0) ? 0 : (1 + rng() % 1000) * unit();
        uint64_t free = trial % 5 == 0 ? cap : (cap ? rng() % (cap + 1) : 0);  // some trials: all equally empty
        segs.push_back({static_cast<uint32_t>(100 + 7 * i), cap, free});
      }
      auto order = Rank(strategy(), {rng(), rng() % 64, unit()}, segs);
      std::sort(order.begin(), order.end());
      ASSERT_EQ(order, all) << "n=" << n << " trial " << trial;
    }
  }
}

// R replicas of one placement sit on R distinct segments; no extent ever
// overlaps a live one; accounting is exact after every operation.
TEST_P(PlacementSuite, ReplicasOnDistinctSegments) {
  for (size_t nsegs : {3, 5}) {
    for (uint32_t r = 1; r <= 3; ++r) {
      SCOPED_TRACE("segments=" + std::to_string(nsegs) + " R=" + std::to_string(r));
      Pool pool(allocator());
      for (size_t i = 0; i < nsegs; ++i) pool.Add(static_cast<uint32_t>(11 + 5 * (nsegs - i)), 512);
      Placer placer = pool.MakePlacer();
      std::mt19937_64 rng(100 + r);
      std::vector<Placement> live;
      for (uint64_t chunk = 0; chunk < 60; ++chunk) {
        uint64_t len = (1 + rng() % 7) * unit();
        auto res = placer.place(strategy(), {rng(), chunk, len}, r, r);
        ASSERT_TRUE(res.ok()) << res.status().message();
        ASSERT_EQ(res->size(), r) << Describe(*res);
        ASSERT_TRUE(pool.Record(*res, len, pool.ids()));
        ASSERT_TRUE(pool.CheckAccounting());
        live.push_back({*res, len});
      }
      ReleaseAll(pool, placer, live);
    }
  }
}

// A few thousand random places and releases, checked against the oracle:
// success exactly when at least `min` segments have a long-enough free run,
// and then min(want, such segments) replicas; failures reserve nothing.
TEST_P(PlacementSuite, RandomizedAgainstOracle) {
  Pool pool(allocator());
  const std::vector<uint32_t> ids = {7, 2, 13, 0, 5};
  const uint64_t units[] = {256, 192, 320, 256, 128};
  for (size_t i = 0; i < ids.size(); ++i) pool.Add(ids[i], units[i]);
  Placer placer = pool.MakePlacer();
  const uint64_t lens[] = {1, 2, 3, 5, 6, 7, 12, 13, 24, 37};  // in units; mostly not powers of two
  std::mt19937_64 rng(20240611);
  std::vector<Placement> live;
  int successes = 0, partial = 0, failures = 0, releases = 0;
  for (int op = 0; op < 4000; ++op) {
    SCOPED_TRACE("operation " + std::to_string(op));
    bool allocate = live.empty() || rng() % 100 < 55;
    if (allocate) {
      uint64_t len = lens[rng() % std::size(lens)] * unit();
      uint32_t want = 1 + static_cast<uint32_t>(rng() % 3);
      uint32_t min = rng() % 2 ? want : 1 + static_cast<uint32_t>(rng() % want);
      size_t room = pool.SegmentsWithRoom(len);
      auto before = pool.FreeBytes();
      auto res = placer.place(strategy(), {rng(), rng() % 1000, len}, want, min);
      if (room >= min) {
        ASSERT_TRUE(res.ok()) << res.status().message() << ": " << room << " segments have room for " << len
                              << " bytes, want " << want << " min " << min;
        ASSERT_EQ(res->size(), std::min<size_t>(want, room)) << Describe(*res);
        ASSERT_TRUE(pool.Record(*res, len, ids));
        live.push_back({*res, len});
        ++successes;
        partial += res->size() < want;
      } else {
        ASSERT_FALSE(res.ok()) << "placed " << Describe(*res) << " with only " << room << " segments having room";
        EXPECT_EQ(res.status().code(), Code::kNoSpace);
        ASSERT_EQ(pool.FreeBytes(), before) << "failed place() left bytes reserved";
        ++failures;
      }
    } else {
      size_t i = rng() % live.size();
      placer.release(live[i].extents);
      pool.Forget(live[i].extents, live[i].len);
      live[i] = std::move(live.back());
      live.pop_back();
      ++releases;
    }
    ASSERT_TRUE(pool.CheckAccounting());
  }
  // The run exercised every path.
  EXPECT_GT(successes, 500);
  EXPECT_GT(partial, 0);
  EXPECT_GT(failures, 10);
  EXPECT_GT(releases, 500);
  ReleaseAll(pool, placer, live);
}

// Full segments: with min == want a failed place() reserves nothing even when
// some segments had room; with min < want it places on exactly the segments
// that have room and reserves exactly the returned extents.
TEST_P(PlacementSuite, FullSegments) {
  Pool pool(allocator());
  const std::vector<uint32_t> ids = {4, 9, 1, 6};
  const uint64_t L = 3 * unit();
  const uint64_t units[] = {24, 12, 6, 3};  // 8L, 4L, 2L, 1L
  for (size_t i = 0; i < ids.size(); ++i) pool.Add(ids[i], units[i]);
  Placer placer = pool.MakePlacer();
  std::mt19937_64 rng(3);
  uint64_t chunk = 0;
  auto req = [&] { return PlacementRequest{rng(), chunk++, L}; };
  std::vector<Placement> live;

  // All-or-nothing sets of 3 until no 3 segments have room. Each one takes at
  // least 2L from the three small segments (7L), so segment 4 (8L) keeps room.
  for (;;) {
    ASSERT_LT(live.size(), 10u) << "never ran out of space";
    auto before = pool.FreeBytes();
    auto res = placer.place(strategy(), req(), 3, 3);
    if (!res.ok()) {
      EXPECT_EQ(res.status().code(), Code::kNoSpace);
      EXPECT_EQ(pool.FreeBytes(), before) << "a failed place() left replicas reserved";
      break;
    }
    ASSERT_EQ(res->size(), 3u);
    ASSERT_TRUE(pool.Record(*res, L, ids));
    ASSERT_TRUE(pool.CheckAccounting());
    live.push_back({*res, L});
  }
  EXPECT_GE(live.size(), 1u);
  ASSERT_TRUE(pool.HasRoom(4, L));
  ASSERT_LT(pool.SegmentsWithRoom(L), 3u) << "place(3, 3) failed although 3 segments have room";

  // Partial sets: place(3, 1) succeeds on exactly the segments with room,
  // while asking for one more replica than there is room for fails cleanly.
  for (;;) {
    ASSERT_TRUE(pool.CheckAccounting());
    size_t room = pool.SegmentsWithRoom(L);
    if (room == 0) break;
    ASSERT_LT(room, 3u);
    for (uint32_t w = static_cast<uint32_t>(room) + 1; w <= 3; ++w) {
      for (int i = 0; i < 4; ++i) {  // different requests: different start segments
        auto before = pool.FreeBytes();
        auto res = placer.place(strategy(), req(), w, w);
        ASSERT_FALSE(res.ok()) << "placed " << Describe(*res) << " with " << room << " segments having room";
        EXPECT_EQ(res.status().code(), Code::kNoSpace);
        ASSERT_EQ(pool.FreeBytes(), before) << "place(" << w << ", " << w << ") failed but left bytes reserved";
      }
    }
    auto before = pool.FreeBytes();
    uint32_t min = rng() % 2 ? 1 : static_cast<uint32_t>(room);
    auto res = placer.place(strategy(), req(), 3, min);
    ASSERT_TRUE(res.ok()) << res.status().message() << " (" << room << " segments have room, min " << min << ")";
    ASSERT_EQ(res->size(), room) << Describe(*res);
    ASSERT_GE(res->size(), min);
    ASSERT_TRUE(pool.Record(*res, L, ids));
    for (uint32_t id : ids) {  // reserved bytes match the extents returned
      bool used = std::any_of(res->begin(), res->end(), [&](const meta::Replica& e) { return e.segment == id; });
      EXPECT_EQ(before[id] - pool.alloc(id).free_bytes(), used ? L : 0) << "segment " << id;
    }
    live.push_back({*res, L});
  }

  // Everything is full: the capacities are multiples of L.
  EXPECT_EQ(pool.TotalLive(), pool.TotalCapacity());
  for (uint32_t id : ids) EXPECT_EQ(pool.alloc(id).free_bytes(), 0u) << "segment " << id;
  auto res = placer.place(strategy(), req(), 1, 1);
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), Code::kNoSpace);

  // Freed space is found again.
  Placement freed = live[live.size() / 2];
  placer.release(freed.extents);
  pool.Forget(freed.extents, freed.len);
  live.erase(live.begin() + static_cast<std::ptrdiff_t>(live.size() / 2));
  ASSERT_TRUE(pool.CheckAccounting());
  res = placer.place(strategy(), req(), static_cast<uint32_t>(freed.extents.size()),
                     static_cast<uint32_t>(freed.extents.size()));
  ASSERT_TRUE(res.ok()) << res.status().message();
  std::set<uint32_t> want_segs, got_segs;
  for (const auto& e : freed.extents) want_segs.insert(e.segment);
  for (const auto& e : *res) got_segs.insert(e.segment);
  EXPECT_EQ(got_segs, want_segs);
  ASSERT_TRUE(pool.Record(*res, L, ids));
  live.push_back({*res, L});
  ReleaseAll(pool, placer, live);
}

// Alternating 1.5x and 0.5x capacities: filling with single replicas until
// kNoSpace uses (nearly) all of the pool: every strategy falls back to a
// segment with room once its preferred ones are full.
TEST_P(PlacementSuite, SkewedCapacitiesFillUp) {
  Pool pool(allocator());
  const std::vector<uint32_t> ids = {5, 0, 3, 8, 2, 7};
  for (size_t i = 0; i < ids.size(); ++i) pool.Add(ids[i], i % 2 == 0 ? 90 : 30);
  Placer placer = pool.MakePlacer();
  const uint64_t L = 3 * unit();
  std::mt19937_64 rng(5);
  std::vector<Placement> live;
  for (uint64_t chunk = 0;; ++chunk) {
    ASSERT_LE(live.size(), pool.TotalCapacity() / L) << "placed more than fits";
    auto before = pool.FreeBytes();
    auto res = placer.place(strategy(), {rng(), chunk, L}, 1, 1);
    if (!res.ok()) {
      EXPECT_EQ(res.status().code(), Code::kNoSpace);
      EXPECT_EQ(pool.FreeBytes(), before);
      break;
    }
    ASSERT_TRUE(pool.Record(*res, L, ids));
    ASSERT_TRUE(pool.CheckAccounting());
    live.push_back({*res, L});
  }
  EXPECT_GE(static_cast<double>(pool.TotalLive()), 0.99 * static_cast<double>(pool.TotalCapacity()))
      << "used " << pool.TotalLive() << " of " << pool.TotalCapacity() << " bytes";
  EXPECT_EQ(pool.SegmentsWithRoom(L), 0u) << "kNoSpace while a segment still had room";
  ReleaseAll(pool, placer, live);
}

// A segment added later: a new Placer over the old allocators plus a new one
// places on the new segment and releases extents placed by the old Placer.
TEST_P(PlacementSuite, SegmentAddedLater) {
  Pool pool(allocator());
  const std::vector<uint32_t> old_ids = {0, 1, 2, 3}, new_ids = {0, 1, 2, 3, 4};
  for (uint32_t id : old_ids) pool.Add(id, 32);
  Placer old_placer = pool.MakePlacer(old_ids);
  const uint64_t L = 2 * unit();
  std::mt19937_64 rng(9);
  uint64_t chunk = 0;
  std::vector<Placement> old_live, new_live;

  for (int i = 0; i < 8; ++i) {
    auto res = old_placer.place(strategy(), {rng(), chunk++, L}, 2, 2);
    ASSERT_TRUE(res.ok()) << res.status().message();
    ASSERT_TRUE(pool.Record(*res, L, old_ids));
    old_live.push_back({*res, L});
  }
  for (;;) {  // fill segments 0..3
    ASSERT_LT(old_live.size(), 100u);
    auto res = old_placer.place(strategy(), {rng(), chunk++, L}, 1, 1);
    if (!res.ok()) break;
    ASSERT_TRUE(pool.Record(*res, L, old_ids));
    old_live.push_back({*res, L});
  }
  ASSERT_TRUE(pool.CheckAccounting());
  ASSERT_EQ(pool.SegmentsWithRoom(L), 0u);

  pool.Add(4, 64);
  Placer new_placer = pool.MakePlacer(new_ids);
  EXPECT_EQ(new_placer.size(), 5u);
  // Only segment 4 has room; every strategy must find it.
  auto res = new_placer.place(strategy(), {rng(), chunk++, L}, 1, 1);
  ASSERT_TRUE(res.ok()) << res.status().message();
  ASSERT_EQ(res->size(), 1u);
  EXPECT_EQ((*res)[0].segment, 4u);
  ASSERT_TRUE(pool.Record(*res, L, new_ids));
  new_live.push_back({*res, L});
  // Two replicas do not fit (one segment has room); nothing leaks.
  auto before = pool.FreeBytes();
  res = new_placer.place(strategy(), {rng(), chunk++, L}, 2, 2);
  EXPECT_FALSE(res.ok());
  EXPECT_EQ(pool.FreeBytes(), before);
  // The old Placer does not know segment 4.
  res = old_placer.place(strategy(), {rng(), chunk++, L}, 1, 1);
  EXPECT_FALSE(res.ok());
  EXPECT_EQ(pool.FreeBytes(), before);
  ASSERT_TRUE(pool.CheckAccounting());

  // Extents placed through the old Placer are released through the new one.
  ReleaseAll(pool, new_placer, old_live);

  // New placements spread onto segment 4 as well.
  int on_new = 0;
  for (int i = 0; i < 100; ++i) {
    auto r = new_placer.place(strategy(), {rng(), chunk++, unit()}, 1, 1);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_TRUE(pool.Record(*r, unit(), new_ids));
    ASSERT_TRUE(pool.CheckAccounting());
    on_new += (*r)[0].segment == 4;
    new_live.push_back({*r, unit()});
  }
  EXPECT_GT(on_new, 0) << "100 placements, none on the added segment";
  ReleaseAll(pool, new_placer, new_live);
}

// Each strategy's own ranking rule, checked through rank() and through Placer.
TEST_P(PlacementSuite, StrategyRule) {
  std::mt19937_64 rng(11);
  const std::string& name = strategy_name();
  if (name == "striped") {
    // Position (hash + chunk_index) mod N first (no 64-bit wraparound), then ring order.
    const uint64_t kMax = std::numeric_limits<uint64_t>::max();
    for (size_t n = 1; n <= 16; ++n) {
      std::vector<SegmentView> segs;
      for (size_t i = 0; i < n; ++i) segs.push_back({static_cast<uint32_t>(3 * i + 1), 1000 * unit(), rng() % 1000 * unit()});
      for (uint64_t hash : {uint64_t{0}, uint64_t{1}, uint64_t{17}, kMax, kMax - 5, rng(), rng()}) {
        for (uint64_t chunk : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{7}, uint64_t{31}, kMax, rng()}) {
          auto order = Rank(strategy(), {hash, chunk, unit()}, segs);
          ASSERT_EQ(order.size(), n);
          auto first = static_cast<uint32_t>((static_cast<unsigned __int128>(hash) + chunk) % n);
          for (size_t i = 0; i < n; ++i) {
            ASSERT_EQ(order[i], (first + i) % n) << "n=" << n << " hash=" << hash << " chunk=" << chunk << " place " << i;
          }
        }
      }
    }
    // Through the Placer: replicas on the preferred segment and the next ones
    // around the ring, skipping a full one.
    Pool pool(allocator());
    const std::vector<uint32_t> ids = {12, 3, 40, 7, 21};
    for (uint32_t id : ids) pool.Add(id, 16);
    Placer placer = pool.MakePlacer();
    const uint64_t h = ObjectHash("stripefs://pool/0000000000000042");
    std::vector<Placement> live;
    for (uint64_t chunk = 0; chunk < 10; ++chunk) {
      auto res = placer.place(strategy(), {h, chunk, unit()}, 3, 3);
      ASSERT_TRUE(res.ok());
      size_t first = (h % 5 + chunk % 5) % 5;
      ASSERT_EQ(res->size(), 3u);
      for (size_t k = 0; k < 3; ++k) EXPECT_EQ((*res)[k].segment, ids[(first + k) % 5]) << "chunk " << chunk;
      ASSERT_TRUE(pool.Record(*res, unit(), ids));
      live.push_back({*res, unit()});
    }
    size_t pref = (h % 5 + 20 % 5) % 5;
    auto& full = pool.alloc(ids[pref]);
    while (true) {  // fill the preferred segment of chunk 20 directly
      auto off = full.allocate(unit());
      if (!off.ok()) break;
      ASSERT_TRUE(pool.Record(Extents{meta::Replica{ids[pref], {{off.value(), unit()}}}}, unit(), ids));
    }
    auto res = placer.place(strategy(), {h, 20, unit()}, 1, 1);
    ASSERT_TRUE(res.ok());
    EXPECT_EQ((*res)[0].segment, ids[(pref + 1) % 5]) << "full preferred segment: the next one around the ring";
    ASSERT_TRUE(pool.Record(*res, unit(), ids));
    ASSERT_TRUE(pool.CheckAccounting());
  } else if (name == "free-ratio-first") {
    // With <= 6 segments (all of them candidates) the highest free ratio is first.
    for (size_t n = 1; n <= 16; ++n) {
      for (int trial = 0; trial < 200; ++trial) {
        std::vector<SegmentView> segs;
        for (size_t i = 0; i < n; ++i) {
          uint64_t cap = (1 + rng() % 64) * 1024 * unit();
          segs.push_back({static_cast<uint32_t>(i + 50), cap, rng() % (cap + 1)});
        }
        auto order = Rank(strategy(), {rng(), 0, unit()}, segs);
        ASSERT_EQ(order.size(), n);
        size_t best = 0;
        for (size_t i = 1; i < n; ++i) best = Ratio(segs[i]) > Ratio(segs[best]) ? i : best;
        if (n <= 6) {
          ASSERT_EQ(Ratio(segs[order[0]]), Ratio(segs[best])) << "n=" << n << " trial " << trial;
        }
        // The candidates come first, best free ratio first.
        for (size_t i = 1; i < std::min<size_t>(n, 6); ++i) {
          ASSERT_GE(Ratio(segs[order[i - 1]]), Ratio(segs[order[i]])) << "n=" << n << " place " << i;
        }
      }
    }
    // Through the Placer: the emptiest (by share) of five segments of different sizes.
    Pool pool(allocator());
    const std::vector<uint32_t> ids = {8, 1, 6, 3, 0};
    const uint64_t units[] = {64, 32, 64, 16, 48};
    const uint64_t used[] = {40, 4, 20, 8, 36};  // free ratios 0.375, 0.875, 0.6875, 0.5, 0.25
    for (size_t i = 0; i < ids.size(); ++i) {
      pool.Add(ids[i], units[i]);
      auto off = pool.alloc(ids[i]).allocate(used[i] * unit());
      ASSERT_TRUE(off.ok());
      ASSERT_TRUE(pool.Record(Extents{meta::Replica{ids[i], {{off.value(), used[i] * unit()}}}}, used[i] * unit(), ids));
    }
    Placer placer = pool.MakePlacer();
    for (int i = 0; i < 50; ++i) {
      auto res = placer.place(strategy(), {rng(), static_cast<uint64_t>(i), unit()}, 2, 2);
      ASSERT_TRUE(res.ok());
      ASSERT_EQ(res->size(), 2u);
      EXPECT_EQ((*res)[0].segment, 1u);
      EXPECT_EQ((*res)[1].segment, 6u);
      placer.release(*res);
    }
    ASSERT_TRUE(pool.CheckAccounting());
  } else if (name == "two-choice") {
    // One segment much emptier than the rest is first clearly more often than
    // 1/N (it wins whenever it is one of the two looks: about 2/N).
    for (size_t n : {4, 8}) {
      for (size_t emptier : {size_t{0}, n / 2, n - 1}) {
        Pool pool(allocator());
        std::vector<uint32_t> ids;
        for (size_t i = 0; i < n; ++i) {
          auto id = static_cast<uint32_t>(20 + i);
          ids.push_back(id);
          pool.Add(id, 64);
          uint64_t fill = (i == emptier ? 4 : 48) * unit();
          auto off = pool.alloc(id).allocate(fill);
          ASSERT_TRUE(off.ok());
          ASSERT_TRUE(pool.Record(Extents{meta::Replica{id, {{off.value(), fill}}}}, fill, ids));
        }
        Placer placer = pool.MakePlacer();
        const int kDraws = 2000;
        int first = 0;
        for (int i = 0; i < kDraws; ++i) {
          auto res = placer.place(strategy(), {rng(), static_cast<uint64_t>(i), unit()}, 1, 1);
          ASSERT_TRUE(res.ok());
          first += (*res)[0].segment == ids[emptier];
          placer.release(*res);
        }
        ASSERT_TRUE(pool.CheckAccounting());
        EXPECT_GE(first, 1.5 / static_cast<double>(n) * kDraws)
            << "n=" << n << ": the emptier segment (position " << emptier << ") came first " << first << " of "
            << kDraws << " times";
      }
    }
  } else if (name == "random") {
    // A ring starting at a random position; every start turns up.
    const size_t n = 5;
    std::vector<SegmentView> segs;
    for (size_t i = 0; i < n; ++i) segs.push_back({static_cast<uint32_t>(i + 9), 100 * unit(), rng() % 100 * unit()});
    std::vector<int> starts(n);
    for (int i = 0; i < 500; ++i) {
      auto order = Rank(strategy(), {ObjectHash("x"), 0, unit()}, segs);  // same request every time
      ASSERT_EQ(order.size(), n);
      for (size_t k = 0; k < n; ++k) ASSERT_EQ(order[k], (order[0] + k) % n);
      starts[order[0]]++;
    }
    for (size_t s = 0; s < n; ++s) EXPECT_GT(starts[s], 0) << "start " << s << " never drawn in 500 ranks";
  } else if (name == "round-robin") {
    // Position chunk_index mod N first whatever the object, then ring order.
    for (size_t n = 1; n <= 9; ++n) {
      std::vector<SegmentView> segs;
      for (size_t i = 0; i < n; ++i) segs.push_back({static_cast<uint32_t>(2 * i + 5), 100 * unit(), rng() % 100 * unit()});
      for (uint64_t chunk : {uint64_t{0}, uint64_t{1}, uint64_t{5}, std::numeric_limits<uint64_t>::max(), rng()}) {
        for (uint64_t hash : {ObjectHash("a"), ObjectHash("b"), rng()}) {
          auto order = Rank(strategy(), {hash, chunk, unit()}, segs);
          ASSERT_EQ(order.size(), n);
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(order[i], (chunk % n + i) % n) << "n=" << n << " chunk=" << chunk;
        }
      }
    }
  } else {
    GTEST_SKIP() << "no strategy-specific rule known for '" << name << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(AllocatorsByStrategies, PlacementSuite,
                         testing::Combine(testing::ValuesIn(AllocatorsUnderTest()), testing::ValuesIn(StrategyNames())),
                         [](const testing::TestParamInfo<Param>& info) {
                           return std::get<0>(info.param).test_name() + "_" + TestNamePart(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace stripefs
