// SPDX-License-Identifier: Apache-2.0
// allocator_microbench: the cost of one allocator or placer operation.
//
//   BM_AllocRelease/<size>/<fill%>   allocate + release of one extent on a 1 TiB
//                                    segment (drive unit, 4 KiB) at ~0, 50, 95 % fill
//   BM_MixedSizes/<fill%>            allocate one of 4K/64K/1M/3198K/4M and release
//                                    the oldest of 256 live extents
//   BM_Place/<strategy>/<S>/<R>      Placer::place + Placer::release of a 4 MiB
//                                    chunk over S empty 1 TiB segments, R replicas
//
// A filled segment is made by allocating it full of 4 MiB extents and releasing
// a random (seeded) subset until the fill is reached, so its free space is many
// runs of assorted lengths, as after a long life of deletes; one segment per
// fill level is built once and shared by the benchmarks. Each measured
// iteration leaves the free map as it found it (release coalesces back what
// allocate split), so iterations see the same state.
#include <benchmark/benchmark.h>

#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/placement/allocator.h"
#include "engine/placement/placement.h"

namespace stripefs::bench {
namespace {

constexpr uint64_t kTiB = 1ULL << 40;
constexpr uint64_t kChunk = 4ULL << 20;

// A 1 TiB drive-unit segment at fill_pct % (0: empty).
SegmentAllocator* Filled(int fill_pct) {
  static std::map<int, std::unique_ptr<SegmentAllocator>> cache;
  auto& slot = cache[fill_pct];
  if (slot) return slot.get();
  slot = NewBestFitAllocator(kTiB, kDriveAllocationUnit);
  if (fill_pct == 0) return slot.get();
  std::vector<uint64_t> offsets;
  for (;;) {
    auto off = slot->allocate(kChunk);
    if (!off.ok()) break;
    offsets.push_back(off.value());
  }
  std::mt19937_64 rng(42);
  std::shuffle(offsets.begin(), offsets.end(), rng);
  size_t keep = offsets.size() * static_cast<size_t>(fill_pct) / 100;
  for (size_t i = keep; i < offsets.size(); ++i) slot->release(offsets[i], kChunk);
  return slot.get();
}

void BM_AllocRelease(benchmark::State& state) {
  const uint64_t size = static_cast<uint64_t>(state.range(0));
  SegmentAllocator* a = Filled(static_cast<int>(state.range(1)));
  for (auto _ : state) {
    auto off = a->allocate(size);
    if (!off.ok()) {
      state.SkipWithError("allocate failed");
      break;
    }
    benchmark::DoNotOptimize(off.value());
    a->release(off.value(), size);
  }
  state.counters["free_runs"] = [&] {
    double runs = 0;
    a->for_each_free([&](uint64_t, uint64_t) { runs += 1; });
    return runs;
  }();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AllocRelease)
    ->ArgNames({"size", "fill%"})
    ->ArgsProduct({{4 << 10, 1 << 20, 4 << 20}, {0, 50, 95}});

void BM_MixedSizes(benchmark::State& state) {
  SegmentAllocator* a = Filled(static_cast<int>(state.range(0)));
  static const uint64_t kSizes[] = {4 << 10, 64 << 10, 1 << 20, 3276800 /* 3198 KiB rounded to 4 KiB */, 4 << 20};
  std::mt19937_64 rng(7);
  std::vector<uint64_t> sizes(4096);
  for (auto& s : sizes) s = kSizes[rng() % std::size(kSizes)];
  std::deque<std::pair<uint64_t, uint64_t>> live;
  size_t i = 0;
  for (auto _ : state) {
    uint64_t size = sizes[i++ % sizes.size()];
    auto off = a->allocate(size);
    if (!off.ok()) {
      state.SkipWithError("allocate failed");
      break;
    }
    live.emplace_back(off.value(), size);
    if (live.size() > 256) {
      a->release(live.front().first, live.front().second);
      live.pop_front();
    }
  }
  for (auto [off, len] : live) a->release(off, len);  // back to the shared state
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MixedSizes)->ArgName("fill%")->Arg(0)->Arg(50)->Arg(95);

// The eviction step of allocation_strategy_bench on one 1 TiB RAM-unit segment
// full of KV objects (3,274,752 B): release 5 % of them chosen at random, then
// allocate as many again (best fit refills the holes). sorted=1 releases the
// same victims in offset order, which touches the free-run trees in order: the
// gap between the two is the cost of cache misses in the tree descents.
void BM_EvictRefill(benchmark::State& state) {
  const bool sorted = state.range(0) != 0;
  constexpr uint64_t kKv = 3'274'752;
  auto a = NewBestFitAllocator(kTiB, kRamAllocationUnit);
  std::vector<uint64_t> live;
  for (;;) {
    auto off = a->allocate(kKv);
    if (!off.ok()) break;
    live.push_back(off.value());
  }
  std::mt19937_64 rng(42);
  const size_t victims = live.size() / 20;
  std::vector<uint64_t> batch;
  for (auto _ : state) {
    batch.clear();
    for (size_t v = 0; v < victims; ++v) {
      size_t i = rng() % live.size();
      batch.push_back(live[i]);
      live[i] = live.back();
      live.pop_back();
    }
    if (sorted) std::sort(batch.begin(), batch.end());
    for (uint64_t off : batch) a->release(off, kKv);
    for (size_t v = 0; v < victims; ++v) {
      auto off = a->allocate(kKv);
      if (!off.ok()) {
        state.SkipWithError("refill failed");
        return;
      }
      live.push_back(off.value());
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * victims));  // one item: a release + an allocate
  state.counters["victims"] = static_cast<double>(victims);
}
BENCHMARK(BM_EvictRefill)->ArgName("sorted")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_Place(benchmark::State& state, std::string strategy_name) {
  const uint32_t segments = static_cast<uint32_t>(state.range(0));
  const uint32_t replicas = static_cast<uint32_t>(state.range(1));
  auto strategy = MakeStrategy(strategy_name);
  if (!strategy.ok()) {
    state.SkipWithError(strategy.status().message().c_str());
    return;
  }
  std::vector<std::unique_ptr<SegmentAllocator>> allocators;
  std::vector<Placer::Segment> segs;
  for (uint32_t i = 0; i < segments; ++i) {
    allocators.push_back(NewBestFitAllocator(kTiB, kDriveAllocationUnit));
    segs.push_back({i, allocators.back().get()});
  }
  Placer placer(std::move(segs));
  uint64_t object = 0;
  for (auto _ : state) {
    PlacementRequest req{0x9e3779b97f4a7c15ULL * ++object, 0, kChunk};
    auto placed = placer.place(*strategy.value(), req, replicas, replicas);
    if (!placed.ok()) {
      state.SkipWithError("place failed");
      break;
    }
    placer.release(placed.value());
  }
  state.SetItemsProcessed(state.iterations());
}

const bool kPlaceRegistered = [] {
  for (const std::string& name : StrategyNames()) {
    benchmark::RegisterBenchmark(("BM_Place/" + name).c_str(), BM_Place, name)
        ->ArgNames({"segments", "replicas"})
        ->ArgsProduct({{4, 16}, {1, 3}});
  }
  return true;
}();

}  // namespace
}  // namespace stripefs::bench

BENCHMARK_MAIN();
