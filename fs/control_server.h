// SPDX-License-Identifier: Apache-2.0
// The daemon's side of the control interface (fs/control.h): answers the
// control xattrs of a mount — placement (whole or in pages), df, scrub,
// stats, add_drive and layout — from the pool. The FUSE xattr ops hand it
// every name IsControlXattr accepts and turn its Status into errno; it knows
// nothing of FUSE requests.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>

#include "engine/pool/pool.h"

namespace stripefs::fs {

class ControlServer {
 public:
  // Who asks: add_drive checks uid and keeps its outcome by pid.
  struct Caller {
    uid_t uid;
    pid_t pid;
  };
  // stats: the mount's stats document (kStatsXattr), which the frontend keeps.
  ControlServer(Pool* pool, std::function<Result<nlohmann::json>()> stats)
      : pool_(pool), stats_(std::move(stats)) {}

  // A drive inside the mount would send the daemon's own I/O back to it.
  void set_mountpoint(std::string m) { mountpoint_ = std::move(m); }

  // The answer to a getxattr of the control name on inode ino.
  Result<std::string> get(uint64_t ino, std::string_view name, const Caller& caller);
  // A setxattr of the control name: kAddDriveXattr on the mount root adds a
  // drive (kInvalidArgument elsewhere); every other name is read-only (kPermission).
  Status set(uint64_t ino, std::string_view name, std::string_view value, const Caller& caller);

 private:
  // Adds the drive described by value (see kAddDriveXattr) and keeps the
  // outcome for the caller's pid. Only root or the user the daemon runs as
  // may do this: the daemon creates and writes the file the value names.
  Status add_drive(const Caller& caller, std::string_view value);
  Result<nlohmann::json> add_drive_as(const Caller& caller, std::string_view value);
  Result<std::string> add_drive_result(pid_t pid);
  // Scrubs a regular file and answers the kScrubXattr report.
  Result<std::string> scrub_file(uint64_t ino);

  Pool* pool_;
  const std::function<Result<nlohmann::json>()> stats_;
  std::string mountpoint_;
  std::mutex mu_;
  std::unordered_map<pid_t, std::string> add_drive_results_;  // GUARDED_BY(mu_): outcome by caller pid
};

}  // namespace stripefs::fs
