// SPDX-License-Identifier: Apache-2.0
// Per-segment space allocation. The in-memory free map is rebuilt at mount
// from the chunk records (mark_used), so it never disagrees with them after a crash.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "meta/schema.h"
#include "base/status.h"

namespace stripefs {

// Allocation units: drives need 4 KiB for O_DIRECT; RAM segments only cache-line alignment.
inline constexpr uint64_t kDriveAllocationUnit = 4096;
inline constexpr uint64_t kRamAllocationUnit = 64;

// Thread-safe. Offsets and lengths are bytes, multiples of unit().
class SegmentAllocator {
 public:
  virtual ~SegmentAllocator() = default;
  // Reserves len bytes and returns their offset; kNoSpace when no free run is long enough.
  virtual Result<uint64_t> allocate(uint64_t len) = 0;
  // Reserves len bytes in as few free runs as it can: the best-fitting run
  // when one is long enough, else the longest runs first. Appends the runs to
  // *out in that order. kNoSpace (nothing taken) when less than len is free.
  virtual Status allocate_spread(uint64_t len, std::vector<meta::Extent>* out) = 0;
  // Returns [offset, offset+len) to the free space. REQUIRES: it was allocated.
  virtual void release(uint64_t offset, uint64_t len) = 0;
  // Marks a recorded extent as used while rebuilding; kCorruption if any of it
  // is outside the segment or already used.
  virtual Status mark_used(uint64_t offset, uint64_t len) = 0;
  // Grows the allocated [offset, offset+len) to new_len if the bytes after it are free.
  virtual bool try_extend(uint64_t offset, uint64_t len, uint64_t new_len) = 0;
  virtual uint64_t capacity() const = 0;
  virtual uint64_t free_bytes() const = 0;
  virtual uint64_t unit() const = 0;
  // The longest free run (0 when full).
  virtual uint64_t largest_free_run() const = 0;
  // 0 when the free space is one run; approaches 1 as it splinters.
  virtual double fragmentation() const = 0;
  virtual void for_each_free(const std::function<void(uint64_t offset, uint64_t len)>& fn) const = 0;
};

// Best fit over free runs indexed by offset and by length, with coalescing:
// O(log n) per operation and no rounding beyond unit. Registered as
// kBestFitAllocator; called directly by the tests and benchmarks that build
// their segments by hand.
std::unique_ptr<SegmentAllocator> NewBestFitAllocator(uint64_t capacity, uint64_t unit);

// The allocators by name. Each is registered once, in allocator.cc; whatever
// enumerates AllocatorNames() (the allocator contract tests, the placement
// suite) picks a new one up.
inline constexpr std::string_view kBestFitAllocator = "best-fit";
// The allocator a pool gives each of its segments.
inline constexpr std::string_view kPoolAllocator = kBestFitAllocator;

// A new allocator of a registered name over capacity bytes in units of unit
// bytes; kInvalidArgument names the choices for an unknown name.
Result<std::unique_ptr<SegmentAllocator>> MakeAllocator(std::string_view name, uint64_t capacity, uint64_t unit);
// Every registered allocator's name, in registration order.
const std::vector<std::string>& AllocatorNames();

}  // namespace stripefs
