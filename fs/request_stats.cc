// SPDX-License-Identifier: Apache-2.0
// RequestStats: see request_stats.h.
#include "fs/request_stats.h"

#include <linux/fuse.h>

#include <bit>
#include <cmath>
#include <map>

namespace stripefs::fs {
namespace {

const char* KindName(uint32_t op) {
  switch (op) {
    case FUSE_LOOKUP: return "lookup";
    case FUSE_GETATTR: return "getattr";
    case FUSE_SETATTR: return "setattr";
    case FUSE_READLINK: return "readlink";
    case FUSE_SYMLINK: return "symlink";
    case FUSE_MKNOD: return "mknod";
    case FUSE_MKDIR: return "mkdir";
    case FUSE_UNLINK: return "unlink";
    case FUSE_RMDIR: return "rmdir";
    case FUSE_RENAME: case FUSE_RENAME2: return "rename";
    case FUSE_LINK: return "link";
    case FUSE_OPEN: return "open";
    case FUSE_READ: return "read";
    case FUSE_WRITE: return "write";
    case FUSE_STATFS: return "statfs";
    case FUSE_RELEASE: return "release";
    case FUSE_FSYNC: return "fsync";
    case FUSE_SETXATTR: return "setxattr";
    case FUSE_GETXATTR: return "getxattr";
    case FUSE_LISTXATTR: return "listxattr";
    case FUSE_REMOVEXATTR: return "removexattr";
    case FUSE_FLUSH: return "flush";
    case FUSE_OPENDIR: return "opendir";
    case FUSE_READDIR: return "readdir";
    case FUSE_READDIRPLUS: return "readdirplus";
    case FUSE_RELEASEDIR: return "releasedir";
    case FUSE_FSYNCDIR: return "fsyncdir";
    case FUSE_CREATE: return "create";
    case FUSE_FALLOCATE: return "fallocate";
    case FUSE_LSEEK: return "lseek";
    case FUSE_FORGET: case FUSE_BATCH_FORGET: return "forget";
    default: return nullptr;
  }
}

}  // namespace

int RequestStats::Bucket(uint64_t ns) {
  if (ns < 64) return 0;
  const int log2 = 63 - std::countl_zero(ns);                   // 6 for 64..127
  const int quarter = static_cast<int>((ns >> (log2 - 2)) & 3);  // which quarter of the power of two
  return std::min(kBuckets - 1, (log2 - 6) * 4 + quarter + 1);
}

double RequestStats::BucketUpperUs(int b) {
  if (b == 0) return 0.064;
  const int log2 = (b - 1) / 4 + 6, quarter = (b - 1) % 4;
  return std::ldexp(1.0 + (quarter + 1) / 4.0, log2) / 1000.0;
}

void RequestStats::record(uint32_t opcode, uint64_t bytes, uint64_t ns) {
  Kind& k = kinds_[opcode < kKinds ? opcode : 0];
  k.count.fetch_add(1, std::memory_order_relaxed);
  k.bytes.fetch_add(bytes, std::memory_order_relaxed);
  k.sum_ns.fetch_add(ns, std::memory_order_relaxed);
  k.buckets[Bucket(ns)].fetch_add(1, std::memory_order_relaxed);
  uint64_t max = k.max_ns.load(std::memory_order_relaxed);
  while (ns > max && !k.max_ns.compare_exchange_weak(max, ns, std::memory_order_relaxed)) {
  }
}

nlohmann::json RequestStats::json() const {
  nlohmann::json out = nlohmann::json::object();
  for (uint32_t op = 0; op < kKinds; ++op) {
    const Kind& k = kinds_[op];
    const uint64_t count = k.count.load(std::memory_order_relaxed);
    if (count == 0) continue;
    const char* name = op == 0 ? "other" : KindName(op);
    if (!name) name = "other";
    std::array<uint64_t, kBuckets> b;
    uint64_t total = 0;
    for (int i = 0; i < kBuckets; ++i) total += b[i] = k.buckets[i].load(std::memory_order_relaxed);
    const double max_us = static_cast<double>(k.max_ns.load(std::memory_order_relaxed)) / 1000.0;
    auto percentile = [&](double p) {  // the bucket's upper edge, but never above the largest seen
      uint64_t seen = 0;
      for (int i = 0; i < kBuckets; ++i) {
        seen += b[i];
        if (seen >= p * total) return std::min(BucketUpperUs(i), max_us);
      }
      return max_us;
    };
    nlohmann::json& j = out[name];
    if (j.is_null()) j = nlohmann::json::object();
    auto add = [&](const char* key, uint64_t v) { j[key] = j.value(key, uint64_t{0}) + v; };
    add("count", count);
    add("bytes", k.bytes.load(std::memory_order_relaxed));
    j["sum_us"] = j.value("sum_us", 0.0) + static_cast<double>(k.sum_ns.load(std::memory_order_relaxed)) / 1000.0;
    // Kinds that share a name have their buckets added, bucket by bucket.
    std::map<double, uint64_t> buckets;
    for (const auto& pair : j.value("buckets", nlohmann::json::array())) buckets[pair[0]] += pair[1].get<uint64_t>();
    for (int i = 0; i < kBuckets; ++i) {
      if (b[i]) buckets[BucketUpperUs(i)] += b[i];
    }
    j["buckets"] = nlohmann::json::array();
    for (const auto& [upper_us, n] : buckets) j["buckets"].push_back({upper_us, n});
    // Percentiles are the upper edge of the bucket (within 25 %); kinds that
    // share a name (rename, rename2) keep the figures of the busier one.
    if (count >= j.value("percentile_count", uint64_t{0})) {
      j["percentile_count"] = count;
      j["p50_us"] = percentile(0.50);
      j["p90_us"] = percentile(0.90);
      j["p99_us"] = percentile(0.99);
      j["max_us"] = max_us;
    }
  }
  for (auto& [name, j] : out.items()) j.erase("percentile_count");
  return out;
}

nlohmann::json RequestStats::Interval(const nlohmann::json& before, const nlohmann::json& after, double seconds) {
  struct Delta {
    uint64_t count = 0, bytes = 0;
    std::map<double, uint64_t> buckets;  // upper_us -> requests in between
  };
  auto delta_of = [&](const std::string& kind, const nlohmann::json& a, Delta& d) {
    const nlohmann::json b = before.value(kind, nlohmann::json::object());
    d.count += a.at("count").get<uint64_t>() - b.value("count", uint64_t{0});
    d.bytes += a.at("bytes").get<uint64_t>() - b.value("bytes", uint64_t{0});
    std::map<double, uint64_t> earlier;
    for (const auto& pair : b.value("buckets", nlohmann::json::array())) earlier[pair[0]] = pair[1];
    for (const auto& pair : a.value("buckets", nlohmann::json::array())) {
      const uint64_t n = pair[1].get<uint64_t>() - earlier[pair[0].get<double>()];
      if (n) d.buckets[pair[0]] += n;
    }
  };
  auto figures = [&](const Delta& d) {
    auto percentile = [&](double p) {
      uint64_t seen = 0;
      for (const auto& [upper_us, n] : d.buckets) {
        seen += n;
        if (static_cast<double>(seen) >= p * static_cast<double>(d.count)) return upper_us;
      }
      return d.buckets.empty() ? 0.0 : d.buckets.rbegin()->first;
    };
    const double s = seconds > 0 ? seconds : 1;
    return nlohmann::json{{"count", d.count},
                          {"ops_per_s", static_cast<double>(d.count) / s},
                          {"bytes_per_s", static_cast<double>(d.bytes) / s},
                          {"p50_us", percentile(0.50)},
                          {"p99_us", percentile(0.99)}};
  };
  nlohmann::json out = nlohmann::json::object();
  Delta metadata;
  for (const auto& [kind, a] : after.items()) {
    Delta d;
    delta_of(kind, a, d);
    if (d.count == 0) continue;
    out[kind] = figures(d);
    if (kind != "read" && kind != "write") delta_of(kind, a, metadata);
  }
  if (metadata.count) out["metadata"] = figures(metadata);
  return out;
}

}  // namespace stripefs::fs
