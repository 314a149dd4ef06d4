// The I/O seam: every byte stripefs moves to or from a drive goes through an
// IoBackend, so tests can inject errors and power cuts.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "meta/status.h"

namespace stripefs {

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
  // error (naming the segment) after all have completed.
  virtual Status run(std::span<IoRequest> requests) = 0;
  // Makes every completed write to segment durable (fdatasync).
  virtual Status flush(uint32_t segment) = 0;
};

// io_uring backend over open file descriptors, fds[i] serving segment i
// (-1 for a segment that has no file). Does not own the descriptors.
std::unique_ptr<IoBackend> NewUringBackend(std::vector<int> fds);

}  // namespace stripefs
