// SPDX-License-Identifier: Apache-2.0
// The Prometheus view of a mount's stats (see metrics.h).
#include "fs/metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <deque>
#include <iterator>
#include <exception>
#include <sstream>

namespace stripefs::fs {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// The histogram's upper bounds: every power of two from 2^10 ns (about 1 µs)
// to 2^33 ns (about 8.6 s). Each is an edge of RequestStats's finer buckets
// (four per power of two), so the cumulative counts are exact; the finest
// bucket past 2^33 ns also takes every slower request, so it goes to +Inf only.
constexpr int kFirstPow2 = 10, kLastPow2 = 33;

class Families {
 public:
  MetricFamily& add(const std::string& name, MetricType type, const std::string& help) {
    families_.push_back({"stripefs_" + name, help, type, {}});
    return families_.back();
  }
  // One family with a single sample and no labels.
  void single(const std::string& name, MetricType type, const std::string& help, double v) {
    sample(add(name, type, help), {}, v);
  }
  static void sample(MetricFamily& f, std::vector<ClientMetric::Label> labels, double v) {
    ClientMetric m;
    m.label = std::move(labels);
    if (f.type == MetricType::Counter) m.counter.value = v;
    if (f.type == MetricType::Gauge) m.gauge.value = v;
    f.metric.push_back(std::move(m));
  }
  std::vector<MetricFamily> take() { return {std::make_move_iterator(families_.begin()), std::make_move_iterator(families_.end())}; }

 private:
  std::deque<MetricFamily> families_;  // a deque: add() hands out references that must stay valid
};

// A request kind's latency buckets ([[upper_us, count], ...]) as a histogram in seconds.
ClientMetric::Histogram LatencyHistogram(const nlohmann::json& r) {
  ClientMetric::Histogram h;
  h.sample_count = r.at("count").get<uint64_t>();
  h.sample_sum = r.value("sum_us", 0.0) / 1e6;
  const nlohmann::json buckets = r.value("buckets", nlohmann::json::array());
  size_t next = 0;
  uint64_t cumulative = 0;
  for (int p = kFirstPow2; p <= kLastPow2; ++p) {
    const double bound_us = std::ldexp(1.0, p) / 1000.0;
    while (next < buckets.size() && buckets[next][0].get<double>() <= bound_us * (1 + 1e-9)) {
      cumulative += buckets[next++][1].get<uint64_t>();
    }
    h.bucket.push_back({cumulative, std::ldexp(1.0, p) / 1e9});  // the nearest double to the bound, as it prints
  }
  h.bucket.push_back({h.sample_count, INFINITY});
  return h;
}

}  // namespace

std::vector<MetricFamily> MetricFamilies(const nlohmann::json& st) {
  Families out;
  const auto Counter = MetricType::Counter, Gauge = MetricType::Gauge;
  Families::sample(out.add("build_info", Gauge, "The stripefs version serving the mount (always 1)"),
                   {{"version", st.value("version", "unknown")}}, 1);
  out.single("uptime_seconds", Gauge, "Seconds since the mount started", st.at("uptime_s").get<double>());

  const auto& req = st.at("requests");
  auto& requests = out.add("requests_total", Counter, "FUSE requests served, by kind");
  auto& bytes = out.add("request_bytes_total", Counter, "Bytes read or written by requests, by kind");
  auto& latency = out.add("request_duration_seconds", MetricType::Histogram,
                          "Time the daemon spent on a request, reply included, by kind");
  for (const auto& [kind, r] : req.items()) {
    Families::sample(requests, {{"kind", kind}}, r.at("count").get<double>());
    if (r.at("bytes").get<uint64_t>() > 0) Families::sample(bytes, {{"kind", kind}}, r.at("bytes").get<double>());
    ClientMetric m;
    m.label = {{"kind", kind}};
    m.histogram = LatencyHistogram(r);
    latency.metric.push_back(std::move(m));
  }

  const auto& c = st.at("cache");
  for (const char* k : {"hits", "misses", "insertions", "evictions"}) {
    out.single(std::string("cache_") + k + "_total", Counter, std::string("RAM tier read cache ") + k,
               c.at(k).get<double>());
  }
  out.single("cache_bytes", Gauge, "Bytes held by the RAM tier", c.at("bytes").get<double>());
  out.single("cache_capacity_bytes", Gauge, "Capacity of the RAM tier", c.at("capacity").get<double>());
  out.single("dirty_bytes", Gauge, "Written bytes not yet on the drives", st.at("dirty_bytes").get<double>());
  out.single("evicted_objects_total", Counter, "Files evicted in cache mode",
             st.at("eviction").at("objects").get<double>());
  out.single("repaired_blocks_total", Counter, "Blocks rewritten from an intact replica",
             st.at("repaired_blocks").get<double>());
  auto& errors = out.add("errors_total", Counter, "Requests answered with EIO or ENOSPC, by errno");
  for (const auto& [e, n] : st.at("errors").items()) Families::sample(errors, {{"errno", e}}, n.get<double>());

  auto& capacity = out.add("segment_capacity_bytes", Gauge, "Capacity of each segment");
  auto& used = out.add("segment_used_bytes", Gauge, "Used bytes of each segment");
  for (const auto& seg : st.at("segments")) {
    std::vector<ClientMetric::Label> labels = {{"segment", std::to_string(seg.at("id").get<uint32_t>())},
                                               {"kind", seg.at("kind").get<std::string>()}};
    Families::sample(capacity, labels, seg.at("capacity").get<double>());
    Families::sample(used, labels, seg.at("used").get<double>());
  }
  if (st.contains("metadata")) {
    out.single("metadata_used_bytes", Gauge, "Bytes of the metadata directory",
               st["metadata"].at("used").get<double>());
    out.single("metadata_free_bytes", Gauge, "Free bytes on the metadata directory's file system",
               st["metadata"].at("free").get<double>());
  }
  return out.take();
}

std::string PrometheusText(const nlohmann::json& stats) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, MetricFamilies(stats));
  return out.str();
}

namespace {

class StatsCollectable : public prometheus::Collectable {
 public:
  explicit StatsCollectable(StatsSource stats) : stats_(std::move(stats)) {}
  std::vector<MetricFamily> Collect() const override {
    auto j = stats_();
    if (!j.ok()) {
      spdlog::warn("metrics endpoint: {}", j.status().message());
      return {};
    }
    return MetricFamilies(j.value());
  }

 private:
  const StatsSource stats_;
};

}  // namespace

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& listen, StatsSource stats) {
  std::unique_ptr<MetricsEndpoint> e(new MetricsEndpoint);
  e->collectable_ = std::make_shared<StatsCollectable>(std::move(stats));
  try {
    // One thread: a scrape is a few hundred lines, and the mount's workers matter more.
    e->exposer_ = std::make_unique<prometheus::Exposer>(listen, 1);
  } catch (const std::exception& ex) {
    return Status::Invalid(fmt::format("-o metrics_listen={}: cannot listen there (is the port in use, or the "
                                       "address not one of this machine's?): {}",
                                       listen, ex.what()));
  }
  e->exposer_->RegisterCollectable(e->collectable_);
  return e;
}

MetricsEndpoint::~MetricsEndpoint() = default;

}  // namespace stripefs::fs
