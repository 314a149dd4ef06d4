// SPDX-License-Identifier: Apache-2.0
#include "api/channel_io.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>
#include <cstring>
#include <vector>

#include "api/object_channel.h"
#include "meta/etcd_kv_store.h"

namespace stripefs::api {

std::string DefaultChannelSocket(const std::string& meta_dir) {
  return meta::DefaultStateDir(meta_dir) + "/" + kChannelSocketName;
}

namespace channel {

bool SendAll(int fd, std::span<const std::span<const char>> parts, int passed_fd) {
  std::vector<iovec> iov;
  for (auto p : parts) {
    if (!p.empty()) iov.push_back({const_cast<char*>(p.data()), p.size()});
  }
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  size_t i = 0;
  while (i < iov.size()) {
    msghdr msg = {};
    msg.msg_iov = &iov[i];
    msg.msg_iovlen = iov.size() - i;
    if (passed_fd >= 0) {  // with the first bytes only
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      memcpy(CMSG_DATA(c), &passed_fd, sizeof(int));
    }
    ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    passed_fd = -1;
    for (size_t left = n; left > 0;) {  // skip what went
      const size_t step = std::min(left, iov[i].iov_len);
      iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + step;
      iov[i].iov_len -= step;
      left -= step;
      if (iov[i].iov_len == 0) ++i;
    }
  }
  return true;
}

bool RecvAll(int fd, std::span<char> out, int* passed_fd) {
  size_t done = 0;
  while (done < out.size()) {
    iovec iov = {out.data() + done, out.size() - done};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      int got;
      memcpy(&got, CMSG_DATA(c), sizeof(int));
      if (passed_fd && *passed_fd < 0) {
        *passed_fd = got;
      } else {
        close(got);  // not asked for: not kept open
      }
    }
    done += n;
  }
  return true;
}

void Publish(std::atomic<uint32_t>& word, uint32_t value, const std::atomic<uint32_t>& sleeps) {
  word.store(value);  // seq_cst, as the sleeper's store to sleeps and load of word: one sees the other
  if (sleeps.load()) syscall(SYS_futex, &word, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

bool AwaitChange(std::atomic<uint32_t>& word, uint32_t value, std::atomic<uint32_t>& sleeps,
                 const std::function<bool()>& give_up) {
  const auto spin_until = std::chrono::steady_clock::now() + kSpin;
  while (word.load(std::memory_order_acquire) == value) {
    if (std::chrono::steady_clock::now() < spin_until) {
      __builtin_ia32_pause();
      continue;
    }
    sleeps.store(1);
    if (word.load() == value) {
      // A futex in memory two processes map: not FUTEX_PRIVATE.
      const timespec slice = {0, std::chrono::nanoseconds(kSleepSlice).count()};
      syscall(SYS_futex, &word, FUTEX_WAIT, value, &slice, nullptr, 0);
    }
    sleeps.store(0);
    if (word.load() == value && give_up()) return false;
  }
  return true;
}

bool Closed(int fd) {
  pollfd p = {fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

Error Region::map_sealed(int fd, size_t size) {
  struct stat st {};
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < size ||
      size == 0) {
    close(fd);
    return {EINVAL, "a region of the channel must be a memfd sealed against shrinking, of at least its size"};
  }
  return map(fd, size);
}

Error Region::map(int fd, size_t size) {
  unmap();
  fd_ = fd;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    unmap();
    return {err, fmt::format("mapping the channel's region of {} bytes: {}", size, strerror(err))};
  }
  data_ = static_cast<char*>(p);
  size_ = size;
  return {};
}

Error Region::create(size_t size) {
  int fd = memfd_create("stripefs-channel", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return {errno, fmt::format("memfd_create for the channel's region: {}", strerror(errno))};
  // Sealed at its size: the daemon maps only a region that cannot shrink
  // under it (a shrunk mapping would fault the daemon, not the client).
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int err = errno;
    close(fd);
    return {err, fmt::format("sizing the channel's region to {} bytes: {}", size, strerror(err))};
  }
  return map(fd, size);
}

void Region::unmap() {
  if (data_) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
}

}  // namespace channel
}  // namespace stripefs::api
