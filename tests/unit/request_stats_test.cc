// Request counters, latency percentiles and the Prometheus text of a mount's stats.
#include "fs/request_stats.h"

#include <gtest/gtest.h>
#include <linux/fuse.h>

#include <sstream>

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

TEST(RequestStatsTest, PrometheusTextGroupsEachMetric) {
  RequestStats s;
  s.record(FUSE_READ, 10, 1000);
  s.record(FUSE_WRITE, 20, 1000);
  nlohmann::json st;
  st["requests"] = s.json();
  st["cache"] = {{"hits", 3}, {"misses", 1}, {"insertions", 1}, {"evictions", 0}, {"bytes", 4096}, {"capacity", 8192}};
  st["dirty_bytes"] = 0;
  st["eviction"] = {{"objects", 2}, {"bytes", 100}};
  st["repaired_blocks"] = 1;
  st["errors"] = {{"EIO", 0}, {"ENOSPC", 4}};
  st["segments"] = {{{"id", 0}, {"kind", "drive"}, {"capacity", 100}, {"used", 10}},
                    {{"id", 1}, {"kind", "ram"}, {"capacity", 50}, {"used", 5}}};
  const std::string text = PrometheusText(st);
  EXPECT_NE(text.find("stripefs_requests_total{kind=\"read\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("stripefs_request_bytes_total{kind=\"write\"} 20\n"), std::string::npos);
  EXPECT_NE(text.find("stripefs_cache_hits_total 3\n"), std::string::npos);
  EXPECT_NE(text.find("stripefs_errors_total{errno=\"ENOSPC\"} 4\n"), std::string::npos);
  EXPECT_NE(text.find("stripefs_segment_used_bytes{segment=\"1\",kind=\"ram\"} 5\n"), std::string::npos);
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

}  // namespace
}  // namespace stripefs::fs
