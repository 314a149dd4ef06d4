// SPDX-License-Identifier: Apache-2.0
// What latency_bench and ycsb_bench share: a work directory on the chosen
// backing, pools made and mounted with the stripefs binary (as a user would),
// and a cleanup that unmounts and removes everything the benchmark made on
// every way out (normal end, an error, SIGINT/SIGTERM/SIGHUP).
//
// Only processes this benchmark started are ever signalled: a stripefs daemon
// it mounted (pid from META/daemon.pid), and only when it does not exit within
// 30 s of its unmount.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stripefs::bench {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kKiB = 1ULL << 10;
constexpr uint64_t kMiB = 1ULL << 20;
constexpr uint64_t kGiB = 1ULL << 30;

// Prints "<program>: what", cleans up (see Cleanup) and exits with status 1.
[[noreturn]] void Die(const std::string& what);
// Dies with "what: strerror(errno)".
[[noreturn]] void DieErrno(const std::string& what);

// Names the program in messages and starts the thread that cleans up on
// SIGINT/SIGTERM/SIGHUP (those signals are blocked in every other thread, so
// call this before starting any). Call first.
void InitBench(const char* program);

// Unmounts every mount made by Mount, waits for (and if need be kills) their
// daemons, and removes every work directory. Idempotent; thread-safe.
void Cleanup();

// Where the drive files, metadata and mountpoints live.
struct Backing {
  std::string kind;     // "tmpfs" or "disk"
  std::string parent;   // the directory the work directory is made in
  std::string fs_type;  // of parent, from /proc/self/mountinfo (e.g. "tmpfs", "ext4")
  std::string source;   // the mount's source (e.g. "/dev/vda")
  std::string workdir;  // <parent>/<program>.XXXXXX, removed by Cleanup
  std::string describe() const;
};
// kind "tmpfs": /dev/shm; "disk": /var/tmp (unless parent_override is set).
// Makes the work directory and registers it for Cleanup.
Backing MakeBacking(const std::string& kind, const std::string& parent_override, const char* program);

// The stripefs binary: explicit, else $STRIPEFS, else ../tools/stripefs next to
// this program's build directory, else "stripefs" on PATH.
std::string FindStripefs(const std::string& explicit_path);

struct PoolSpec {
  int drives = 4;
  uint64_t drive_size = 16 * kGiB;  // sparse files: only what is written takes space
  uint64_t ram = 512 * kMiB;        // the RAM segment (0: none)
};

// A pool in <dir>: drive files dir/drive<i>.img and metadata dir/meta, made
// with `stripefs mkfs`. Its directory is removed with the work directory.
struct PoolDir {
  std::string dir, meta, mnt;
};
PoolDir MakePool(const std::string& stripefs, const std::string& dir, const PoolSpec& spec);

// `stripefs mount META MNT -o opts` (daemonizes, returns once mounted);
// registered for Cleanup.
void Mount(const std::string& stripefs, const PoolDir& pool, const std::string& opts);
// Unmounts (retrying while busy) and waits for the daemon to exit.
void Unmount(const PoolDir& pool);
// Removes a pool's directory now (it must not be mounted).
void RemovePool(const PoolDir& pool);

// Runs argv, output to log_path; returns the exit status (-1 if it did not start).
int RunCommand(const std::vector<std::string>& argv, const std::string& log_path);

// "512M" -> 536870912 (K/M/G/T powers of 1024); dies on bad input.
uint64_t ParseSize(const std::string& text, const std::string& what);
std::string Bytes(uint64_t b);  // "512 MiB", "1.50 GiB"

// Latency samples in nanoseconds, summarized.
struct Summary {
  size_t count = 0;
  double p50_us = 0, p90_us = 0, p99_us = 0, mean_us = 0, min_us = 0, max_us = 0;
};
Summary Summarize(std::vector<uint64_t> samples_ns);

inline uint64_t NsSince(Clock::time_point t0, Clock::time_point t1) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
}

// The machine's 1-minute load average (the machine is shared; printed with results).
double LoadAverage();
// "2026-12-01 18:22 UTC, host, 2 CPUs, <cpu model>, load 0.68"
std::string MachineLine();

}  // namespace stripefs::bench
