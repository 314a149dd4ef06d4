// SPDX-License-Identifier: Apache-2.0
// Superblock encoding: a fixed 4 KiB block with magic, fields and a crc32c.
#include "engine/pool/superblock.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/crc32c.h"

namespace stripefs {
namespace {
constexpr char kMagic[8] = {'S', 'T', 'R', 'I', 'P', 'E', 'F', 'S'};
constexpr size_t kSize = 4096;
constexpr size_t kUuidLen = 36;
// Layout: magic[8] version u32 segment u32 uuid[36] size u64 ... crc u32 at kSize-4.
}  // namespace

Status WriteSuperblock(int fd, const Superblock& sb) {
  alignas(4096) static thread_local char buf[kSize];
  std::memset(buf, 0, kSize);
  std::memcpy(buf, kMagic, 8);
  std::memcpy(buf + 8, &sb.format_version, 4);
  std::memcpy(buf + 12, &sb.segment_id, 4);
  std::memcpy(buf + 16, sb.pool_uuid.data(), std::min(sb.pool_uuid.size(), kUuidLen));
  std::memcpy(buf + 16 + kUuidLen, &sb.size, 8);
  uint32_t crc = Crc32c(buf, kSize - 4);
  std::memcpy(buf + kSize - 4, &crc, 4);
  if (pwrite(fd, buf, kSize, 0) != static_cast<ssize_t>(kSize) || fdatasync(fd) != 0) {
    return Status::IOError(std::string("cannot write superblock: ") + strerror(errno));
  }
  return Status::OK();
}

Result<std::optional<Superblock>> ReadSuperblock(int fd) {
  alignas(4096) static thread_local char buf[kSize];
  ssize_t n = pread(fd, buf, kSize, 0);
  if (n < 0) return Status::IOError(std::string("cannot read superblock: ") + strerror(errno));
  if (n < static_cast<ssize_t>(kSize) || std::memcmp(buf, kMagic, 8) != 0) return std::optional<Superblock>();
  uint32_t crc;
  std::memcpy(&crc, buf + kSize - 4, 4);
  if (crc != Crc32c(buf, kSize - 4)) return Status::Corruption("superblock checksum mismatch");
  Superblock sb;
  std::memcpy(&sb.format_version, buf + 8, 4);
  std::memcpy(&sb.segment_id, buf + 12, 4);
  sb.pool_uuid.assign(buf + 16, strnlen(buf + 16, kUuidLen));
  std::memcpy(&sb.size, buf + 16 + kUuidLen, 8);
  return std::optional<Superblock>(sb);
}

}  // namespace stripefs
