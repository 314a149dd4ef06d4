// SPDX-License-Identifier: Apache-2.0
// The I/O seam: every byte stripefs moves to or from a drive goes through an
// IoBackend, so tests can inject errors and power cuts.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"

namespace stripefs {

// Most segments (drives and RAM) a pool can have: tables indexed by segment id
// on the data path (the placer's, the object store's, the I/O backend's) are
// sized to this once, so a drive added to a mounted pool never moves them.
inline constexpr uint32_t kMaxSegments = 256;

struct IoRequest {
  enum class Op { kRead, kWrite };
  Op op;
  uint32_t segment;  // index into the backend's files
  uint64_t offset;   // byte offset in the drive file or device
  void* buf;         // 4 KiB-aligned, as O_DIRECT needs
  size_t len;        // multiple of 4 KiB
};

// Thread-safe.
class IoBackend {
 public:
  virtual ~IoBackend() = default;
  // Issues every request at once and waits for all of them. Returns the first
  // error (naming the segment) after all have completed. The requests may be
  // performed in any order, so two writes of one batch must not overlap.
  virtual Status run(std::span<IoRequest> requests) = 0;
  // Makes every completed write to segment durable (fdatasync).
  virtual Status flush(uint32_t segment) = 0;
  // Serves segment (which had no file) from fd from now on, while run() and
  // flush() go on in other threads: a drive added to a mounted pool. Callers
  // hand out the segment id (to the placer) only after this returns.
  virtual Status add_segment(uint32_t segment, int fd) {
    (void)segment, (void)fd;
    return Status(Code::kNotSupported, "this I/O backend cannot take a new drive while in use");
  }
};

// io_uring backend over open file descriptors, fds[i] serving segment i
// (-1 for a segment that has no file). Does not own the descriptors.
// add_segment() takes segments up to kMaxSegments.
std::unique_ptr<IoBackend> NewUringBackend(std::vector<int> fds);

}  // namespace stripefs
