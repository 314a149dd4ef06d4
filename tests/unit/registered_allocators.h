// SPDX-License-Identifier: Apache-2.0
// The allocators the allocator tests run over: every registered allocator
// (AllocatorNames()) at both allocation units, the drives' and the RAM
// segment's. The allocator contract suite (allocator_test.cc) and the
// placement suite (placement_suite_test.cc) both enumerate them, so a newly
// registered allocator gets both without a line here.
#pragma once

#include <cctype>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "engine/placement/allocator.h"

namespace stripefs {

// A test name part: letters and digits kept, anything else an underscore.
inline std::string TestNamePart(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

struct AllocatorUnderTest {
  std::string name;  // as registered
  uint64_t unit;     // kDriveAllocationUnit or kRamAllocationUnit

  // A new, empty allocator of capacity bytes.
  std::unique_ptr<SegmentAllocator> make(uint64_t capacity) const {
    return MakeAllocator(name, capacity, unit).value();
  }
  // "best_fit_4096": for test names.
  std::string test_name() const { return TestNamePart(name + "_" + std::to_string(unit)); }
};

inline void PrintTo(const AllocatorUnderTest& a, std::ostream* os) { *os << a.name << " (unit " << a.unit << ")"; }

inline std::vector<AllocatorUnderTest> AllocatorsUnderTest() {
  std::vector<AllocatorUnderTest> all;
  for (const std::string& name : AllocatorNames()) {
    for (uint64_t unit : {kDriveAllocationUnit, kRamAllocationUnit}) all.push_back({name, unit});
  }
  return all;
}

}  // namespace stripefs
