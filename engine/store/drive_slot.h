// SPDX-License-Identifier: Apache-2.0
// DriveSlot: one drive as the object store sees it. Its own header because
// the store's parts (the object store, its free ledger) all read the same
// drive table.
#pragma once

#include <cstdint>

#include "engine/placement/allocator.h"

namespace stripefs {

struct DriveSlot {
  uint32_t id;
  uint64_t data_offset;         // where the data area starts in the file
  SegmentAllocator* allocator;  // null: takes no new chunks (a RAM or a missing segment)
  bool available = true;        // false: a drive missing from a degraded mount
  bool ram = false;             // the RAM segment (memory, for files of ram directories)
};

}  // namespace stripefs
