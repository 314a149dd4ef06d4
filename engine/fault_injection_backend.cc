// FaultInjectionBackend: saves the bytes each write replaces (plain pread and
// pwrite through an aligned bounce buffer, so O_DIRECT descriptors work).
#include "engine/fault_injection_backend.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

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

void FaultInjectionBackend::fail_reads(bool on) {
  std::lock_guard lock(mu_);
  fail_reads_ = on;
}

uint64_t FaultInjectionBackend::writes() const {
  std::lock_guard lock(mu_);
  return writes_;
}

Status FaultInjectionBackend::run(std::span<IoRequest> requests) {
  std::lock_guard lock(mu_);
  for (const IoRequest& r : requests) {
    if (r.op == IoRequest::Op::kRead) {
      if (fail_reads_) return Status::IOError(fmt::format("injected read error on segment {}", r.segment));
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

Status FaultInjectionBackend::drop_unsynced() {
  std::lock_guard lock(mu_);
  for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) {
    Bounce b(it->old_bytes.size());
    std::memcpy(b.p, it->old_bytes.data(), it->old_bytes.size());
    if (pwrite(fds_.at(it->segment), b.p, it->old_bytes.size(), static_cast<off_t>(it->offset)) < 0) {
      return Status::IOError("fault injection: cannot restore old bytes");
    }
  }
  undo_.clear();
  return Status::OK();
}

}  // namespace stripefs
