// SPDX-License-Identifier: Apache-2.0
// An IoBackend for tests that fails chosen writes and simulates power loss:
// it remembers what every write overwrote until that segment is flushed, and
// drop_unsynced() puts those old bytes back.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "engine/io/io_backend.h"

namespace stripefs {

class FaultInjectionBackend final : public IoBackend {
 public:
  // Forwards to inner; fds are the same files, used to save and restore old bytes.
  FaultInjectionBackend(IoBackend* inner, std::vector<int> fds) : inner_(inner), fds_(std::move(fds)) {}

  // The nth write request from now (1 = the next one) fails with an I/O error
  // and writes nothing; 0 disables.
  void fail_nth_write(uint64_t n);
  // Every read from segment fails with an I/O error while on (a dying drive).
  void fail_reads(uint32_t segment, bool on);
  // Power cut: every write not yet flushed is undone, newest first. With a
  // tear_seed, each 4 KiB block of such a write is undone or kept at random
  // (as a drive's volatile cache may have written any of them).
  Status drop_unsynced(uint64_t tear_seed = 0);
  uint64_t writes() const;

  Status run(std::span<IoRequest> requests) override;
  Status flush(uint32_t segment) override;

 private:
  struct Undo {
    uint32_t segment;
    uint64_t offset;
    std::string old_bytes;
  };
  IoBackend* inner_;
  std::vector<int> fds_;
  mutable std::mutex mu_;
  uint64_t fail_at_ = 0;      // GUARDED_BY(mu_)
  uint64_t writes_ = 0;       // GUARDED_BY(mu_)
  std::set<uint32_t> failing_;  // GUARDED_BY(mu_): segments whose reads fail
  std::vector<Undo> undo_;    // GUARDED_BY(mu_)
};

}  // namespace stripefs
