// SPDX-License-Identifier: Apache-2.0
// stripefs-stress: random file operations on a mount from several threads,
// every result checked against an exact in-memory model (DESIGN invariants
// 4-6 are what --state / --verify-state check after a crash).
//
// Each thread owns the directory DIR/t<k> and a fixed set of names in it
// (f<i>, sub/g<i> and the empty directories d<j>), so its model is exact
// without any cross-thread ordering. --overwriters adds threads that mostly
// overwrite data in place (a crash in the middle of one is the hard case).
//
// A run that finds files of an earlier run takes them over: it reads and
// checks them, then rewrites one byte per MiB with the value it already has
// and re-reads everything, since the state a crash left must survive writes.
//
// Data can be checked without its history: byte p written by operation n of
// thread t to object o (an inode; hard links share it, and its id is also in
// the xattr user.obj) has a high nibble that depends on (t, o, p) only and a
// low nibble that depends on n as well. The model compares exact bytes; after
// a crash every non-zero byte of a file must have the high nibble of its own
// object at its own offset, so garbage, stale bytes of another file and bytes
// at the wrong offset are caught (each wrong byte with probability 15/16).
//
// With --state FILE, after each successful fsync (of the file and then of its
// directory) the file's size, sha256 and xattrs are recorded as "clean", and
// before any later operation on that name or its inode the record is dropped
// again; FILE is replaced atomically (FILE.tmp, fsync, rename) each time.
// --verify-state FILE then checks, on the remounted pool: every clean file
// reads exactly as recorded; every other file reads without error and holds
// only bytes that writes to its own object could have made, or zeros.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "pattern.h"
#include "run.h"
#include "verify.h"
#include "worker.h"

namespace stress {

// What the threads share (see run.h), set from the command line.
int g_files = 12;  // file slots per thread (their names: SlotName in state_file.h)
StateFile g_state;  // --state
uint64_t g_seed = 0;
std::string g_command;  // how this run was started, for the divergence report
uint64_t g_max_size = 12 * kMiB;
std::atomic<bool> g_stop{false};
std::atomic<bool> g_disconnected{false};
std::mutex g_print_mu;
FILE* g_log = nullptr;  // --log

namespace {

// A mapped file whose mount went away (the daemon was killed) faults with
// SIGBUS instead of returning ENOTCONN: that is the same disconnection. A
// SIGBUS while the mount still answers is a real failure.
int g_sigbus_root_fd = -1;
int g_sigbus_exit_code = 3;
void OnSigbus(int) {
  struct statfs st;
  const bool gone = ::fstatfs(g_sigbus_root_fd, &st) != 0 && IsDisconnect(errno);
  const char* msg = gone ? "stripefs-stress: the mount went away (SIGBUS on a mapping); stopped\n"
                         : "stripefs-stress: DIVERGENCE: SIGBUS on a mapping while the mount answers\n";
  (void)!::write(gone ? STDOUT_FILENO : STDERR_FILENO, msg, std::strlen(msg));
  std::_Exit(gone ? g_sigbus_exit_code : 1);
}

// "12M", "4096", "1G"
std::optional<uint64_t> ParseSize(const std::string& s) {
  if (s.empty()) return std::nullopt;
  size_t used = 0;
  uint64_t v;
  try {
    v = std::stoull(s, &used);
  } catch (...) {
    return std::nullopt;
  }
  std::string suffix = s.substr(used);
  if (suffix == "K") v <<= 10;
  else if (suffix == "M") v <<= 20;
  else if (suffix == "G") v <<= 30;
  else if (!suffix.empty()) return std::nullopt;
  return v;
}

}  // namespace
}  // namespace stress

int main(int argc, char** argv) {
  using namespace stress;
  CLI::App app{"stripefs-stress: random operations on a mount, checked against an in-memory model"};
  std::string dir, log_path, state_path, verify_path, max_size = "12M";
  unsigned threads = 4, overwriters = 0;
  uint64_t ops = 0;
  double seconds = 0;
  std::optional<uint64_t> seed;
  bool allow_disconnect = false;
  app.add_option("--dir", dir, "directory on the mount to work in (created if missing)")->required();
  app.add_option("--threads", threads, "worker threads, each with its own names")->check(CLI::Range(1, 64));
  app.add_option("--overwriters", overwriters, "extra threads that mostly overwrite data in place (default 0)")
      ->check(CLI::Range(0, 16));
  auto* ops_opt = app.add_option("--ops", ops, "operations in all (default: run for --seconds)");
  app.add_option("--seconds", seconds, "run time (default 10 when --ops is not given)")->excludes(ops_opt);
  app.add_option("--seed", seed, "random seed (default: from the clock; printed)");
  app.add_option("--files", g_files, "file names per thread")->check(CLI::Range(2, 60));
  app.add_option("--max-size", max_size, "largest file size (K/M/G suffixes)");
  app.add_option("--log", log_path, "write every operation to this file");
  app.add_option("--state", state_path, "record fsynced state here, for --verify-state after a crash");
  app.add_option("--verify-state", verify_path, "check DIR against a state file after a crash, then exit");
  app.add_flag("--allow-disconnect", allow_disconnect, "exit 0 when the mount goes away (the daemon was killed)");
  CLI11_PARSE(app, argc, argv);
  for (int i = 0; i < argc; ++i) g_command += (i ? " " : "") + std::string(argv[i]);

  if (!verify_path.empty()) return Verify(dir, verify_path);

  auto ms = ParseSize(max_size);
  if (!ms || *ms < 8192 || *ms > 1024 * kMiB) {
    std::fprintf(stderr, "stripefs-stress: --max-size %s: want a size from 8K to 1G\n", max_size.c_str());
    return 2;
  }
  g_max_size = *ms;
  g_seed = seed ? *seed : static_cast<uint64_t>(Clock::now().time_since_epoch().count()) % 1000000007;
  if (!seed) g_command += fmt::format(" --seed {}", g_seed);
  if (ops == 0 && seconds <= 0) seconds = 10;
  if (!log_path.empty()) {
    g_log = std::fopen(log_path.c_str(), "w");
    if (!g_log) {
      std::fprintf(stderr, "stripefs-stress: %s: %s\n", log_path.c_str(), std::strerror(errno));
      return 2;
    }
  }

  ::mkdir(dir.c_str(), 0755);
  int root = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) {
    std::fprintf(stderr, "stripefs-stress: %s: %s\n", dir.c_str(), std::strerror(errno));
    return 2;
  }

  std::optional<State> persisted;
  g_state.path = state_path;
  if (!state_path.empty() && ::access(state_path.c_str(), F_OK) == 0) {
    std::string err;
    persisted = LoadState(state_path, &err);
    if (!persisted) {
      std::fprintf(stderr, "stripefs-stress: %s\n", err.c_str());
      return 2;
    }
    if (persisted->threads != static_cast<int>(threads + overwriters) || persisted->files != g_files) {
      std::fprintf(stderr, "stripefs-stress: %s was written with --threads + --overwriters %d, --files %d\n",
                   state_path.c_str(), persisted->threads, persisted->files);
      return 2;
    }
  }
  const unsigned all = threads + overwriters;
  // Start from what is recorded, so that a save before every thread has set
  // up (a kill during setup) loses no reservation and no clean record.
  if (persisted) g_state.state = *persisted;
  g_state.state.threads = static_cast<int>(all);
  g_state.state.files = g_files;
  g_state.state.max_size = g_max_size;
  g_state.state.t.resize(all);

  std::printf("stripefs-stress: seed %llu, %u threads + %u overwriters, %d files each, max size %llu, %s\n",
              static_cast<unsigned long long>(g_seed), threads, overwriters, g_files,
              static_cast<unsigned long long>(g_max_size),
              ops ? fmt::format("{} ops", ops).c_str() : fmt::format("{} s", seconds).c_str());
  std::fflush(stdout);

  g_sigbus_root_fd = root;
  g_sigbus_exit_code = allow_disconnect ? 0 : 3;
  struct sigaction sa {};
  sa.sa_handler = OnSigbus;
  sigaction(SIGBUS, &sa, nullptr);

  std::vector<std::unique_ptr<Worker>> workers;
  for (unsigned t = 0; t < all; ++t) workers.push_back(std::make_unique<Worker>(t, root, t >= threads));
  auto start = Clock::now();
  // Take over what an earlier run left, one thread at a time (files are checked as they are read).
  int probed = 0;
  try {
    for (unsigned t = 0; t < all; ++t) workers[t]->setup(persisted ? &persisted->t[t] : nullptr);
    for (unsigned t = 0; t < all; ++t) probed += workers[t]->probe_adopted();
  } catch (const Disconnected&) {
    g_disconnected = true;
  }
  if (probed)
    std::printf("stripefs-stress: adopted %d files from an earlier run: each read, 1 byte per MiB rewritten, re-read (%.1f s)\n",
                probed, std::chrono::duration<double>(Clock::now() - start).count());
  if (!g_disconnected) {
    std::lock_guard lock(g_state.mu);
    g_state.save_locked();
  }
  auto deadline = ops ? Clock::time_point::max()
                      : start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::thread> pool;
  if (!g_disconnected) {
    for (unsigned t = 0; t < all; ++t) {
      uint64_t mine = ops ? ops / all + (t < ops % all ? 1 : 0) : 0;
      if (ops && mine == 0) continue;
      pool.emplace_back([&, t, mine] { workers[t]->run(mine, deadline); });
    }
  }
  for (auto& th : pool) th.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  Stats total;
  for (auto& w : workers) total.add(w->stats());
  std::string kinds;
  for (int k = 0; k < kKinds; ++k)
    if (total.ok[k] || total.expected_errors[k])
      kinds += fmt::format(" {}={}{}", kKindNames[k], total.ok[k],
                           total.expected_errors[k] ? fmt::format("(+{} expected errors)", total.expected_errors[k]) : "");
  std::printf("stripefs-stress: %llu ops in %.1f s (%.0f/s), written %.1f MiB, read %.1f MiB\n  ops:%s\n",
              static_cast<unsigned long long>(total.ops), elapsed, total.ops / std::max(elapsed, 1e-9),
              total.bytes_written / double(kMiB), total.bytes_read / double(kMiB), kinds.c_str());
  if (g_state.enabled()) {
    std::lock_guard lock(g_state.mu);
    size_t clean = 0;
    uint64_t bytes = 0;
    for (auto& ts : g_state.state.t)
      for (auto& [s, r] : ts.clean) clean++, bytes += r.size;
    std::printf("  state: %zu files clean after fsync (%llu bytes) in %s\n", clean, static_cast<unsigned long long>(bytes),
                state_path.c_str());
  }
  if (g_log) std::fclose(g_log);
  if (g_disconnected) {
    std::printf("stripefs-stress: the mount went away (ENOTCONN); stopped\n");
    std::fflush(stdout);
    return allow_disconnect ? 0 : 3;
  }
  return 0;
}
