// SPDX-License-Identifier: Apache-2.0
// What the threads of a stripefs-stress run share: its settings and limits,
// the stop flags, the op log, the state file, and the operation kinds with
// their counters. Defined in stress.cc, which sets them from the command line.
#pragma once

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

#include "state_file.h"

namespace stress {

using Clock = std::chrono::steady_clock;
inline constexpr uint64_t kMiB = 1 << 20;
inline constexpr uint64_t kChunk = 4 * kMiB;  // the default chunk size: writes aim at its boundaries
inline constexpr uint32_t kMaxObj = 1u << 30;
inline constexpr uint32_t kGuessLimit = 1u << 20;  // object ids tried for a file without user.obj and no state file
inline constexpr int kDirSlots = 3;
inline constexpr int kXattrNames = 4;
inline constexpr size_t kRecentOps = 20;

extern int g_files;  // file slots per thread (their names: SlotName in state_file.h)
extern StateFile g_state;  // --state

extern uint64_t g_seed;
extern std::string g_command;  // how this run was started, for the divergence report
extern uint64_t g_max_size;
extern std::atomic<bool> g_stop;
extern std::atomic<bool> g_disconnected;
extern std::mutex g_print_mu;
extern FILE* g_log;  // --log

// Thrown when the mount went away (the daemon died): the run ends there.
struct Disconnected {};

inline bool IsDisconnect(int e) { return e == ENOTCONN || e == ECONNABORTED; }

enum Kind {
  kCreate, kWrite, kAppend, kTruncate, kRename, kLink, kUnlink, kMkdir, kRmdir, kFsync,
  kSetxattr, kRemovexattr, kGetxattr, kRead, kStat, kReaddir, kKinds
};
inline constexpr std::array<const char*, kKinds> kKindNames = {
    "create", "write", "append", "truncate", "rename", "link", "unlink", "mkdir", "rmdir", "fsync",
    "setxattr", "removexattr", "getxattr", "read", "stat", "readdir"};

struct Stats {
  std::array<uint64_t, kKinds> ok{}, expected_errors{};
  uint64_t bytes_written = 0, bytes_read = 0, ops = 0;
  void add(const Stats& o) {
    for (int k = 0; k < kKinds; ++k) ok[k] += o.ok[k], expected_errors[k] += o.expected_errors[k];
    bytes_written += o.bytes_written, bytes_read += o.bytes_read, ops += o.ops;
  }
};

}  // namespace stress
