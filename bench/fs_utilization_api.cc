// SPDX-License-Identifier: Apache-2.0
// fs_utilization_api: the seed-000 utilization workload (BENCHMARKS.md §5)
// through the object API, on an unmounted pool. bench/fs_utilization_bench.py
// runs it beside the same workload through a mount and prints both.
//
//   fs_utilization_api --mode kv|paired [--drives 4] [--drive-size 1G] [--rounds 200] [--seed 42]
//                      [--workdir /dev/shm] [--stripefs build/tools/stripefs]
//
// A pool of --drives drive files of --drive-size (no RAM segment) is made with
// `stripefs mkfs` in <workdir>/fs_utilization_api.XXXXXX (removed on every way
// out, SIGINT/SIGTERM included) and opened with ObjectPool::Open (RAM tier
// off). Objects of 3,274,752 B ("kv"), or one of those and one of 658,432 B per
// step ("paired"), are put (one put each; the same random bytes every time)
// until a put fails with ENOSPC; the failed object is removed if it exists, 5 %
// of the live objects (at least one) chosen at random (std::mt19937_64 seeded
// with --seed) are removed, the pool is synced, and the failed object is tried
// again. The first failure (the first fill) is the warm-up; at each of the next
// --rounds failures, before the eviction, it samples
//   util    = bytes of the live objects / total drive capacity, and
//   df_used = used / capacity of the drive segments of `stripefs df META --json`
// (the inspect open of df works beside the open pool). Prints one JSON line on
// stdout; progress goes to stderr. Any error other than ENOSPC ends the run
// (exit 1, the error on stderr).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "pool_fixture.h"
#include "stripefs/objects.h"

namespace stripefs::bench {
namespace {

constexpr uint64_t kKvSize = 3'274'752;
constexpr uint64_t kIndexerSize = 658'432;
constexpr double kEvictFraction = 0.05;

struct Df {
  uint64_t capacity = 0, used = 0;
  std::vector<uint64_t> free_per_drive;
};

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  return q + "'";
}

// `stripefs df META --json`, drive segments only.
Df RunDf(const std::string& stripefs, const std::string& meta) {
  const std::string cmd = "timeout -s KILL 120 " + Quote(stripefs) + " df " + Quote(meta) + " --json 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) DieErrno("popen " + cmd);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  if (st != 0) Die(fmt::format("{} failed (status {}): {}", cmd, st, out));
  Df df;
  try {
    auto j = nlohmann::json::parse(out);
    for (const auto& s : j.at("segments")) {
      if (s.at("kind").get<std::string>() != "drive") continue;
      uint64_t cap = s.at("capacity").get<uint64_t>(), used = s.at("used").get<uint64_t>();
      df.capacity += cap;
      df.used += used;
      df.free_per_drive.push_back(cap > used ? cap - used : 0);
    }
  } catch (const std::exception& e) {
    Die(fmt::format("cannot parse the output of {}: {}: {}", cmd, e.what(), out));
  }
  if (df.capacity == 0) Die("stripefs df shows no drive capacity: " + out);
  return df;
}

// Nearest rank from the bottom: the smallest value with at least q of the samples at or below it.
double LowTail(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  long idx = static_cast<long>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  idx = std::clamp<long>(idx, 0, static_cast<long>(v.size()) - 1);
  return v[static_cast<size_t>(idx)];
}

nlohmann::json Figures(const std::vector<double>& v) {
  nlohmann::json j;
  double sum = 0;
  for (double x : v) sum += x;
  j["mean"] = v.empty() ? 0 : sum / static_cast<double>(v.size());
  j["p0"] = LowTail(v, 0);
  j["p1"] = LowTail(v, 0.01);
  j["p5"] = LowTail(v, 0.05);
  j["max"] = v.empty() ? 0 : *std::max_element(v.begin(), v.end());
  return j;
}

struct Live {
  std::string name;
  uint64_t size;
};

}  // namespace
}  // namespace stripefs::bench

int main(int argc, char** argv) {
  using namespace stripefs::bench;
  namespace api = stripefs::api;
  InitBench("fs_utilization_api");

  CLI::App app{"The seed-000 utilization workload through the object API (BENCHMARKS.md §5)"};
  std::string mode = "kv", drive_size_text = "1G", workdir, stripefs_path;
  int drives = 4;
  int rounds = 200;
  uint64_t seed = 42;
  app.add_option("--mode", mode, "kv (3,274,752 B objects) or paired (one of those and one of 658,432 B per step)")
      ->check(CLI::IsMember({"kv", "paired"}))
      ->capture_default_str();
  app.add_option("--drives", drives, "Drive files in the pool")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--drive-size", drive_size_text, "Size of each drive file (K/M/G/T)")->capture_default_str();
  app.add_option("--rounds", rounds, "Sampled ENOSPC failures after the warm-up fill")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--seed", seed, "Seed of the eviction RNG (std::mt19937_64)")->capture_default_str();
  app.add_option("--workdir", workdir, "Directory the work directory is made in (default /dev/shm)");
  app.add_option("--stripefs", stripefs_path, "The stripefs binary (default: $STRIPEFS, else ../tools/stripefs)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  const uint64_t drive_size = ParseSize(drive_size_text, "--drive-size");
  const std::string stripefs = FindStripefs(stripefs_path);
  Backing backing = MakeBacking("tmpfs", workdir, "fs_utilization_api");
  PoolSpec spec;
  spec.drives = drives;
  spec.drive_size = drive_size;
  spec.ram = 0;
  PoolDir pool_dir = MakePool(stripefs, backing.workdir + "/pool", spec);

  api::Options opts;
  opts.ram_cache = "off";
  opts.write_back = false;
  api::Error err;
  auto pool = api::ObjectPool::Open(pool_dir.meta, opts, &err);
  if (!pool) Die("ObjectPool::Open " + pool_dir.meta + ": " + err.message);

  std::mt19937_64 rng(seed);
  std::string kv_data(kKvSize, '\0'), idx_data(kIndexerSize, '\0');
  {
    std::mt19937_64 bytes_rng(seed ^ 0x5bd1e995ULL);
    for (auto* d : {&kv_data, &idx_data}) {
      for (size_t i = 0; i + 8 <= d->size(); i += 8) {
        uint64_t x = bytes_rng();
        std::memcpy(d->data() + i, &x, 8);
      }
    }
  }
  const bool paired = mode == "paired";

  const Df df0 = RunDf(stripefs, pool_dir.meta);
  const uint64_t capacity = df0.capacity;

  std::vector<Live> live;
  uint64_t live_bytes = 0, next_id = 0, step = 0;
  uint64_t puts = 0, bytes_put = 0, failures = 0, partial_removed = 0, immediate_failures = 0;
  uint64_t max_free_at_enospc = 0, max_drive_free_at_enospc = 0;
  uint64_t puts_since_failure = 0;
  uint64_t with_room = 0, failed_kv = 0, failed_idx = 0;
  std::vector<double> util, df_used;
  double warmup_util = 0, warmup_df = 0;
  uint64_t warmup_files = 0;
  const auto t0 = Clock::now();
  auto last_progress = t0;

  while (static_cast<int>(util.size()) < rounds) {
    const bool is_idx = paired && (step % 2 == 1);
    const std::string& data = is_idx ? idx_data : kv_data;
    std::string name = fmt::format("{}/{:08d}", is_idx ? "idx" : "kv", next_id);
    api::Error e = pool->put(name, data);
    if (!e) {
      live.push_back({std::move(name), data.size()});
      live_bytes += data.size();
      ++next_id;
      ++step;
      ++puts;
      ++puts_since_failure;
      bytes_put += data.size();
      continue;
    }
    if (e.code != ENOSPC) Die(fmt::format("put {} ({} B): {} (errno {})", name, data.size(), e.message, e.code));
    // A failed put: remove what it left, if anything.
    api::Error r = pool->remove(name);
    if (!r) ++partial_removed;
    else if (r.code != ENOENT) Die(fmt::format("remove of the failed {}: {}", name, r.message));
    if (puts_since_failure == 0 && failures > 0) ++immediate_failures;
    puts_since_failure = 0;
    const Df df = RunDf(stripefs, pool_dir.meta);
    const uint64_t free_total = df.capacity > df.used ? df.capacity - df.used : 0;
    const double u = static_cast<double>(live_bytes) / static_cast<double>(capacity);
    const double du = static_cast<double>(df.used) / static_cast<double>(df.capacity);
    if (failures == 0) {
      warmup_util = u;
      warmup_df = du;
      warmup_files = live.size();
    } else {
      util.push_back(u);
      df_used.push_back(du);
      max_free_at_enospc = std::max(max_free_at_enospc, free_total);
      uint64_t most = 0;
      for (uint64_t f : df.free_per_drive) most = std::max(most, f);
      max_drive_free_at_enospc = std::max(max_drive_free_at_enospc, most);
      ++(is_idx ? failed_idx : failed_kv);
      if (most >= (data.size() + 4095) / 4096 * 4096) ++with_room;
    }
    ++failures;
    if (live.empty()) Die(fmt::format("ENOSPC with no live object ({} free per df)", free_total));
    size_t victims = std::max<size_t>(1, static_cast<size_t>(static_cast<double>(live.size()) * kEvictFraction));
    for (size_t v = 0; v < victims && !live.empty(); ++v) {
      std::uniform_int_distribution<size_t> pick(0, live.size() - 1);
      size_t i = pick(rng);
      api::Error re = pool->remove(live[i].name);
      if (re) Die(fmt::format("remove {}: {}", live[i].name, re.message));
      live_bytes -= live[i].size;
      live[i] = std::move(live.back());
      live.pop_back();
    }
    api::Error se = pool->sync();
    if (se) Die("sync: " + se.message);
    auto now = Clock::now();
    if (now - last_progress > std::chrono::seconds(10)) {
      last_progress = now;
      fmt::print(stderr, "fs_utilization_api: {} round {}/{} util {:.4f} df {:.4f} ({:.0f} s)\n", mode, util.size(),
                 rounds, u, du, std::chrono::duration<double>(now - t0).count());
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();

  nlohmann::json out;
  out["path"] = "object API";
  out["mode"] = mode;
  out["drives"] = drives;
  out["drive_size"] = drive_size;
  out["capacity"] = capacity;
  out["rounds"] = rounds;
  out["seed"] = seed;
  out["backing"] = backing.describe();
  out["samples"] = util.size();
  out["util"] = Figures(util);
  out["df_used"] = Figures(df_used);
  out["warmup"] = {{"util", warmup_util}, {"df_used", warmup_df}, {"files", warmup_files}};
  out["puts"] = puts;
  out["bytes_written"] = bytes_put;
  out["enospc"] = failures;
  out["enospc_right_after_eviction"] = immediate_failures;
  out["partial_removed"] = partial_removed;
  out["max_free_at_enospc"] = max_free_at_enospc;
  out["max_drive_free_at_enospc"] = max_drive_free_at_enospc;
  out["enospc_with_room_on_a_drive"] = with_room;
  out["sampled_failures_by_kind"] = {{"kv", failed_kv}, {"idx", failed_idx}};
  out["live_files_end"] = live.size();
  out["seconds"] = seconds;
  out["write_MBps"] = seconds > 0 ? static_cast<double>(bytes_put) / 1e6 / seconds : 0;
  pool.reset();
  fmt::print("{}\n", out.dump());
  std::fflush(stdout);
  Cleanup();
  return 0;
}
