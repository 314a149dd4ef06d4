// SPDX-License-Identifier: Apache-2.0
// kv_bench: what one call to a metadata store costs, through stripefs's own
// KvStore (no cache in front): a RocksDB directory or an etcd:// prefix,
// made afresh (the directory or prefix must not hold a pool).
//
//   kv_bench --meta DIR|etcd://HOST:PORT,.../PREFIX [--seconds 5] [--threads 1]
//
// Phases, each for --seconds, on --threads threads:
//   commit  a 2-key Transaction with sync, as a create commits an inode and
//           its directory entry (etcd: one Txn that also checks the writer
//           lock; RocksDB: one synced WriteBatch);
//   get     a get of a random key the commit phase wrote.
// Prints "phase ops/s" lines. It measures; no test depends on its timings.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "meta/etcd_kv_store.h"
#include "meta/kv_store.h"

namespace {

using Clock = std::chrono::steady_clock;
using stripefs::meta::KvStore;

// Runs op(thread, i) on each thread until the time is up; returns ops/s.
template <typename Op>
double Rate(int threads, double seconds, Op op, std::atomic<bool>& failed) {
  std::atomic<uint64_t> done{0};
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  const auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      uint64_t n = 0;
      while (Clock::now() < end && !failed) {
        if (!op(t, n)) {
          failed = true;
          break;
        }
        ++n;
      }
      done += n;
    });
  }
  for (auto& w : workers) w.join();
  return done / std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kv_bench: commit and get rates of a metadata store"};
  std::string meta;
  double seconds = 5;
  int threads = 1;
  app.add_option("--meta", meta, "A new RocksDB directory, or etcd://HOST:PORT[,...]/PREFIX holding no keys")->required();
  app.add_option("--seconds", seconds, "Seconds per phase")->capture_default_str();
  app.add_option("--threads", threads, "Threads per phase")->capture_default_str()->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);

  using namespace stripefs;
  using namespace stripefs::meta;
  Result<std::unique_ptr<KvStore>> opened = Status::Invalid("unset");
  if (IsEtcdUri(meta)) {
    auto target = ParseEtcdUri(meta);
    if (!target.ok()) {
      fmt::print(stderr, "kv_bench: {}\n", target.status().message());
      return 2;
    }
    opened = OpenEtcdKvStore(target.value(), OpenMode::kCreate);
  } else {
    opened = OpenRocksKvStore(meta, OpenMode::kCreate);
  }
  if (!opened.ok()) {
    fmt::print(stderr, "kv_bench: {}\n", opened.status().message());
    return 2;
  }
  KvStore& kv = *opened.value();
  std::atomic<bool> failed{false};
  std::vector<uint64_t> written(threads, 0);
  const std::string value(120, 'v');  // about an inode record's size
  const double commits = Rate(threads, seconds, [&](int t, uint64_t i) {
    Transaction txn;
    txn.put(fmt::format("I{:02}{:012}", t, i), value);
    txn.put(fmt::format("D{:02}{:012}", t, i), value.substr(0, 24));
    written[t] = i + 1;
    Status s = kv.commit(txn, true);
    if (!s.ok()) fmt::print(stderr, "kv_bench: commit: {}\n", s.message());
    return s.ok();
  }, failed);
  if (failed) return 1;
  const double gets = Rate(threads, seconds, [&](int t, uint64_t i) {
    thread_local std::mt19937_64 rng(t + 1);
    const int owner = static_cast<int>(rng() % threads);
    if (written[owner] == 0) return true;
    std::string v;
    Status s = kv.get(fmt::format("I{:02}{:012}", owner, rng() % written[owner]), &v);
    if (!s.ok()) fmt::print(stderr, "kv_bench: get after {} ops: {}\n", i, s.message());
    return s.ok();
  }, failed);
  if (failed) return 1;
  fmt::print("commit {:.0f}\nget {:.0f}\n", commits, gets);
  return 0;
}
