// SPDX-License-Identifier: Apache-2.0
// allocation_strategy_bench: reproduces the tables of seed 000 (Mooncake's
// AllocationStrategy benchmark, /work/shared/BENCHMARKS.md §1) with stripefs's
// own allocator (NewBestFitAllocator) and placement strategies, through the same
// Placer::place the filesystem uses. Metadata only: no data is written.
//
// Workload (as the seed's tool runs it):
//   - S segments of --capacity each (skewed=yes: 1.5x, 0.5x, 1.5x, ...);
//   - R replicas per object (R <= S); one of StrategyNames();
//   - rounds of N ~ U[1,128] KV objects (3,274,752 B), or N KV then N indexer
//     objects (658,432 B) in the paired (DSA) workload;
//   - budget floor(4 * total capacity / (mean object size * R)) allocations, the
//     first quarter warm-up (not counted in any statistic);
//   - on kNoSpace: sample UtilRatio, evict 5 % of the live objects chosen
//     uniformly at random, retry (at most 5 retries);
//   - one std::mt19937_64 seeded with --seed (42) draws round sizes and victims;
//     single thread.
// Output: tab-separated tables in the seed's columns; progress goes to stderr.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/placement/allocator.h"
#include "engine/placement/placement.h"
#include "engine/pool/pool.h"  // ParseSize

namespace stripefs::bench {
namespace {

constexpr uint64_t kKvSize = 3'274'752;       // 3198 KiB
constexpr uint64_t kIndexerSize = 658'432;    // 643 KiB
constexpr int kMaxRetries = 5;
constexpr double kEvictFraction = 0.05;

using Clock = std::chrono::steady_clock;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string TitleOf(const std::string& strategy) {
  static const std::map<std::string, std::string> kTitles = {
      {"random", "Random"}, {"free-ratio-first", "FreeRatioFirst"}, {"striped", "Striped"}, {"two-choice", "TwoChoice"}};
  auto it = kTitles.find(strategy);
  return it != kTitles.end() ? it->second : strategy;
}

// Latency histogram with bounded memory: exact to the nanosecond below 16 µs,
// then 64 sub-buckets per power of two (error < 1.6 %) up to 2^63 ns.
class LatencyHistogram {
 public:
  static constexpr uint64_t kExact = 1 << 14;
  static constexpr int kSub = 64;
  LatencyHistogram() : exact_(kExact, 0), log_(64 * kSub, 0) {}

  void add(uint64_t ns) {
    ++count_;
    sum_ += ns;
    if (ns < kExact) {
      ++exact_[ns];
      return;
    }
    int msb = 63 - __builtin_clzll(ns);  // >= 14
    uint64_t sub = (ns >> (msb - 6)) & (kSub - 1);
    ++log_[static_cast<size_t>(msb) * kSub + sub];
  }
  uint64_t count() const { return count_; }
  double mean() const { return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0.0; }
  // The smallest value v with at least q of the samples <= v (lower bound of its bucket above 16 µs).
  uint64_t quantile(double q) const {
    if (count_ == 0) return 0;
    uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
    rank = std::clamp<uint64_t>(rank, 1, count_);
    uint64_t seen = 0;
    for (uint64_t i = 0; i < kExact; ++i) {
      seen += exact_[i];
      if (seen >= rank) return i;
    }
    for (size_t b = 0; b < log_.size(); ++b) {
      seen += log_[b];
      if (seen >= rank) {
        int msb = static_cast<int>(b / kSub);
        uint64_t sub = b % kSub;
        return (uint64_t{1} << msb) | (sub << (msb - 6));
      }
    }
    return UINT64_MAX;
  }

 private:
  std::vector<uint64_t> exact_, log_;
  uint64_t count_ = 0, sum_ = 0;
};

struct Config {
  uint64_t unit = kRamAllocationUnit;
  uint64_t capacity = 1ULL << 40;
  bool min_all = false;
  uint64_t seed = 42;
};

struct Row {
  uint32_t replicas = 0, segments = 0;
  std::string alloc_size;
  double cluster_gib = 0;
  std::vector<double> util;  // UtilRatio samples (counted part only)
  double stddev_sum = 0;     // sum over samples of the std dev of per-segment utilization
  double throughput = 0;
  LatencyHistogram latency;
  uint64_t evictions = 0, succ = 0, total = 0;
  uint64_t partial = 0;  // counted successes with fewer than R replicas
  double seconds = 0;    // whole run, warm-up included
  uint64_t free_runs = 0;  // at the end: free runs over all segments (the allocators' tree sizes)
  uint64_t peak_live = 0;  // most live objects at once
};

// One live object: its replicas' extents and its kind (0 KV, 1 indexer).
// 32 bytes, kept in one flat vector; eviction swap-removes.
struct LiveObject {
  uint64_t offset[3];
  uint16_t segment[3];
  uint8_t replicas;
  uint8_t kind;
};

class Run {
 public:
  Run(const Config& cfg, bool paired, bool skewed, const PlacementStrategy& strategy, uint32_t segments,
      uint32_t replicas)
      : cfg_(cfg), paired_(paired), strategy_(strategy), replicas_(replicas), rng_(cfg.seed) {
    for (uint32_t i = 0; i < segments; ++i) {
      uint64_t cap = !skewed ? cfg.capacity : (i % 2 == 0 ? cfg.capacity / 2 * 3 : cfg.capacity / 2);
      capacity_.push_back(cap);
      allocators_.push_back(NewBestFitAllocator(cap, cfg.unit));
    }
    std::vector<Placer::Segment> segs;
    for (uint32_t i = 0; i < segments; ++i) segs.push_back({i, allocators_[i].get()});
    placer_ = std::make_unique<Placer>(std::move(segs));
    requested_.assign(segments, 0);
    size_[0] = kKvSize;
    size_[1] = kIndexerSize;
    for (int k = 0; k < 2; ++k) len_[k] = (size_[k] + cfg.unit - 1) / cfg.unit * cfg.unit;
    min_ = cfg.min_all ? replicas : 1;
  }

  Row run() {
    Row row;
    row.replicas = replicas_;
    row.segments = static_cast<uint32_t>(capacity_.size());
    row.alloc_size = paired_ ? fmt::format("{}+{}KB", kKvSize / 1024, kIndexerSize / 1024)
                             : fmt::format("{}KB", kKvSize / 1024);
    long double total_cap = 0;
    for (uint64_t c : capacity_) total_cap += static_cast<long double>(c);
    row.cluster_gib = static_cast<double>(total_cap / (1ULL << 30));
    long double mean = paired_ ? (static_cast<long double>(kKvSize) + kIndexerSize) / 2 : kKvSize;
    const uint64_t total = static_cast<uint64_t>(std::floor(4 * total_cap / (mean * replicas_)));
    const uint64_t warmup = total / 4;
    row.total = total - warmup;
    live_.reserve(static_cast<size_t>(total_cap / (paired_ ? kIndexerSize : kKvSize)) + 1024);

    std::uniform_int_distribution<uint32_t> round_size(1, 128);
    auto run_start = Clock::now();
    Clock::time_point counted_start = run_start;
    uint64_t issued = 0;
    while (issued < total) {
      uint32_t n = round_size(rng_);
      for (uint8_t kind = 0; kind < (paired_ ? 2 : 1); ++kind) {
        for (uint32_t j = 0; j < n && issued < total; ++j, ++issued) {
          bool counted = issued >= warmup;
          if (issued == warmup) counted_start = Clock::now();
          auto t0 = Clock::now();
          int placed = allocate(kind, counted, &row);
          auto t1 = Clock::now();
          if (counted) {
            row.latency.add(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
            if (placed > 0) ++row.succ;
            if (placed > 0 && static_cast<uint32_t>(placed) < replicas_) ++row.partial;
          }
        }
      }
    }
    auto end = Clock::now();
    double counted_s = std::chrono::duration<double>(end - counted_start).count();
    row.throughput = counted_s > 0 ? static_cast<double>(row.total) / counted_s : 0;
    row.seconds = std::chrono::duration<double>(end - run_start).count();
    for (const auto& a : allocators_) a->for_each_free([&](uint64_t, uint64_t) { ++row.free_runs; });
    row.peak_live = peak_live_;
    return row;
  }

 private:
  // Places one object; returns the number of replicas placed (0: failed after the retries).
  int allocate(uint8_t kind, bool counted, Row* row) {
    // The filesystem computes an object's hash (SHA-256 of its URI) once, when
    // the file is first used, not per allocation; the seed's allocation path
    // hashes nothing either. So the hash here is a cheap splitmix64 of a
    // running object id, fixed for all of this object's retries.
    PlacementRequest req{SplitMix64(next_object_++), 0, len_[kind]};
    for (int attempt = 0;; ++attempt) {
      auto placed = placer_->place(strategy_, req, replicas_, min_);
      if (placed.ok()) {
        const auto& ext = placed.value();
        LiveObject obj{};
        obj.replicas = static_cast<uint8_t>(ext.size());
        obj.kind = kind;
        for (size_t i = 0; i < ext.size(); ++i) {
          obj.offset[i] = ext[i].extents.front().offset;  // contiguous placement: one extent
          obj.segment[i] = static_cast<uint16_t>(ext[i].segment);
          requested_[ext[i].segment] += size_[kind];
        }
        live_.push_back(obj);
        peak_live_ = std::max<uint64_t>(peak_live_, live_.size());
        return obj.replicas;
      }
      if (placed.status().code() != Code::kNoSpace) {
        fmt::print(stderr, "allocation_strategy_bench: {}\n", placed.status().message());
        std::exit(1);
      }
      if (attempt == kMaxRetries || live_.empty()) return 0;
      if (counted) {
        sample(row);
        ++row->evictions;
      }
      evict();
    }
  }

  // UtilRatio = mean over segments of requested (un-rounded) bytes / capacity.
  void sample(Row* row) const {
    double sum = 0, sq = 0;
    for (size_t i = 0; i < capacity_.size(); ++i) {
      double u = static_cast<double>(requested_[i]) / static_cast<double>(capacity_[i]);
      sum += u;
      sq += u * u;
    }
    double n = static_cast<double>(capacity_.size());
    double mean = sum / n;
    row->util.push_back(mean);
    row->stddev_sum += std::sqrt(std::max(0.0, sq / n - mean * mean));
  }

  void evict() {
    size_t victims = std::max<size_t>(1, static_cast<size_t>(static_cast<double>(live_.size()) * kEvictFraction));
    for (size_t v = 0; v < victims && !live_.empty(); ++v) {
      std::uniform_int_distribution<size_t> pick(0, live_.size() - 1);
      size_t i = pick(rng_);
      const LiveObject& obj = live_[i];
      scratch_.clear();
      for (uint8_t r = 0; r < obj.replicas; ++r) {
        scratch_.push_back({obj.segment[r], {{obj.offset[r], len_[obj.kind]}}});
        requested_[obj.segment[r]] -= size_[obj.kind];
      }
      placer_->release(scratch_);
      live_[i] = live_.back();
      live_.pop_back();
    }
  }

  const Config& cfg_;
  const bool paired_;
  const PlacementStrategy& strategy_;
  const uint32_t replicas_;
  uint32_t min_ = 1;
  std::mt19937_64 rng_;
  std::vector<uint64_t> capacity_;
  std::vector<std::unique_ptr<SegmentAllocator>> allocators_;
  std::unique_ptr<Placer> placer_;
  std::vector<uint64_t> requested_;  // per segment: requested bytes of live replicas
  uint64_t size_[2], len_[2];
  std::vector<LiveObject> live_;
  std::vector<meta::Replica> scratch_;
  uint64_t next_object_ = 0;
  uint64_t peak_live_ = 0;
};

// pXX of UtilRatio, low tail as in the seed: the value that XX % of the samples are at or above.
double LowTail(const std::vector<double>& sorted, int pct) {
  size_t n = sorted.size();
  size_t k = n * static_cast<size_t>(100 - pct) / 100;
  return sorted[std::min(k, n - 1)];
}

// The 1-minute load average: this machine is shared, so the progress lines say how busy it was.
std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  in >> one;
  return one.empty() ? "?" : one;
}

void PrintHeader() {
  fmt::print(
      "Replica\tSegments\tAllocSize\tCluster(GB)\tUtilRatio_min\tUtilRatio_p99\tUtilRatio_p90\tUtilRatio_p50\t"
      "UtilRatio_max\tUtilRatio_avg\tThroughput\tAvg(ns)\tP50(ns)\tP90(ns)\tP99(ns)\tUtilStdDev\tEvictions(round)\t"
      "Succ/Total\n");
}

void PrintRow(Row& r) {
  std::string util;
  if (r.util.empty()) {
    util = "-\t-\t-\t-\t-\t-";
  } else {
    std::sort(r.util.begin(), r.util.end());
    double avg = 0;
    for (double u : r.util) avg += u;
    avg /= static_cast<double>(r.util.size());
    util = fmt::format("{:.6f}\t{:.6f}\t{:.6f}\t{:.6f}\t{:.6f}\t{:.6f}", r.util.front(), LowTail(r.util, 99),
                       LowTail(r.util, 90), LowTail(r.util, 50), r.util.back(), avg);
  }
  double stddev = r.util.empty() ? 0.0 : r.stddev_sum / static_cast<double>(r.util.size());
  fmt::print("{}\t{}\t{}\t{:.1f}\t{}\t{:.0f}\t{:.0f}\t{}\t{}\t{}\t{:.4f}\t{}\t{}/{}\n", r.replicas, r.segments,
             r.alloc_size, r.cluster_gib, util, r.throughput, r.latency.mean(), r.latency.quantile(0.50),
             r.latency.quantile(0.90), r.latency.quantile(0.99), stddev, r.evictions, r.succ, r.total);
  std::fflush(stdout);
}

}  // namespace
}  // namespace stripefs::bench

int main(int argc, char** argv) {
  using namespace stripefs;
  using namespace stripefs::bench;

  CLI::App app{
      "allocation_strategy_bench: the seed 000 allocation-strategy tables (BENCHMARKS.md §1), run with stripefs's\n"
      "best-fit allocator and placement strategies through Placer::place. Metadata only: no data is written.\n"
      "Prints tab-separated tables on stdout, one per (workload, skew, strategy); progress on stderr."};
  std::string workload = "dsa", capacity_text = "1T", min_text = "1";
  bool quick = false;
  std::vector<std::string> strategies;
  std::vector<uint32_t> segments, replicas;
  Config cfg;
  app.add_option("--workload", workload,
                 "kv (KV-only), paired (KV + indexer, the DSA workload) or dsa (both, both skews; the seed's run)")
      ->check(CLI::IsMember({"dsa", "kv", "paired"}))
      ->capture_default_str();
  app.add_flag("--quick", quick,
               "Segments 1,4,16 and replicas 1,3 only (both workloads and skews, every strategy), with 256G segments "
               "unless --capacity is given: the same dynamics (fill, evict, refill) in a quarter of the allocations");
  app.add_option("--strategies", strategies, "Comma-separated strategies (default: random,free-ratio-first,striped,two-choice)")
      ->delimiter(',');
  app.add_option("--segments", segments, "Comma-separated segment counts (default 1,2,4,8,16)")->delimiter(',');
  app.add_option("--replicas", replicas, "Comma-separated replica counts, each <= segments (default 1,2,3)")
      ->delimiter(',')
      ->check(CLI::Range(1, 3));
  app.add_option("--unit", cfg.unit,
                 "Allocation unit in bytes: 64 (kRamAllocationUnit, the seed's memory segments) or 4096 "
                 "(kDriveAllocationUnit, what drives use)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  auto* capacity_opt =
      app.add_option("--capacity", capacity_text, "Base capacity of a segment (K/M/G/T)")->capture_default_str();
  app.add_option("--min-replicas", min_text,
                 "1: an allocation succeeds with at least one replica placed (the seed's store); "
                 "all: every one of the R replicas (what the filesystem asks)")
      ->check(CLI::IsMember({"1", "all"}))
      ->capture_default_str();
  app.add_option("--seed", cfg.seed, "Seed of the one std::mt19937_64 (round sizes, eviction victims)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  if (quick && capacity_opt->count() == 0) capacity_text = "256G";
  auto cap = ParseSize(capacity_text);
  if (!cap.ok()) {
    fmt::print(stderr, "allocation_strategy_bench: --capacity: {}\n", cap.status().message());
    return 2;
  }
  cfg.capacity = cap.value();
  cfg.min_all = (min_text == "all");
  if (cfg.capacity < 2 * cfg.unit || cfg.capacity / 2 < kKvSize) {
    fmt::print(stderr, "allocation_strategy_bench: --capacity must hold at least one KV object per half segment\n");
    return 2;
  }
  if (strategies.empty()) strategies = {"random", "free-ratio-first", "striped", "two-choice"};
  if (segments.empty()) segments = quick ? std::vector<uint32_t>{1, 4, 16} : std::vector<uint32_t>{1, 2, 4, 8, 16};
  if (replicas.empty()) replicas = quick ? std::vector<uint32_t>{1, 3} : std::vector<uint32_t>{1, 2, 3};
  for (uint32_t s : segments) {
    if (s == 0 || s > 1024) {
      fmt::print(stderr, "allocation_strategy_bench: segment counts must be 1..1024\n");
      return 2;
    }
  }
  std::sort(segments.begin(), segments.end());
  std::sort(replicas.begin(), replicas.end());
  std::vector<std::unique_ptr<PlacementStrategy>> made;
  for (const auto& name : strategies) {
    auto s = MakeStrategy(name);
    if (!s.ok()) {
      fmt::print(stderr, "allocation_strategy_bench: {}\n", s.status().message());
      return 2;
    }
    made.push_back(std::move(s).value());
  }

  std::vector<bool> workloads;  // paired?
  if (workload != "paired") workloads.push_back(false);
  if (workload != "kv") workloads.push_back(true);

  fmt::print("# unit={} min-replicas={} capacity={} seed={}\n", cfg.unit, cfg.min_all ? "all" : "1", cfg.capacity,
             cfg.seed);
  auto start = Clock::now();
  for (bool paired : workloads) {
    for (bool skewed : {false, true}) {
      for (size_t si = 0; si < made.size(); ++si) {
        fmt::print("{} / Skewed={} / {}\n", paired ? "Paired (KV + Indexer)" : "KV-only", skewed ? "yes" : "no",
                   TitleOf(strategies[si]));
        PrintHeader();
        for (uint32_t s : segments) {
          for (uint32_t r : replicas) {
            if (r > s) continue;
            Run run(cfg, paired, skewed, *made[si], s, r);
            Row row = run.run();
            PrintRow(row);
            fmt::print(stderr, "[{} skewed={} {} S={} R={}] {:.1f} s, partial replica sets {}, peak live objects {}, free runs at end {}, "
                       "load {}, total {:.0f} s\n",
                       paired ? "paired" : "kv", skewed ? "yes" : "no", strategies[si], s, r, row.seconds,
                       row.partial, row.peak_live, row.free_runs, LoadAverage(), std::chrono::duration<double>(Clock::now() - start).count());
          }
        }
        fmt::print("\n");
      }
    }
  }
  return 0;
}
