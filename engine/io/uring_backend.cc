// SPDX-License-Identifier: Apache-2.0
// IoBackend on liburing. Rings are pooled: a caller borrows one for the
// duration of run(), so concurrent FUSE workers never share a ring.
#include <fmt/format.h>
#include <linux/magic.h>
#include <liburing.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

#include "engine/io/io_backend.h"

namespace stripefs {
namespace {

constexpr unsigned kRingEntries = 128;
// Requests up to this size to a drive in memory run on the calling thread.
constexpr uint64_t kInlineMax = 64 << 10;

// tmpfs or ramfs: a drive file that is memory, where a read or write is a copy.
bool InMemory(int fd) {
  struct statfs fs;
  return fd >= 0 && fstatfs(fd, &fs) == 0 &&
         (fs.f_type == static_cast<decltype(fs.f_type)>(TMPFS_MAGIC) ||
          fs.f_type == static_cast<decltype(fs.f_type)>(RAMFS_MAGIC));
}

class UringBackend final : public IoBackend {
 public:
  explicit UringBackend(std::vector<int> fds)
      : nfds_(std::max<size_t>(fds.size(), kMaxSegments)),
        fds_(new std::atomic<int>[nfds_]),
        in_memory_(new std::atomic<bool>[nfds_]) {
    for (size_t i = 0; i < nfds_; ++i) {
      const int fd = i < fds.size() ? fds[i] : -1;
      in_memory_[i].store(InMemory(fd), std::memory_order_relaxed);
      fds_[i].store(fd, std::memory_order_relaxed);
    }
  }
  ~UringBackend() override {
    for (io_uring* r : free_rings_) {
      io_uring_queue_exit(r);
      delete r;
    }
  }

  // Some requests run synchronously on the calling thread while the ring
  // carries the others:
  // - the first one: a request that fits one drive (most of them) then costs
  //   one system call and no wake-up;
  // - small ones to drives in memory (tmpfs): such a file cannot do
  //   non-blocking I/O, so io_uring would hand each to a kernel worker, two
  //   thread switches for a copy of a few microseconds. A write-back flush
  //   of 512 small objects otherwise keeps that worker and the flusher
  //   waking each other 512 times, on the cores the readers need.
  Status run(std::span<IoRequest> reqs) override {
    if (reqs.empty()) return Status::OK();
    Status first_error;
    auto note = [&](Status s) {
      if (!s.ok() && first_error.ok()) first_error = std::move(s);
    };
    auto here = [&](size_t i) { return i == 0 || (reqs[i].len <= kInlineMax && in_memory(reqs[i].segment)); };
    io_uring* ring = nullptr;
    for (size_t i = 1; i < reqs.size() && !ring; ++i) {
      if (here(i)) continue;
      ring = borrow();
      if (!ring) return Status::IOError("cannot set up io_uring");
    }
    size_t next = 0;
    unsigned in_flight = 0;
    auto submit = [&]() -> Status {
      unsigned batch = 0;
      for (; next < reqs.size() && in_flight + batch < kRingEntries; ++next) {
        if (here(next)) continue;
        IoRequest& r = reqs[next];
        int fd = this->fd(r.segment);
        if (fd < 0) {
          note(MissingDrive(r.segment));
          continue;
        }
        io_uring_sqe* sqe = io_uring_get_sqe(ring);
        if (r.op == IoRequest::Op::kRead) {
          io_uring_prep_read(sqe, fd, r.buf, r.len, r.offset);
        } else {
          io_uring_prep_write(sqe, fd, r.buf, r.len, r.offset);
        }
        io_uring_sqe_set_data(sqe, &r);
        ++batch;
      }
      if (batch == 0) return Status::OK();
      int rc = io_uring_submit(ring);
      if (rc < 0) return Status::IOError(fmt::format("io_uring submit: {}", strerror(-rc)));
      in_flight += batch;
      return Status::OK();
    };
    if (ring) {
      if (Status s = submit(); !s.ok()) {
        give_back(ring);  // nothing is in flight: submit failed before the kernel took any
        return s;
      }
    }
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (here(i)) note(fd(reqs[i].segment) < 0 ? MissingDrive(reqs[i].segment) : finish(reqs[i], 0));
    }
    while (in_flight > 0) {
      io_uring_cqe* cqe;
      int rc = io_uring_wait_cqe(ring, &cqe);
      if (rc == -EINTR) continue;
      if (rc < 0) {
        // The ring may still own buffers in flight: it is not reused.
        return Status::IOError(fmt::format("io_uring wait: {}", strerror(-rc)));
      }
      auto* r = static_cast<IoRequest*>(io_uring_cqe_get_data(cqe));
      int res = cqe->res;
      io_uring_cqe_seen(ring, cqe);
      --in_flight;
      note(res < 0 ? Failure(*r, -res) : finish(*r, static_cast<size_t>(res)));
      if (Status s = submit(); !s.ok()) note(s);
    }
    if (ring) give_back(ring);
    return first_error;
  }

  Status add_segment(uint32_t segment, int fd) override {
    if (segment >= nfds_) {
      return Status::Invalid(fmt::format("segment {} is past the largest segment id {}", segment, nfds_ - 1));
    }
    int none = -1;
    // Release: a thread that gets this segment id from the placer (published
    // after this call) and then loads the descriptor with acquire sees it.
    if (!fds_[segment].compare_exchange_strong(none, fd, std::memory_order_release, std::memory_order_relaxed)) {
      return Status::Invalid(fmt::format("segment {} has a drive already", segment));
    }
    // A hint only: a request that sees the descriptor before this goes through the ring.
    in_memory_[segment].store(InMemory(fd), std::memory_order_relaxed);
    return Status::OK();
  }

  Status flush(uint32_t segment) override {
    int fd = this->fd(segment);
    if (fd < 0) return Status::OK();
    if (fdatasync(fd) != 0) {
      return Status::IOError(fmt::format("flush of segment {}: {}", segment, strerror(errno)));
    }
    return Status::OK();
  }

 private:
  static Status MissingDrive(uint32_t segment) {
    return Status::IOError(fmt::format("segment {} has no drive", segment));
  }
  static Status Failure(const IoRequest& r, int err) {
    return Status::IOError(fmt::format("{} of {} bytes at offset {} on segment {}: {}",
                                       r.op == IoRequest::Op::kRead ? "read" : "write", r.len, r.offset,
                                       r.segment, strerror(err)));
  }

  // Completes r synchronously from byte `done` on: the whole request on the
  // fast path, or what is left after a short transfer (a signal, the end of a
  // drive file).
  Status finish(const IoRequest& r, size_t done) {
    while (done < r.len) {
      char* p = static_cast<char*>(r.buf) + done;
      ssize_t n = r.op == IoRequest::Op::kRead ? pread(fd(r.segment), p, r.len - done, r.offset + done)
                                               : pwrite(fd(r.segment), p, r.len - done, r.offset + done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Failure(r, errno);
      if (n == 0) {
        return Status::IOError(fmt::format("short {} at offset {} on segment {}",
                                           r.op == IoRequest::Op::kRead ? "read" : "write",
                                           r.offset + done, r.segment));
      }
      done += static_cast<size_t>(n);
    }
    return Status::OK();
  }

  io_uring* borrow() {
    {
      std::lock_guard lock(mu_);
      if (!free_rings_.empty()) {
        io_uring* r = free_rings_.back();
        free_rings_.pop_back();
        return r;
      }
    }
    auto* r = new io_uring;
    if (io_uring_queue_init(kRingEntries, r, 0) != 0) {
      delete r;
      return nullptr;
    }
    return r;
  }
  void give_back(io_uring* r) {
    std::lock_guard lock(mu_);
    free_rings_.push_back(r);
  }

  // The descriptor of a segment; -1 when it has none (or the id is unknown).
  int fd(uint32_t segment) const {
    return segment < nfds_ ? fds_[segment].load(std::memory_order_acquire) : -1;
  }

  // Whether a segment's drive is in memory (InMemory): where small requests run.
  bool in_memory(uint32_t segment) const {
    return segment < nfds_ && in_memory_[segment].load(std::memory_order_relaxed);
  }

  // By segment id, sized once (kMaxSegments at least) so that a drive added
  // while the pool is in use fills a slot instead of growing the table under
  // readers; each slot is atomic because run() reads it without a lock. The
  // rings do not register files (IORING_REGISTER_FILES): with registration, a
  // new drive would need io_uring_register_files_update on every pooled ring.
  const size_t nfds_;
  std::unique_ptr<std::atomic<int>[]> fds_;
  std::unique_ptr<std::atomic<bool>[]> in_memory_;
  std::mutex mu_;
  std::vector<io_uring*> free_rings_;  // GUARDED_BY(mu_)
};

}  // namespace

std::unique_ptr<IoBackend> NewUringBackend(std::vector<int> fds) {
  return std::make_unique<UringBackend>(std::move(fds));
}

}  // namespace stripefs
