// IoBackend on liburing. Rings are pooled: a caller borrows one for the
// duration of run(), so concurrent FUSE workers never share a ring.
#include <fmt/format.h>
#include <liburing.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "engine/io_backend.h"

namespace stripefs {
namespace {

constexpr unsigned kRingEntries = 128;

class UringBackend final : public IoBackend {
 public:
  explicit UringBackend(std::vector<int> fds) : fds_(std::move(fds)) {}
  ~UringBackend() override {
    for (io_uring* r : free_rings_) {
      io_uring_queue_exit(r);
      delete r;
    }
  }

  Status run(std::span<IoRequest> reqs) override {
    if (reqs.empty()) return Status::OK();
    io_uring* ring = borrow();
    if (!ring) return Status::IOError("cannot set up io_uring");
    Status first_error;
    size_t next = 0;
    while (next < reqs.size()) {
      unsigned batch = 0;
      for (; next < reqs.size() && batch < kRingEntries; ++next, ++batch) {
        IoRequest& r = reqs[next];
        int fd = fds_.at(r.segment);
        if (fd < 0) {  // a segment without a file: a missing drive of a degraded mount
          if (first_error.ok()) first_error = Status::IOError(fmt::format("segment {} has no drive", r.segment));
          --batch;
          continue;
        }
        io_uring_sqe* sqe = io_uring_get_sqe(ring);
        if (r.op == IoRequest::Op::kRead) {
          io_uring_prep_read(sqe, fd, r.buf, r.len, r.offset);
        } else {
          io_uring_prep_write(sqe, fd, r.buf, r.len, r.offset);
        }
        io_uring_sqe_set_data(sqe, &r);
      }
      int rc = io_uring_submit(ring);
      if (rc < 0) {
        give_back(ring);
        return Status::IOError(fmt::format("io_uring submit: {}", strerror(-rc)));
      }
      for (unsigned done = 0; done < batch; ++done) {
        io_uring_cqe* cqe;
        rc = io_uring_wait_cqe(ring, &cqe);
        if (rc < 0) {
          if (rc == -EINTR) { --done; continue; }
          give_back(ring);
          return Status::IOError(fmt::format("io_uring wait: {}", strerror(-rc)));
        }
        auto* r = static_cast<IoRequest*>(io_uring_cqe_get_data(cqe));
        int res = cqe->res;
        io_uring_cqe_seen(ring, cqe);
        Status s = finish(*r, res);
        if (!s.ok() && first_error.ok()) first_error = s;
      }
    }
    give_back(ring);
    return first_error;
  }

  Status flush(uint32_t segment) override {
    int fd = fds_.at(segment);
    if (fd < 0) return Status::OK();
    if (fdatasync(fd) != 0) {
      return Status::IOError(fmt::format("flush of segment {}: {}", segment, strerror(errno)));
    }
    return Status::OK();
  }

 private:
  // A short transfer (rare: a signal, or the end of a drive file) is completed synchronously.
  Status finish(const IoRequest& r, int res) {
    if (res < 0) {
      return Status::IOError(fmt::format("{} of {} bytes at offset {} on segment {}: {}",
                                         r.op == IoRequest::Op::kRead ? "read" : "write", r.len,
                                         r.offset, r.segment, strerror(-res)));
    }
    size_t done = static_cast<size_t>(res);
    while (done < r.len) {
      char* p = static_cast<char*>(r.buf) + done;
      ssize_t n = r.op == IoRequest::Op::kRead ? pread(fds_[r.segment], p, r.len - done, r.offset + done)
                                               : pwrite(fds_[r.segment], p, r.len - done, r.offset + done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
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

  std::vector<int> fds_;
  std::mutex mu_;
  std::vector<io_uring*> free_rings_;  // GUARDED_BY(mu_)
};

}  // namespace

std::unique_ptr<IoBackend> NewUringBackend(std::vector<int> fds) {
  return std::make_unique<UringBackend>(std::move(fds));
}

}  // namespace stripefs
