// SPDX-License-Identifier: Apache-2.0
// Per-request-kind counters and latency histograms of a mount: what `stripefs
// stats` and the Prometheus metrics (fs/metrics.h) report. Recorded by the session loop
// around each request (the handler's whole time, reply included); lock-free.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace stripefs::fs {

class RequestStats {
 public:
  // opcode: the FUSE opcode; bytes: the payload of a READ or WRITE.
  void record(uint32_t opcode, uint64_t bytes, uint64_t ns);
  // {"<kind>": {"count","bytes","sum_us","p50_us","p90_us","p99_us","max_us","buckets"}}
  // for kinds seen; buckets: [[upper_us, count], ...] of the latency buckets
  // that hold requests, each bucket's own count, in ascending order.
  nlohmann::json json() const;
  // What happened between two json() answers taken `seconds` apart:
  // {"<kind>": {"count","ops_per_s","bytes_per_s","p50_us","p99_us"}} for the
  // kinds with requests in between, plus "metadata" for every kind but read
  // and write together. A percentile is a bucket's upper edge (as in json()).
  static nlohmann::json Interval(const nlohmann::json& before, const nlohmann::json& after, double seconds);

 private:
  static constexpr int kKinds = 64;    // FUSE opcodes below 64; the rest count as "other"
  static constexpr int kBuckets = 112;  // latency buckets: 4 per power of two from 64 ns to ~10 minutes
  struct Kind {
    std::atomic<uint64_t> count{0}, bytes{0}, sum_ns{0}, max_ns{0};
    std::array<std::atomic<uint64_t>, kBuckets> buckets{};
  };
  static int Bucket(uint64_t ns);
  static double BucketUpperUs(int b);
  std::array<Kind, kKinds> kinds_;
};

}  // namespace stripefs::fs
