// SPDX-License-Identifier: Apache-2.0
// FUSE over io_uring (Linux 6.14 and later; protocol 7.42), which libfuse
// 3.14 predates. After INIT the daemon hands the kernel ring entries: one
// IORING_OP_URING_CMD each, holding a header buffer and a payload buffer.
// The kernel fills an entry with a request from the CPU the entry's queue
// stands for and completes the command; the daemon writes the reply into the
// same buffers and, in one submission, commits it and asks for the next
// request (COMMIT_AND_FETCH). That is one system call per request where
// /dev/fuse needs a read and a write, and the request stays on its CPU.
//
// The kernel still sends FORGET, INTERRUPT and every request before all
// queues are registered through /dev/fuse, so the /dev/fuse workers keep
// running beside the ring threads (see RunWorkers).
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace stripefs::fs {

// The kernel's ABI for the ring (include/uapi/linux/fuse.h), absent from
// Debian 12's headers.
namespace ring_abi {
constexpr uint32_t kInitFlags2OverIoUring = 1u << 9;  // FUSE_OVER_IO_URING (bit 41) in flags2
constexpr uint32_t kCmdRegister = 1;
constexpr uint32_t kCmdCommitAndFetch = 2;
struct EntryInOut {
  uint64_t flags;
  uint64_t commit_id;  // the kernel's id of the request; the commit names it
  uint32_t payload_sz; // bytes in the payload buffer, both ways
  uint32_t padding;
  uint64_t reserved;
};
struct Header {
  char in_out[128];  // fuse_in_header in, fuse_out_header back
  char op_in[128];   // the request's first argument (fuse_write_in, ...), when it has one
  EntryInOut entry;
};
struct CmdReq {
  uint64_t flags;
  uint64_t commit_id;
  uint16_t qid;
  uint8_t padding[6];
};
static_assert(sizeof(Header) == 288 && sizeof(CmdReq) == 24);
}  // namespace ring_abi

// Whether this kernel lets a daemon use the ring; when not, why (one line,
// with how to turn it on).
bool RingAvailable(std::string* why);

// The ring threads of one session: each owns an io_uring with one entry of
// one queue. Threads start waiting; start() (after the INIT reply offered the
// ring) lets them register, stop() ends them.
class FuseRing {
 public:
  // Serves one request, given as /dev/fuse would have delivered it.
  using Serve = std::function<void(fuse_buf& buf)>;
  FuseRing(int fuse_fd, size_t max_payload, Serve serve);
  FuseRing(const FuseRing&) = delete;
  FuseRing& operator=(const FuseRing&) = delete;

  // How many queues the kernel expects: one per possible CPU.
  static unsigned Queues();

  // Runs one ring thread's loop for queue qid until stop() or unmount.
  void run(unsigned qid);
  void start();
  void stop();
  // Whether any request came through the ring.
  bool active() const { return served_.load(std::memory_order_relaxed); }

  // Called with every reply: when the calling thread is serving a ring
  // request with the reply's unique, copies the reply into its entry and
  // returns true (the commit goes with the next fetch); false otherwise.
  static bool TakeReply(const struct iovec* iov, int count);
  // Where the calling thread may build a reply payload of len bytes so that
  // TakeReply finds it in place and copies nothing: the entry's payload
  // buffer (4 KiB aligned) while it serves a ring request, else nullptr.
  // A READ's request lies wholly in front of it; a WRITE's data starts in
  // it, so only a reply built after the data is used may go there.
  static char* ReplyBuffer(size_t len);

 private:
  bool wait_for_start();

  const int fuse_fd_;
  const size_t max_payload_;
  const Serve serve_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;             // under mu_
  std::atomic<bool> stopped_{false};  // set under mu_ (for the wait), read without it by the loop
  std::atomic<bool> served_{false};
};

}  // namespace stripefs::fs
