// SPDX-License-Identifier: Apache-2.0
// Internal to engine/pool/: a drive as a file or block device. Its size, the
// bytes of it chunks can use, opening it for data I/O, and opening one that
// is to join a pool (format, add-drive, replace-drive and open share these).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <string>
#include <utility>

#include "base/status.h"
#include "engine/pool/pool.h"
#include "meta/schema.h"

namespace stripefs {

// Size of an open regular file or block device.
Result<uint64_t> DeviceSize(int fd, const std::string& path);

// The bytes of a drive of `size` bytes that chunks can use: whole blocks after
// the superblock area.
uint64_t UsableCapacity(uint64_t size);

// Opens a drive for data I/O, with O_DIRECT where the file system allows it.
int OpenDrive(const std::string& path, bool writable);

// A drive opened to become segment `id` of a pool (add-drive, replace-drive).
struct JoiningDrive {
  int fd = -1;
  std::string path;          // absolute
  uint64_t device_size = 0;  // before any growing
  bool resuming = false;     // it holds the very superblock it is to get (a run that stopped)
  JoiningDrive() = default;
  JoiningDrive(JoiningDrive&& o) noexcept
      : fd(std::exchange(o.fd, -1)), path(std::move(o.path)), device_size(o.device_size), resuming(o.resuming) {}
  JoiningDrive& operator=(JoiningDrive&&) = delete;
  ~JoiningDrive() {
    if (fd >= 0) close(fd);
  }
};

// Opens the drive that is to be segment id (replacing: in place of the drive
// the pool has there). Refused when it is already another of the pool's
// drives, or holds a pool (another one, or another segment) and force is not
// given; created when a size is given.
Result<JoiningDrive> OpenDriveToJoin(const meta::PoolConfig& config, const DriveSpec& drive, uint32_t id,
                                     bool replacing, bool force);

}  // namespace stripefs
