// SPDX-License-Identifier: Apache-2.0
// The work of each stripefs subcommand, and what the subcommands share: an
// error printed as "stripefs: ..." (exit 1), drive specs, sizes for people,
// the xattr channel to a live mount's daemon and a progress line. main()
// (tools/stripefs.cc) parses the command line and calls one Run* function.
//   tools/stripefs.cc         main(), mkfs, mount, fsck
//   tools/report_commands.cc  placement, df, stats (read-only answers)
//   tools/layout_command.cc   layout (a directory's layout attributes)
//   tools/repair_commands.cc  scrub, add-drive, replace-drive
#pragma once

#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/pool/pool.h"

namespace stripefs {

// Prints "stripefs: msg" on stderr; returns the exit status 1.
int Fail(const std::string& msg);
int Fail(const Status& s);

// When path is on a dead mount (its daemon was killed or crashed: every
// access fails with ENOTCONN), what to tell the user: the state, and how to
// unmount and mount the pool again. nullopt otherwise.
std::optional<std::string> DeadMountProblem(const std::string& path);

// Fail() with "PATH: no such file or directory", or with DeadMountProblem's
// message when that is why PATH cannot be seen.
int FailMissing(const std::string& path);

// What a command's TARGET names: an unmounted pool's metadata (a directory
// holding its store, or an etcd:// address), something else that exists (a
// mountpoint, say), or nothing.
enum class TargetKind { kPoolMetadata, kOther, kMissing };
TargetKind KindOfTarget(const std::string& target);

// PATH or PATH:SIZE (K/M/G/T).
Result<DriveSpec> ParseDriveSpec(const std::string& text);

// 1536 -> "1.5K".
std::string Human(uint64_t bytes);

// name: NUL-terminated (a fs/control.h name). initial: the first buffer size;
// answers that are costly to compute (a scrub) must fit in it, so the daemon
// is asked only once. kNotFound when the path is gone.
Result<std::string> LiveXattr(const std::string& path, std::string_view name, size_t initial = 4096);

// A progress line on stderr when it is a terminal (nothing otherwise),
// redrawn at most 5 times a second: the bytes done of about how many, and the
// time left at the rate so far. The summary that follows starts on its own line.
class Progress {
 public:
  explicit Progress(const char* what) : what_(what), on_(isatty(STDERR_FILENO) == 1) {}
  // total: what done should reach (0: unknown, no percentage or ETA).
  void show(uint64_t done, uint64_t total, std::string_view more = {});
  void show(uint64_t files, const ScrubReport& r) {
    if (on_) show(r.bytes, r.planned_bytes, fmt::format("{} files, {} blocks repaired", files, r.repaired_blocks));
  }
  // Ends the line, so what is printed next (the summary) starts on its own.
  void finish() {
    if (shown_) fmt::print(stderr, "\n");
    shown_ = false;
  }
  ~Progress() { finish(); }

 private:
  const char* what_;
  bool on_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now(), drawn_;
};

// "0:42", "1:02:03".
std::string Clock(double seconds);

// Each returns the process's exit status.
int RunPlacement(const std::string& path, const std::string& meta_dir, bool json);
int RunDf(const std::string& target, bool json);
int RunLayout(const std::string& dir, const std::vector<std::string>& settings, bool json);
int RunStats(const std::string& mountpoint, bool json, double watch);
int RunScrub(const std::string& target, bool json);
int RunAddDrive(const std::string& target, const std::string& drive, bool force);
int RunReplaceDrive(const std::string& meta_dir, uint32_t id, const std::string& drive, bool force, bool json);

}  // namespace stripefs
