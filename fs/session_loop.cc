// SPDX-License-Identifier: Apache-2.0
// The FUSE session loop: see session_loop.h.
#include "fs/session_loop.h"

#include <linux/fuse.h>  // the request header sizes, to align write data
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "fs/request_stats.h"

namespace stripefs::fs {
namespace {

// Where a worker's request buffer starts relative to a 4 KiB boundary: a
// WRITE request's data then lands aligned, so the object store can hand it to
// O_DIRECT as it is instead of copying it first.
constexpr size_t kWriteHeader = sizeof(fuse_in_header) + sizeof(fuse_write_in);
// libfuse reads up to 256 pages of payload plus a 4 KiB header area per request.
constexpr size_t kRequestBuffer = (256u << 12) + 4096;

// The write_flags of the WRITE request this thread is serving, 0 for any
// other request (see WriteKillsSuidgid).
thread_local uint32_t t_write_flags = 0;

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

uint32_t WriteFlags(const fuse_buf& buf) {
  const auto* in = static_cast<const fuse_in_header*>(buf.mem);
  if (in->opcode != FUSE_WRITE) return 0;
  return static_cast<const fuse_write_in*>(static_cast<const void*>(in + 1))->write_flags;
}

// The payload a READ or WRITE request moves, from its header.
uint64_t PayloadBytes(const fuse_buf& buf) {
  const auto* in = static_cast<const fuse_in_header*>(buf.mem);
  if (in->opcode == FUSE_READ) return static_cast<const fuse_read_in*>(static_cast<const void*>(in + 1))->size;
  if (in->opcode == FUSE_WRITE) return static_cast<const fuse_write_in*>(static_cast<const void*>(in + 1))->size;
  return 0;
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
    t_write_flags = WriteFlags(buf);
    t_unnamed = TakeTmpfile(buf);
    if (!stats) {
      fuse_session_process_buf(se, &buf);
      continue;
    }
    const uint32_t opcode = static_cast<const fuse_in_header*>(buf.mem)->opcode;
    const uint64_t bytes = PayloadBytes(buf);
    const auto start = std::chrono::steady_clock::now();
    fuse_session_process_buf(se, &buf);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
    stats->record(opcode, bytes, static_cast<uint64_t>(ns.count()));
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

bool WriteKillsSuidgid() { return (t_write_flags & FUSE_WRITE_KILL_SUIDGID) != 0; }

bool CreatesUnnamed() { return t_unnamed; }

void RunWorkers(fuse_session* se, unsigned count, RequestStats* stats) {
  // SIGUSR1 interrupts a worker's read of /dev/fuse at shutdown (see below);
  // without SA_RESTART the read returns EINTR and the worker sees the exit.
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
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  Work(se, stats);
  fuse_session_exit(se);
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
}

}  // namespace stripefs::fs
