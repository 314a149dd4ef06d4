// SPDX-License-Identifier: Apache-2.0
// A mount's stats document (Frontend::stats_json, the JSON of `stripefs
// stats --json`) as Prometheus metric families: what -o metrics=FILE writes
// in the text format and -o metrics_listen=ADDR:PORT serves over HTTP at
// /metrics. Request latencies are histograms in seconds.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace prometheus {
struct MetricFamily;
class Exposer;
class Collectable;
}  // namespace prometheus

namespace stripefs::fs {

using StatsSource = std::function<Result<nlohmann::json>()>;

std::vector<prometheus::MetricFamily> MetricFamilies(const nlohmann::json& stats);
// MetricFamilies in the Prometheus text exposition format.
std::string PrometheusText(const nlohmann::json& stats);

// The HTTP endpoint of -o metrics_listen: each scrape of /metrics asks stats
// for a fresh document. Stops serving when destroyed.
class MetricsEndpoint {
 public:
  // listen: HOST:PORT (or [V6ADDR]:PORT). kInvalidArgument when it cannot
  // listen there (the port taken, an address not of this machine).
  static Result<std::unique_ptr<MetricsEndpoint>> Start(const std::string& listen, StatsSource stats);
  ~MetricsEndpoint();

 private:
  MetricsEndpoint() = default;
  std::shared_ptr<prometheus::Collectable> collectable_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace stripefs::fs
