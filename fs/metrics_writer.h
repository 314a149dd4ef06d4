// SPDX-License-Identifier: Apache-2.0
// -o metrics=FILE: a mount's metrics (fs/metrics.h) in the Prometheus text format,
// rewritten every 5 s (and at unmount) by replacing the file, so a reader
// never sees half of it.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "base/status.h"

namespace stripefs::fs {

class MetricsWriter {
 public:
  // stats: the stats document (see kStatsXattr in fs/control.h). An empty
  // path writes nothing and starts no thread.
  MetricsWriter(std::function<Result<nlohmann::json>()> stats, std::string path);
  ~MetricsWriter() { stop(); }
  // Stops the thread and writes the file a last time.
  void stop();

 private:
  void run();
  void write();

  const std::function<Result<nlohmann::json>()> stats_;
  const std::string path_;
  std::mutex mu_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  std::condition_variable wake_;
  std::thread thread_;
};

}  // namespace stripefs::fs
