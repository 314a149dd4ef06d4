// SPDX-License-Identifier: Apache-2.0
// The Prometheus metrics file of a mount (see metrics_writer.h).
#include "fs/metrics_writer.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "fs/metrics.h"

namespace stripefs::fs {

MetricsWriter::MetricsWriter(std::function<Result<nlohmann::json>()> stats, std::string path)
    : stats_(std::move(stats)), path_(std::move(path)) {
  if (!path_.empty()) thread_ = std::thread([this] { run(); });
}

void MetricsWriter::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  write();
}

void MetricsWriter::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    write();
    lock.lock();
    wake_.wait_for(lock, std::chrono::seconds(5), [&] { return stop_; });
  }
}

void MetricsWriter::write() {
  auto j = stats_();
  if (!j.ok()) return spdlog::warn("metrics: {}", j.status().message());
  const std::string tmp = path_ + ".tmp";
  FILE* out = fopen(tmp.c_str(), "w");
  if (!out) return spdlog::warn("metrics: cannot write {}: {}", tmp, strerror(errno));
  const std::string text = PrometheusText(j.value());
  const bool written = fwrite(text.data(), 1, text.size(), out) == text.size();
  if (fclose(out) != 0 || !written || rename(tmp.c_str(), path_.c_str()) != 0) {
    spdlog::warn("metrics: cannot write {}: {}", path_, strerror(errno));
  }
}

}  // namespace stripefs::fs
