// SPDX-License-Identifier: Apache-2.0
// Request counters, latency percentiles and the Prometheus text of a mount's stats.
#include "fs/request_stats.h"

#include <gtest/gtest.h>
#include <linux/fuse.h>
#include <prometheus/metric_family.h>

#include <cmath>

#include <sstream>

#include "fs/metrics.h"

namespace stripefs::fs {
namespace {

TEST(RequestStatsTest, CountsBytesAndPercentilesWithinABucket) {
  RequestStats s;
  for (int i = 1; i <= 100; ++i) s.record(FUSE_READ, 4096, i * 1000ull);  // 1 .. 100 us
  s.record(FUSE_WRITE, 1 << 20, 5'000'000);                                // 5 ms
  s.record(FUSE_RENAME, 0, 2000);
  s.record(FUSE_RENAME2, 0, 3000);
  const nlohmann::json j = s.json();
  EXPECT_EQ(j["read"]["count"], 100);
  EXPECT_EQ(j["read"]["bytes"], 409600);
  EXPECT_NEAR(j["read"]["p50_us"].get<double>(), 50, 50 * 0.25 + 1) << "within a quarter-power-of-two bucket";
  EXPECT_NEAR(j["read"]["p90_us"].get<double>(), 90, 90 * 0.25 + 1);
  EXPECT_NEAR(j["read"]["p99_us"].get<double>(), 99, 1.0) << "never above the largest seen";
  EXPECT_EQ(j["read"]["max_us"], 100.0);
  EXPECT_NEAR(j["write"]["p50_us"].get<double>(), 5000, 5000 * 0.25);
  EXPECT_EQ(j["rename"]["count"], 2) << "rename and rename2 are one kind";
  EXPECT_FALSE(j.contains("lookup")) << "kinds never seen are left out";
}

// A stats document around the given requests, as Frontend::stats_json makes it.
nlohmann::json StatsDocument(const RequestStats& s) {
  nlohmann::json st;
  st["version"] = "9.8.7";
  st["uptime_s"] = 12.5;
  st["requests"] = s.json();
  st["cache"] = {{"hits", 3}, {"misses", 1}, {"insertions", 1}, {"evictions", 0}, {"bytes", 4096}, {"capacity", 8192}};
  st["dirty_bytes"] = 0;
  st["eviction"] = {{"objects", 2}, {"bytes", 100}};
  st["repaired_blocks"] = 1;
  st["errors"] = {{"EIO", 0}, {"ENOSPC", 4}};
  st["segments"] = {{{"id", 0}, {"kind", "drive"}, {"capacity", 100}, {"used", 10}},
                    {{"id", 1}, {"kind", "ram"}, {"capacity", 50}, {"used", 5}}};
  return st;
}

TEST(RequestStatsTest, PrometheusTextGroupsEachMetric) {
  RequestStats s;
  s.record(FUSE_READ, 10, 1000);
  s.record(FUSE_WRITE, 20, 1000);
  const std::string text = PrometheusText(StatsDocument(s));
  EXPECT_NE(text.find("stripefs_requests_total{kind=\"read\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("stripefs_request_bytes_total{kind=\"write\"} 20\n"), std::string::npos);
  EXPECT_NE(text.find("stripefs_cache_hits_total 3\n"), std::string::npos);
  EXPECT_NE(text.find("stripefs_errors_total{errno=\"ENOSPC\"} 4\n"), std::string::npos);
  EXPECT_NE(text.find("stripefs_segment_used_bytes{segment=\"1\",kind=\"ram\"} 5\n"), std::string::npos);
  EXPECT_NE(text.find("stripefs_build_info{version=\"9.8.7\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE stripefs_request_duration_seconds histogram\n"), std::string::npos);
  EXPECT_EQ(text.find("quantile"), std::string::npos) << "latencies are histograms, not quantile gauges";
  // Every sample follows the HELP/TYPE of its own metric, with no other metric in between.
  std::string current;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      current = line.substr(7, line.find(' ', 7) - 7);
    } else if (line[0] != '#') {
      EXPECT_EQ(line.substr(0, current.size()), current) << line;
    }
  }
}

// The latency histogram in seconds: exact counts at each power-of-two bound
// (edges of the finer buckets), +Inf holding every request, the sum in seconds.
TEST(RequestStatsTest, LatencyHistogramInSecondsAtPowerOfTwoBounds) {
  RequestStats s;
  s.record(FUSE_READ, 0, 1000);        // 1 µs: in the bucket ending at 1024 ns
  s.record(FUSE_READ, 0, 3000);        // in the bucket ending at 3072 ns, below 4096
  s.record(FUSE_READ, 0, 4096);        // in the bucket starting at 4096 ns
  s.record(FUSE_READ, 0, 5'000'000);   // 5 ms
  s.record(FUSE_READ, 0, 60'000'000'000ull);  // a minute: past the last bound
  s.record(FUSE_RENAME, 0, 2000);
  s.record(FUSE_RENAME2, 0, 2000);
  const auto families = MetricFamilies(StatsDocument(s));
  const prometheus::MetricFamily* hist = nullptr;
  for (const auto& f : families) {
    if (f.name == "stripefs_request_duration_seconds") hist = &f;
  }
  ASSERT_NE(hist, nullptr);
  auto histogram = [&](const std::string& kind) {
    for (const auto& m : hist->metric) {
      if (m.label.size() == 1 && m.label[0].value == kind) return m.histogram;
    }
    ADD_FAILURE() << "no histogram for " << kind;
    return prometheus::ClientMetric::Histogram{};
  };
  const auto read = histogram("read");
  EXPECT_EQ(read.sample_count, 5u);
  EXPECT_NEAR(read.sample_sum, 60.005008096, 1e-9);
  auto count_at = [&](const prometheus::ClientMetric::Histogram& h, double le) -> int64_t {
    for (const auto& b : h.bucket) {
      if (b.upper_bound == le || std::fabs(b.upper_bound - le) < le * 1e-9) return static_cast<int64_t>(b.cumulative_count);
    }
    return -1;
  };
  EXPECT_EQ(count_at(read, 1024e-9), 1);
  EXPECT_EQ(count_at(read, 2048e-9), 1);
  EXPECT_EQ(count_at(read, 4096e-9), 2);
  EXPECT_EQ(count_at(read, 8192e-9), 3);
  EXPECT_EQ(count_at(read, std::ldexp(1.0, 23) * 1e-9), 4) << "5 ms is below 2^23 ns";
  EXPECT_EQ(count_at(read, std::ldexp(1.0, 33) * 1e-9), 4) << "the minute is above the last bound";
  EXPECT_EQ(read.bucket.back().upper_bound, INFINITY);
  EXPECT_EQ(read.bucket.back().cumulative_count, 5u);
  for (size_t i = 1; i < read.bucket.size(); ++i) {
    EXPECT_LT(read.bucket[i - 1].upper_bound, read.bucket[i].upper_bound);
    EXPECT_LE(read.bucket[i - 1].cumulative_count, read.bucket[i].cumulative_count);
  }
  EXPECT_EQ(count_at(histogram("rename"), 2048e-9), 2) << "rename and rename2 share one histogram";
}

// stats --watch: the figures of what happened between two documents only.
TEST(RequestStatsTest, IntervalCountsOnlyWhatHappenedBetweenTwoDocuments) {
  RequestStats s;
  for (int i = 0; i < 100; ++i) s.record(FUSE_READ, 4096, 1'000'000);  // before: 100 slow reads of 1 ms
  s.record(FUSE_LOOKUP, 0, 1000);
  const nlohmann::json before = s.json();
  for (int i = 0; i < 50; ++i) s.record(FUSE_READ, 8192, 10'000);  // between: 50 reads of 10 µs
  s.record(FUSE_WRITE, 100, 2'000'000);
  s.record(FUSE_GETATTR, 0, 3000);
  s.record(FUSE_CREATE, 0, 50'000);
  const nlohmann::json iv = RequestStats::Interval(before, s.json(), 2.0);
  EXPECT_EQ(iv["read"]["count"], 50);
  EXPECT_DOUBLE_EQ(iv["read"]["ops_per_s"].get<double>(), 25.0);
  EXPECT_DOUBLE_EQ(iv["read"]["bytes_per_s"].get<double>(), 50 * 8192 / 2.0);
  EXPECT_NEAR(iv["read"]["p99_us"].get<double>(), 10, 10 * 0.25) << "the 1 ms reads before the interval do not count";
  EXPECT_EQ(iv["write"]["count"], 1);
  EXPECT_FALSE(iv.contains("lookup")) << "no lookup in between";
  EXPECT_EQ(iv["metadata"]["count"], 2) << "getattr and create, not read or write";
  EXPECT_NEAR(iv["metadata"]["p99_us"].get<double>(), 50, 50 * 0.25);
  EXPECT_NEAR(iv["metadata"]["p50_us"].get<double>(), 3, 3 * 0.25);
}

}  // namespace
}  // namespace stripefs::fs
