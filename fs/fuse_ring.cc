// SPDX-License-Identifier: Apache-2.0
// FUSE over io_uring: see fuse_ring.h.
#include "fs/fuse_ring.h"

#include <linux/fuse.h>
#include <liburing.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

namespace stripefs::fs {
namespace {

constexpr const char* kEnableParameter = "/sys/module/fuse/parameters/enable_uring";

// Room in front of the payload buffer for the request's headers, so that a
// request is contiguous as libfuse wants it and a WRITE's data (the kernel
// puts it at the payload's start) stays 4 KiB aligned for O_DIRECT.
constexpr size_t kHeaderRoom = 4096;

// The ring request the calling thread is serving (see TakeReply).
struct Entry {
  ring_abi::Header* header = nullptr;
  char* payload = nullptr;
  size_t capacity = 0;
  uint64_t unique = 0;
  bool replied = false;
};
thread_local Entry* t_entry = nullptr;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

void Prepare(io_uring* ring, int fd, uint32_t cmd, unsigned qid, uint64_t commit_id, const iovec* buffers) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring);
  if (!sqe) return;  // cannot be: the ring has room for two, and one is ever in flight
  std::memset(static_cast<void*>(sqe), 0, 2 * sizeof(io_uring_sqe));  // an SQE128 slot
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = fd;
  sqe->cmd_op = cmd;
  if (cmd == ring_abi::kCmdRegister) {
    sqe->addr = reinterpret_cast<uint64_t>(buffers);
    sqe->len = 2;
  }
  auto* req = reinterpret_cast<ring_abi::CmdReq*>(sqe->cmd);
  req->qid = static_cast<uint16_t>(qid);
  req->commit_id = commit_id;
}

}  // namespace

bool RingAvailable(std::string* why) {
  std::ifstream parameter(kEnableParameter);
  std::string value;
  if (!parameter || !std::getline(parameter, value)) {
    *why = "this kernel has no FUSE over io_uring (it needs Linux 6.14 or later, built with CONFIG_FUSE_IO_URING); "
           "mount with -o transport=dev";
    return false;
  }
  if (value != "Y" && value != "1") {
    *why = std::string("FUSE over io_uring is turned off in this kernel: as root, run `echo 1 > ") + kEnableParameter +
           "` (until the next boot), or mount with -o transport=dev";
    return false;
  }
  return true;
}

unsigned FuseRing::Queues() {
  long n = sysconf(_SC_NPROCESSORS_CONF);  // the possible CPUs, as the kernel counts its queues
  return n > 0 ? static_cast<unsigned>(n) : 1;
}

FuseRing::FuseRing(int fuse_fd, size_t max_payload, Serve serve)
    : fuse_fd_(fuse_fd), max_payload_(max_payload), serve_(std::move(serve)) {}

void FuseRing::start() {
  std::lock_guard lock(mu_);
  started_ = true;
  cv_.notify_all();
}

void FuseRing::stop() {
  std::lock_guard lock(mu_);
  stopped_.store(true, std::memory_order_release);
  cv_.notify_all();
}

bool FuseRing::wait_for_start() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return started_ || stopped_.load(); });
  return !stopped_.load();
}

bool FuseRing::TakeReply(const iovec* iov, int count) {
  Entry* e = t_entry;
  if (!e || e->replied || count < 1 || iov[0].iov_len < sizeof(fuse_out_header)) return false;
  fuse_out_header out;
  std::memcpy(&out, iov[0].iov_base, sizeof(out));
  if (out.unique != e->unique) return false;  // a notification, or a request that came through /dev/fuse
  size_t total = 0;
  for (int i = 1; i < count; ++i) total += iov[i].iov_len;
  if (total > e->capacity) {
    spdlog::error("a reply of {} bytes does not fit the ring's {}-byte buffer; answering EIO", total, e->capacity);
    out.error = -EIO;
    total = 0;
  } else {
    char* dst = e->payload;
    for (int i = 1; i < count; ++i) {
      if (iov[i].iov_base != dst) std::memmove(dst, iov[i].iov_base, iov[i].iov_len);  // may be the request's own bytes
      dst += iov[i].iov_len;
    }
  }
  out.len = static_cast<uint32_t>(sizeof(out) + total);
  std::memcpy(e->header->in_out, &out, sizeof(out));
  e->header->entry.payload_sz = static_cast<uint32_t>(total);
  e->replied = true;
  return true;
}

char* FuseRing::ReplyBuffer(size_t len) {
  Entry* e = t_entry;
  return e && !e->replied && len <= e->capacity ? e->payload : nullptr;
}

void FuseRing::run(unsigned qid) {
  if (!wait_for_start()) return;
  io_uring ring{};
  io_uring_params params{};
  params.flags = IORING_SETUP_SQE128;
  if (int rc = io_uring_queue_init_params(2, &ring, &params); rc < 0) {
    spdlog::error("fuse ring queue {}: cannot set up an io_uring: {}", qid, std::strerror(-rc));
    return;
  }
  std::unique_ptr<void, FreeDeleter> header_mem(std::aligned_alloc(4096, 4096));
  std::unique_ptr<void, FreeDeleter> payload_mem(std::aligned_alloc(4096, kHeaderRoom + max_payload_));
  if (!header_mem || !payload_mem) {
    spdlog::error("fuse ring queue {}: cannot allocate its buffers", qid);
    io_uring_queue_exit(&ring);
    return;
  }
  Entry entry;
  entry.header = new (header_mem.get()) ring_abi::Header{};
  entry.payload = static_cast<char*>(payload_mem.get()) + kHeaderRoom;
  entry.capacity = max_payload_;
  const iovec buffers[2] = {{entry.header, sizeof(ring_abi::Header)}, {entry.payload, max_payload_}};

  uint32_t cmd = ring_abi::kCmdRegister;
  uint64_t commit_id = 0;
  Prepare(&ring, fuse_fd_, cmd, qid, commit_id, buffers);
  for (;;) {
    int rc = io_uring_submit_and_wait(&ring, 1);
    if (rc < 0 && rc != -EINTR) {
      spdlog::error("fuse ring queue {}: {}", qid, std::strerror(-rc));
      break;
    }
    if (stopped_.load(std::memory_order_acquire)) break;  // every request passes here: no lock
    io_uring_cqe* cqe = nullptr;
    if (io_uring_peek_cqe(&ring, &cqe) != 0) continue;  // interrupted before the kernel answered
    const int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    if (res == -EAGAIN || res == -EINTR) {
      // EAGAIN: the kernel has not finished INIT yet; try again shortly.
      if (res == -EAGAIN) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      Prepare(&ring, fuse_fd_, cmd, qid, commit_id, buffers);
      continue;
    }
    if (res < 0) {
      // ENOTCONN and ECONNABORTED: the file system was unmounted or aborted.
      if (res != -ENOTCONN && res != -ECONNABORTED) {
        spdlog::error("fuse ring queue {}: the kernel refused the ring entry: {}", qid, std::strerror(-res));
      }
      break;
    }
    // Stored once: a store per request would bounce the line between the ring threads.
    if (!served_.load(std::memory_order_relaxed)) served_.store(true, std::memory_order_relaxed);
    fuse_in_header in;
    std::memcpy(&in, entry.header->in_out, sizeof(in));
    const uint32_t payload = entry.header->entry.payload_sz;
    commit_id = entry.header->entry.commit_id;
    cmd = ring_abi::kCmdCommitAndFetch;
    entry.unique = in.unique;
    entry.replied = false;
    // The request's first argument went to op_in, the rest to the payload.
    const size_t op_len = in.len - sizeof(in) - payload;
    if (in.len < sizeof(in) + payload || op_len > sizeof(entry.header->op_in) || payload > max_payload_) {
      spdlog::error("fuse ring queue {}: a request of {} bytes with {} of payload does not add up; answering EIO",
                    qid, in.len, payload);
    } else {
      char* start = entry.payload - op_len - sizeof(in);
      std::memcpy(start, &in, sizeof(in));
      std::memcpy(start + sizeof(in), entry.header->op_in, op_len);
      fuse_buf buf{};
      buf.mem = start;
      buf.size = in.len;
      t_entry = &entry;
      serve_(buf);
      t_entry = nullptr;
    }
    if (!entry.replied) {
      // Every request that comes through the ring is answered: FORGET, the
      // one kind without a reply, comes through /dev/fuse.
      fuse_out_header out{sizeof(fuse_out_header), -EIO, in.unique};
      std::memcpy(entry.header->in_out, &out, sizeof(out));
      entry.header->entry.payload_sz = 0;
    }
    Prepare(&ring, fuse_fd_, cmd, qid, commit_id, buffers);
  }
  io_uring_queue_exit(&ring);
}

}  // namespace stripefs::fs
