// SPDX-License-Identifier: Apache-2.0
// object_throughput: the C++ side of bench/python_bench.py. On an unmounted
// pool, puts COUNT objects of SIZE bytes (then sync), and reads them back
// ROUNDS times with get() (into a new std::string each time, as Python's
// get makes a new bytes object) and with read_into() (into one reused
// buffer, as Python's get_into), after one untimed pass. Prints one JSON
// line of operations per second.
// The Python side does the same calls in the same order (python_bench.py).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "stripefs/objects.h"

namespace {

using Clock = std::chrono::steady_clock;

void Check(const stripefs::api::Error& e, const std::string& what) {
  if (e) {
    fmt::print(stderr, "object_throughput: {}: {}\n", what, e.message);
    std::exit(1);
  }
}

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("object_throughput: put/get/read_into rates of the object API (the C++ side of python_bench.py)");
  std::string meta;
  size_t size = 0, count = 0, rounds = 1;
  app.add_option("--meta", meta, "The pool's metadata directory")->required();
  app.add_option("--size", size, "Bytes per object")->required();
  app.add_option("--count", count, "Objects")->required();
  app.add_option("--rounds", rounds, "Times each object is read by each read call")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  stripefs::api::Error err;
  auto pool = stripefs::api::ObjectPool::Open(meta, {}, &err);
  if (!pool) Check(err, "open " + meta);
  std::string data(size, '\0');
  std::mt19937_64 rng(1);
  for (char& c : data) c = static_cast<char>(rng());
  std::vector<std::string> names;
  for (size_t i = 0; i < count; ++i) names.push_back(fmt::format("bench/o{}", i));

  auto t = Clock::now();
  for (const std::string& name : names) Check(pool->put(name, data), "put " + name);
  Check(pool->sync(), "sync");
  const double put_s = Seconds(t);

  // One untimed pass first: both sides then read what the RAM tier holds.
  for (const std::string& name : names) {
    std::string out;
    Check(pool->get(name, &out), "get " + name);
  }
  t = Clock::now();
  for (size_t r = 0; r < rounds; ++r) {
    for (const std::string& name : names) {
      std::string out;  // a new one each time, as Python's get makes a new bytes object
      Check(pool->get(name, &out), "get " + name);
      if (out.size() != size) Check({5, "short get"}, name);
    }
  }
  const double get_s = Seconds(t);

  std::vector<char> buf(size);
  t = Clock::now();
  for (size_t r = 0; r < rounds; ++r) {
    for (const std::string& name : names) {
      size_t got = 0;
      Check(pool->read_into(name, 0, buf, &got), "read_into " + name);
      if (got != size) Check({5, "short read_into"}, name);
    }
  }
  const double into_s = Seconds(t);
  const double reads = static_cast<double>(count * rounds);
  fmt::print("{{\"put_ops\": {:.1f}, \"get_ops\": {:.1f}, \"get_into_ops\": {:.1f}, \"size\": {}}}\n",
             count / put_s, reads / get_s, reads / into_s, size);
  return 0;
}
