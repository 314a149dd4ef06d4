// SPDX-License-Identifier: Apache-2.0
// FaultInjectionBackend: saves the bytes each write replaces (plain pread and
// pwrite through an aligned bounce buffer, so O_DIRECT descriptors work).
#include "tests/support/fault_injection_backend.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>

namespace stripefs {
namespace {

struct Bounce {
  explicit Bounce(size_t n) {
    if (posix_memalign(&p, 4096, n) != 0) p = nullptr;
  }
  ~Bounce() { std::free(p); }
  void* p = nullptr;
};

}  // namespace

void FaultInjectionBackend::fail_nth_write(uint64_t n) {
  std::lock_guard lock(mu_);
  fail_at_ = n ? writes_ + n : 0;
}

void FaultInjectionBackend::fail_reads(uint32_t segment, bool on) {
  std::lock_guard lock(mu_);
  if (on) {
    failing_.insert(segment);
  } else {
    failing_.erase(segment);
  }
}

uint64_t FaultInjectionBackend::writes() const {
  std::lock_guard lock(mu_);
  return writes_;
}

Status FaultInjectionBackend::run(std::span<IoRequest> requests) {
  std::lock_guard lock(mu_);
  for (const IoRequest& r : requests) {
    if (r.op == IoRequest::Op::kRead) {
      if (failing_.count(r.segment)) return Status::IOError(fmt::format("injected read error on segment {}", r.segment));
      continue;
    }
    ++writes_;
    if (fail_at_ && writes_ == fail_at_) {
      return Status::IOError(fmt::format("injected write error on segment {} at offset {}", r.segment, r.offset));
    }
  }
  for (const IoRequest& r : requests) {
    if (r.op != IoRequest::Op::kWrite) continue;
    Bounce b(r.len);
    if (!b.p || pread(fds_.at(r.segment), b.p, r.len, static_cast<off_t>(r.offset)) < 0) {
      return Status::IOError("fault injection: cannot save old bytes");
    }
    undo_.push_back({r.segment, r.offset, std::string(static_cast<char*>(b.p), r.len)});
  }
  return inner_->run(requests);
}

Status FaultInjectionBackend::flush(uint32_t segment) {
  std::lock_guard lock(mu_);
  SFS_RETURN_IF_ERROR(inner_->flush(segment));
  std::erase_if(undo_, [&](const Undo& u) { return u.segment == segment; });
  return Status::OK();
}

Status FaultInjectionBackend::drop_unsynced(uint64_t tear_seed) {
  std::lock_guard lock(mu_);
  std::mt19937_64 rng(tear_seed);
  constexpr size_t kBlock = 4096;
  for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) {
    Bounce b(kBlock);
    for (size_t at = 0; at < it->old_bytes.size(); at += kBlock) {
      if (tear_seed && rng() % 2) continue;  // this block of the write reached the media
      std::memcpy(b.p, it->old_bytes.data() + at, kBlock);
      if (pwrite(fds_.at(it->segment), b.p, kBlock, static_cast<off_t>(it->offset + at)) < 0) {
        return Status::IOError("fault injection: cannot restore old bytes");
      }
    }
  }
  undo_.clear();
  return Status::OK();
}

}  // namespace stripefs
