// SPDX-License-Identifier: Apache-2.0
// A drive as a file or block device: sizing it, opening it for data I/O, and
// opening one that is to join a pool (see drive_files.h).
#include "engine/pool/drive_files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/pool/superblock.h"

namespace stripefs {

Result<uint64_t> DeviceSize(int fd, const std::string& path) {
  struct stat st;
  if (fstat(fd, &st) != 0) return Status::IOError(fmt::format("cannot stat {}: {}", path, strerror(errno)));
  if (S_ISBLK(st.st_mode)) {
    uint64_t bytes = 0;
    if (ioctl(fd, BLKGETSIZE64, &bytes) != 0) {
      return Status::IOError(fmt::format("cannot size block device {}: {}", path, strerror(errno)));
    }
    return bytes;
  }
  if (!S_ISREG(st.st_mode)) return Status::Invalid(fmt::format("{} is neither a regular file nor a block device", path));
  return static_cast<uint64_t>(st.st_size);
}

uint64_t UsableCapacity(uint64_t size) {
  return size <= kDataOffset ? 0 : (size - kDataOffset) / meta::kBlockSize * meta::kBlockSize;
}

int OpenDrive(const std::string& path, bool writable) {
  int flags = (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC;
  int fd = open(path.c_str(), flags | O_DIRECT);
  if (fd < 0 && errno == EINVAL) fd = open(path.c_str(), flags);
  return fd;
}

Result<JoiningDrive> OpenDriveToJoin(const meta::PoolConfig& config, const DriveSpec& drive, uint32_t id,
                                     bool replacing, bool force) {
  JoiningDrive d;
  std::error_code ec;
  d.path = std::filesystem::absolute(drive.path, ec).string();
  for (const auto& other : config.segments) {
    if (other.kind == "drive" && !(replacing && other.id == id) && std::filesystem::equivalent(other.path, d.path, ec)) {
      return Status::Invalid(fmt::format("{} is drive {} of this pool already", drive.path, other.id));
    }
  }
  d.fd = open(drive.path.c_str(), O_RDWR | O_CLOEXEC | (drive.size ? O_CREAT : 0), 0600);
  if (d.fd < 0 && errno == ENOENT) {
    return Status::NotFound(fmt::format("drive {} does not exist (give a size, PATH:SIZE, to create it)", drive.path));
  }
  if (d.fd < 0) return Status::IOError(fmt::format("cannot open drive {}: {}", drive.path, strerror(errno)));
  auto existing = ReadSuperblock(d.fd);
  d.resuming = existing.ok() && existing.value() && existing.value()->pool_uuid == config.uuid &&
               existing.value()->segment_id == id;
  if (!d.resuming && !force && (!existing.ok() || existing.value())) {
    return Status::Exists(fmt::format("drive {} already holds a stripefs pool{} (use --force to overwrite it)",
                                      drive.path, existing.ok() ? " " + existing.value()->pool_uuid : ""));
  }
  SFS_ASSIGN_OR_RETURN(d.device_size, DeviceSize(d.fd, drive.path));
  return d;
}

}  // namespace stripefs
