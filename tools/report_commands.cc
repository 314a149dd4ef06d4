// SPDX-License-Identifier: Apache-2.0
// placement, df and stats: read-only answers, from a live mount's daemon
// (fs/control.h) or from an unmounted pool's metadata.
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>

#include "engine/pool/pool.h"
#include "fs/control.h"
#include "fs/request_stats.h"
#include "tools/commands.h"

namespace stripefs {
namespace {

void PrintPlacement(const nlohmann::json& j, bool json) {
  if (json) {
    fmt::print("{}\n", j.dump());
    return;
  }
  fmt::print("{}\n  uri {}\n  size {}  chunk size {}  chunks {}\n", j["path"].get<std::string>(),
             j["uri"].get<std::string>(), j["size"].get<uint64_t>(), j["chunk_size"].get<uint64_t>(), j["chunks"].size());
  // One line per replica; a replica in several extents gets a line for each further one.
  fmt::print("  {:>6} {:>12} {:>10}  {:>7}  {:>12} {:>10}  {}\n", "chunk", "file offset", "length", "segment",
             "drive offset", "extent", "drive");
  for (const auto& c : j["chunks"]) {
    for (const auto& r : c["replicas"]) {
      bool first = true;
      for (const auto& e : r["extents"]) {
        if (first) {
          fmt::print("  {:>6} {:>12} {:>10}  {:>7}  {:>12} {:>10}  {}\n", c["index"].get<uint64_t>(),
                     c["offset"].get<uint64_t>(), c["length"].get<uint64_t>(), r["segment"].get<uint32_t>(),
                     e["offset"].get<uint64_t>(), e["length"].get<uint64_t>(), r["path"].get<std::string>());
        } else {
          fmt::print("  {:>6} {:>12} {:>10}  {:>7}  {:>12} {:>10}\n", "", "", "", "", e["offset"].get<uint64_t>(),
                     e["length"].get<uint64_t>());
        }
        first = false;
      }
    }
  }
}

void PrintStats(const nlohmann::json& j) {
  fmt::print("up {:.0f} s\n", j["uptime_s"].get<double>());
  fmt::print("{:<12} {:>10} {:>10} {:>9} {:>9} {:>9} {:>10}\n", "request", "count", "bytes", "p50 us", "p90 us",
             "p99 us", "max us");
  for (const auto& [kind, r] : j["requests"].items()) {
    fmt::print("{:<12} {:>10} {:>10} {:>9.1f} {:>9.1f} {:>9.1f} {:>10.1f}\n", kind, r["count"].get<uint64_t>(),
               Human(r["bytes"].get<uint64_t>()), r["p50_us"].get<double>(), r["p90_us"].get<double>(),
               r["p99_us"].get<double>(), r["max_us"].get<double>());
  }
  const auto& c = j["cache"];
  fmt::print("RAM tier: {} of {} in {} chunks; hits {}, misses {}, evictions {}\n", Human(c["bytes"].get<uint64_t>()),
             Human(c["capacity"].get<uint64_t>()), c["entries"].get<uint64_t>(), c["hits"].get<uint64_t>(),
             c["misses"].get<uint64_t>(), c["evictions"].get<uint64_t>());
  const auto& e = j["eviction"];
  fmt::print("on full: {}; files evicted {} ({}); dirty bytes {}; blocks repaired {}; errors EIO {}, ENOSPC {}\n",
             e["mode"].get<std::string>(), e["objects"].get<uint64_t>(), Human(e["bytes"].get<uint64_t>()),
             j["dirty_bytes"].get<uint64_t>(), j["repaired_blocks"].get<uint64_t>(), j["errors"]["EIO"].get<uint64_t>(),
             j["errors"]["ENOSPC"].get<uint64_t>());
  for (const auto& seg : j["segments"]) {
    fmt::print("segment {} {:5} {:>9} used of {:>9}  {}\n", seg["id"].get<uint32_t>(), seg["kind"].get<std::string>(),
               Human(seg["used"].get<uint64_t>()), Human(seg["capacity"].get<uint64_t>()),
               seg["path"].get<std::string>());
  }
}

// "150us", "2.1ms", "-" for no requests.
std::string Latency(const nlohmann::json& r) {
  if (r.is_null()) return "-";
  const double us = r["p99_us"].get<double>();
  return us < 1000 ? fmt::format("{:.0f}us", us) : us < 1e6 ? fmt::format("{:.1f}ms", us / 1000) : fmt::format("{:.1f}s", us / 1e6);
}

// One line of `stats --watch`: what the mount did in the last interval.
void PrintInterval(const nlohmann::json& interval, bool header) {
  if (header) {
    fmt::print("\n{:>8}  {:>8} {:>10} {:>9}  {:>8} {:>10} {:>9}  {:>8} {:>8}\n", "time", "read/s", "read MB/s",
               "read p99", "write/s", "write MB/s", "write p99", "meta/s", "meta p99");
  }
  const auto& r = interval["requests"];
  auto part = [&](const char* kind) { return r.contains(kind) ? r[kind] : nlohmann::json(); };
  auto ops = [&](const nlohmann::json& k) { return k.is_null() ? 0.0 : k["ops_per_s"].get<double>(); };
  auto mbs = [&](const nlohmann::json& k) { return k.is_null() ? 0.0 : k["bytes_per_s"].get<double>() / 1e6; };
  const std::time_t now = std::time(nullptr);
  char clock[16];
  std::strftime(clock, sizeof clock, "%H:%M:%S", std::localtime(&now));
  const auto read = part("read"), write = part("write"), meta = part("metadata");
  fmt::print("{:>8}  {:>8.0f} {:>10.1f} {:>9}  {:>8.0f} {:>10.1f} {:>9}  {:>8.0f} {:>8}\n", clock, ops(read), mbs(read),
             Latency(read), ops(write), mbs(write), Latency(write), ops(meta), Latency(meta));
}

}  // namespace

int RunPlacement(const std::string& path, const std::string& meta_dir, bool json) {
  if (meta_dir.empty()) {
    std::error_code ec;
    std::string abs = std::filesystem::absolute(path, ec).string();
    if (!std::filesystem::exists(path, ec)) return FailMissing(path);
    // In pages, so a file of any size fits the kernel's 64 KiB per xattr.
    auto j = fs::ReadPlacementPages([&](const std::string& name) { return LiveXattr(path, name); });
    if (!j.ok() && j.status().code() == Code::kBusy) return Fail(fmt::format("{}: {}", path, j.status().message()));
    if (!j.ok()) {  // a daemon from before the pages answers only the whole document
      auto v = LiveXattr(path, fs::kPlacementXattr);
      if (!v.ok()) {
        if (auto dead = DeadMountProblem(path)) return Fail(*dead);
        return Fail(fmt::format("{} is not a regular file on a mounted stripefs pool ({}); "
                                "for an unmounted pool give --meta DIR and the path inside the pool",
                                path, j.status().message()));
      }
      j = nlohmann::json::parse(v.value(), nullptr, false);
      if (j->is_discarded()) return Fail("the daemon's placement answer is not JSON");
    }
    j.value()["path"] = abs;
    PrintPlacement(j.value(), json);
    return 0;
  }
  auto pool = Pool::Open(meta_dir, Pool::Mode::kInspect);
  if (!pool.ok()) return Fail(pool.status());
  auto inode = pool.value()->resolve(path);
  if (!inode.ok()) return Fail(fmt::format("{} in pool {}: {}", path, meta_dir, inode.status().message()));
  auto j = pool.value()->placement(inode.value(), path);
  if (!j.ok()) return Fail(j.status());
  PrintPlacement(j.value(), json);
  return 0;
}

int RunDf(const std::string& target, bool json) {
  const TargetKind kind = KindOfTarget(target);
  if (kind == TargetKind::kMissing) return FailMissing(target);
  nlohmann::json j;
  if (kind == TargetKind::kPoolMetadata) {
    auto pool = Pool::Open(target, Pool::Mode::kInspect);
    if (!pool.ok()) return Fail(pool.status());
    auto usage = pool.value()->usage_json();
    if (!usage.ok()) return Fail(usage.status());
    j = std::move(usage).value();
  } else {
    auto v = LiveXattr(target, fs::kDfXattr);
    if (!v.ok()) {
      if (auto dead = DeadMountProblem(target)) return Fail(*dead);
      return Fail(fmt::format("{} is neither a stripefs mountpoint nor a pool's metadata directory", target));
    }
    j = nlohmann::json::parse(v.value(), nullptr, false);
    if (j.is_discarded()) return Fail("the daemon's df answer is not JSON");
  }
  if (json) {
    fmt::print("{}\n", j.dump());
    return 0;
  }
  fmt::print("{:>3} {:5} {:>9} {:>9} {:>9} {:>6}  {}\n", "id", "kind", "capacity", "used", "free", "free%", "path");
  for (const auto& s : j["segments"]) {
    uint64_t cap = s["capacity"], used = s["used"];
    if (s.value("state", "present") == "missing") {  // left out of a degraded mount: its use is unknown
      fmt::print("{:>3} {:5} {:>9} {:>9} {:>9} {:>6}  {} (missing: replace-drive rebuilds it)\n", s["id"].get<uint32_t>(),
                 s["kind"].get<std::string>(), Human(cap), "-", "-", "-", s["path"].get<std::string>());
      continue;
    }
    fmt::print("{:>3} {:5} {:>9} {:>9} {:>9} {:>5.1f}%  {}\n", s["id"].get<uint32_t>(), s["kind"].get<std::string>(),
               Human(cap), Human(used), Human(cap - used), cap ? 100.0 * static_cast<double>(cap - used) / static_cast<double>(cap) : 0.0,
               s["path"].get<std::string>());
  }
  if (j.contains("usable")) {
    const auto& u = j["usable"];
    const uint32_t r = u["replicas"].get<uint32_t>();
    fmt::print("data at the pool's {} {}: {} capacity, {} free (what df(1) shows)\n", r, r == 1 ? "replica" : "replicas",
               Human(u["capacity"].get<uint64_t>()), Human(u["free"].get<uint64_t>()));
  }
  if (j.contains("metadata")) {
    const auto& m = j["metadata"];
    fmt::print("metadata {} used, {} free on its file system ({} kept for deletes)  {}\n",
               Human(m["used"].get<uint64_t>()), Human(m["free"].get<uint64_t>()), Human(m["reserve"].get<uint64_t>()),
               m["path"].get<std::string>());
  }
  return 0;
}

int RunStats(const std::string& mountpoint, bool json, double watch) {
  nlohmann::json previous;  // the last document, for --watch's per-interval figures
  int lines = 0;
  for (;;) {
    auto v = LiveXattr(mountpoint, fs::kStatsXattr, 64 << 10);
    if (!v.ok()) {
      std::error_code ec;
      if (!std::filesystem::exists(mountpoint, ec)) return FailMissing(mountpoint);
      if (auto dead = DeadMountProblem(mountpoint)) return Fail(*dead);
      return Fail(fmt::format("{} is not a stripefs mountpoint ({})", mountpoint, v.status().message()));
    }
    auto j = nlohmann::json::parse(v.value(), nullptr, false);
    if (j.is_discarded()) return Fail("the daemon's stats answer is not JSON");
    nlohmann::json interval;
    if (!previous.is_null()) {
      interval = {{"seconds", j["uptime_s"].get<double>() - previous["uptime_s"].get<double>()}};
      interval["requests"] = fs::RequestStats::Interval(previous["requests"], j["requests"], interval["seconds"]);
    }
    if (json) {
      if (!interval.is_null()) j["interval"] = interval;
      fmt::print("{}\n", j.dump());
    } else if (interval.is_null()) {
      PrintStats(j);  // totals since the mount; then a line per interval
    } else {
      PrintInterval(interval, lines++ % 20 == 0);
    }
    if (watch <= 0) return 0;
    std::fflush(stdout);
    usleep(static_cast<useconds_t>(watch * 1e6));
    previous = std::move(j);
    previous.erase("interval");
  }
}

}  // namespace stripefs
