// SPDX-License-Identifier: Apache-2.0
// The superblock at the start of every drive: which pool, which segment.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"

namespace stripefs {

struct Superblock {
  uint32_t format_version = 1;
  uint32_t segment_id = 0;
  std::string pool_uuid;
  uint64_t size = 0;  // bytes of the drive given to the pool, superblock included
};

Status WriteSuperblock(int fd, const Superblock& sb);
// nullopt when the drive holds no stripefs superblock; kCorruption when it holds a damaged one.
Result<std::optional<Superblock>> ReadSuperblock(int fd);

}  // namespace stripefs
