// SPDX-License-Identifier: Apache-2.0
// The FUSE session loop: see session_loop.h.
#include "fs/session_loop.h"

#include <linux/fuse.h>  // the request header sizes, to align write data
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "fs/fuse_ring.h"
#include "fs/request_stats.h"

namespace stripefs::fs {
namespace {

// Where a worker's request buffer starts relative to a 4 KiB boundary: a
// WRITE request's data then lands aligned, so the object store can hand it to
// O_DIRECT as it is instead of copying it first.
constexpr size_t kWriteHeader = sizeof(fuse_in_header) + sizeof(fuse_write_in);
// libfuse reads up to 256 pages of payload plus a 4 KiB header area per request.
constexpr size_t kRequestBuffer = (256u << 12) + 4096;

// Whether the request this thread is serving asks the daemon to clear
// suid/sgid (see RequestKillsSuidgid).
thread_local bool t_kill_suidgid = false;

// While this thread serves INIT: whether the kernel offered
// FUSE_HANDLE_KILLPRIV_V2 (see WriteReply).
thread_local bool t_serving_init = false;
thread_local bool t_offers_killpriv_v2 = false;
// ... and whether it offered FUSE over io_uring.
thread_local bool t_offers_ring = false;

// The session's ring threads, when the mount asked for -o transport=uring
// (one session per process).
std::atomic<FuseRing*> g_ring{nullptr};
// Whether a request came through a ring of this process (kept after the ring
// is gone, for a report at the end).
std::atomic<bool> g_ring_used{false};

// Whether the request this thread is serving came as FUSE_TMPFILE (see CreatesUnnamed).
thread_local bool t_unnamed = false;

// libfuse 3.14 answers FUSE_TMPFILE (open(O_TMPFILE)) with ENOSYS, which the
// kernel turns into EOPNOTSUPP for good. Its arguments are a CREATE's (the
// flags, the mode, a placeholder name), and so is the reply it wants, so
// the loop hands it to libfuse as a CREATE, marked for the create op.
bool TakeTmpfile(const fuse_buf& buf) {
  auto* in = static_cast<fuse_in_header*>(buf.mem);
  if (in->opcode != FUSE_TMPFILE) return false;
  in->opcode = FUSE_CREATE;
  return true;
}

template <typename T>
const T& Args(const fuse_in_header* in) {
  return *static_cast<const T*>(static_cast<const void*>(in + 1));
}

// libfuse 3.14 passes none of the kernel's "kill suid/sgid" flags to the ops,
// so the loop reads them from the request.
bool KillsSuidgid(const fuse_buf& buf) {
  const auto* in = static_cast<const fuse_in_header*>(buf.mem);
  switch (in->opcode) {
    case FUSE_WRITE: return (Args<fuse_write_in>(in).write_flags & FUSE_WRITE_KILL_SUIDGID) != 0;
    case FUSE_SETATTR: return (Args<fuse_setattr_in>(in).valid & FATTR_KILL_SUIDGID) != 0;
    case FUSE_OPEN: return (Args<fuse_open_in>(in).open_flags & FUSE_OPEN_KILL_SUIDGID) != 0;
    default: return false;
  }
}

bool OffersKillprivV2(const fuse_buf& buf) {
  const auto* in = static_cast<const fuse_in_header*>(buf.mem);
  return in->opcode == FUSE_INIT && (Args<fuse_init_in>(in).flags & FUSE_HANDLE_KILLPRIV_V2) != 0;
}

bool OffersRing(const fuse_buf& buf) {
  const auto* in = static_cast<const fuse_in_header*>(buf.mem);
  if (in->opcode != FUSE_INIT) return false;
  const fuse_init_in& init = Args<fuse_init_in>(in);
  return (init.flags & FUSE_INIT_EXT) != 0 && (init.flags2 & ring_abi::kInitFlags2OverIoUring) != 0;
}

ssize_t Bytes(const struct iovec* iov, int count) {
  ssize_t total = 0;
  for (int i = 0; i < count; ++i) total += static_cast<ssize_t>(iov[i].iov_len);
  return total;
}

// Every reply passes here. One to a request that came through the ring goes
// into its ring entry (FuseRing::TakeReply); the rest go to /dev/fuse.
//
// libfuse 3.14 knows neither FUSE_HANDLE_KILLPRIV_V2 nor FUSE_OVER_IO_URING,
// so the reply to INIT gets them here when the kernel offered them (and, for
// the ring, the mount asked for it). With KILLPRIV_V2 the kernel marks the
// super block SB_NOSEC: a file without suid/sgid stops asking for
// security.capability (a GETXATTR round trip) before every buffered write,
// and the kernel leaves clearing suid/sgid on write, truncate, O_TRUNC and
// chown to the daemon, flagging the requests that need it
// (RequestKillsSuidgid). Once the kernel has taken an INIT reply that accepts
// the ring, the ring threads may register their entries.
ssize_t WriteReply(int fd, struct iovec* iov, int count, void*) {
  if (FuseRing::TakeReply(iov, count)) return Bytes(iov, count);
  FuseRing* ring = g_ring.load();
  const bool with_ring = ring && t_offers_ring;
  if (!t_serving_init || !(t_offers_killpriv_v2 || with_ring) || count != 2 ||
      static_cast<const fuse_out_header*>(iov[0].iov_base)->error != 0 ||
      iov[1].iov_len < offsetof(fuse_init_out, flags2) + sizeof(uint32_t) || iov[1].iov_len > sizeof(fuse_init_out)) {
    return writev(fd, iov, count);
  }
  fuse_init_out init{};
  std::memcpy(&init, iov[1].iov_base, iov[1].iov_len);
  if (t_offers_killpriv_v2) init.flags |= FUSE_HANDLE_KILLPRIV_V2;
  if (with_ring) {
    init.flags |= FUSE_INIT_EXT;
    init.flags2 |= ring_abi::kInitFlags2OverIoUring;
  }
  std::array<iovec, 2> patched = {iov[0], iovec{&init, iov[1].iov_len}};
  const ssize_t written = writev(fd, patched.data(), 2);
  if (with_ring && written >= 0) ring->start();
  return written;
}

ssize_t ReadRequest(int fd, void* buf, size_t len, void*) { return read(fd, buf, len); }

// The payload a READ or WRITE request moves, from its header.
uint64_t PayloadBytes(const fuse_buf& buf) {
  const auto* in = static_cast<const fuse_in_header*>(buf.mem);
  if (in->opcode == FUSE_READ) return static_cast<const fuse_read_in*>(static_cast<const void*>(in + 1))->size;
  if (in->opcode == FUSE_WRITE) return static_cast<const fuse_write_in*>(static_cast<const void*>(in + 1))->size;
  return 0;
}

// Serves one request as it came from /dev/fuse or the ring.
void Serve(fuse_session* se, fuse_buf& buf, RequestStats* stats) {
  t_kill_suidgid = KillsSuidgid(buf);
  t_serving_init = static_cast<const fuse_in_header*>(buf.mem)->opcode == FUSE_INIT;
  t_offers_killpriv_v2 = OffersKillprivV2(buf);
  t_offers_ring = OffersRing(buf);
  t_unnamed = TakeTmpfile(buf);
  if (!stats) {
    fuse_session_process_buf(se, &buf);
    return;
  }
  const uint32_t opcode = static_cast<const fuse_in_header*>(buf.mem)->opcode;
  const uint64_t bytes = PayloadBytes(buf);
  const auto start = std::chrono::steady_clock::now();
  fuse_session_process_buf(se, &buf);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
  stats->record(opcode, bytes, static_cast<uint64_t>(ns.count()));
}

void Work(fuse_session* se, RequestStats* stats) {
  void* base = nullptr;
  if (posix_memalign(&base, 4096, kRequestBuffer + 4096) != 0) {
    spdlog::critical("cannot allocate a request buffer; worker not started");
    return;
  }
  fuse_buf buf{};
  buf.mem = static_cast<char*>(base) + 4096 - kWriteHeader;
  while (!fuse_session_exited(se)) {
    buf.size = kRequestBuffer;
    int res = fuse_session_receive_buf(se, &buf);
    if (res == -EINTR) continue;
    if (res <= 0) break;  // unmounted (the session is marked exited) or a device error
    Serve(se, buf, stats);
  }
  std::free(base);
}

// A fixed set of workers, all reading requests from the one /dev/fuse
// descriptor (the kernel hands each request to one waiting reader). libfuse's
// own multithreaded loop starts and stops threads as load changes and loses
// most of the transport's speed on small requests; this keeps every worker
// alive and its buffer allocated. The calling thread is one of the workers and
// the only one that takes the termination signals, so a signal wakes it; it
// then unmounts, which ends the other workers' reads.
}  // namespace

bool RequestKillsSuidgid() { return t_kill_suidgid; }

bool CreatesUnnamed() { return t_unnamed; }

const char* ActiveTransport() {
  FuseRing* ring = g_ring.load();
  if (ring && ring->active()) g_ring_used.store(true);
  return g_ring_used.load() ? "uring" : "dev";
}

void RunWorkers(fuse_session* se, unsigned count, RequestStats* stats, Transport transport) {
  // The same descriptor, with its replies passed through WriteReply.
  static const fuse_custom_io kIo = {WriteReply, ReadRequest, nullptr, nullptr};
  if (fuse_session_custom_io(se, &kIo, fuse_session_fd(se)) != 0) {
    spdlog::warn("cannot hook the FUSE replies; buffered writes will ask for security.capability each");
    transport = Transport::kDev;
  }
  std::unique_ptr<FuseRing> ring;
  if (transport == Transport::kUring) {
    ring = std::make_unique<FuseRing>(fuse_session_fd(se), kRequestBuffer - 4096,
                                      [se, stats](fuse_buf& buf) { Serve(se, buf, stats); });
    g_ring.store(ring.get());
  }
  // SIGUSR1 interrupts a worker's read of /dev/fuse (or a ring thread's wait)
  // at shutdown (see below); without SA_RESTART the call returns EINTR and the
  // worker sees the exit.
  struct sigaction kick {};
  kick.sa_handler = [](int) {};
  sigemptyset(&kick.sa_mask);
  sigaction(SIGUSR1, &kick, nullptr);

  sigset_t blocked, old;
  sigemptyset(&blocked);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaddset(&blocked, sig);
  pthread_sigmask(SIG_BLOCK, &blocked, &old);
  std::atomic<unsigned> running{0};
  std::vector<std::thread> workers;
  for (unsigned i = 1; i < std::max(count, 1u); ++i) {
    ++running;
    workers.emplace_back([se, stats, &running] {
      Work(se, stats);
      --running;
    });
  }
  // The ring threads: as many as the workers, and at least one per queue,
  // since the kernel uses the ring only once every queue has an entry.
  if (ring) {
    const unsigned queues = FuseRing::Queues();
    for (unsigned i = 0; i < std::max(count, queues); ++i) {
      ++running;
      workers.emplace_back([&ring, &running, qid = i % queues] {
        ring->run(qid);
        --running;
      });
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  Work(se, stats);
  fuse_session_exit(se);
  if (ring) ring->stop();
  fuse_session_unmount(se);
  // After an unmount by the user every read fails with ENODEV. After a signal
  // the unmount is lazy: while a process keeps a file open the connection
  // lives on and the other workers stay blocked in read, so they are kicked
  // (again and again: a kick can land just before a worker starts to read).
  while (running.load() > 0) {
    for (std::thread& t : workers) pthread_kill(t.native_handle(), SIGUSR1);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (std::thread& t : workers) t.join();
  if (ring && ring->active()) g_ring_used.store(true);
  g_ring.store(nullptr);
}

}  // namespace stripefs::fs
