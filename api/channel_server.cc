// SPDX-License-Identifier: Apache-2.0
// The daemon's end of the object channel (api/object_channel.h).
#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>

#include "api/channel_io.h"
#include "api/object_channel.h"

namespace stripefs::api {
namespace {

using channel::Reply;
using channel::Request;

class Server final : public ChannelServer {
 public:
  Server(std::string path, int listen_fd, int stop_fd, std::unique_ptr<ObjectPool> pool)
      : path_(std::move(path)), listen_fd_(listen_fd), stop_fd_(stop_fd), pool_(std::move(pool)) {
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~Server() override {
    const uint64_t one = 1;
    (void)!write(stop_fd_, &one, sizeof(one));
    acceptor_.join();
    {
      std::lock_guard lock(mu_);
      for (Connection& c : connections_) shutdown(c.fd, SHUT_RDWR);  // wakes its thread's recv
    }
    for (Connection& c : connections_) c.thread.join();
    for (Connection& c : connections_) close(c.fd);
    close(listen_fd_);
    close(stop_fd_);
    unlink(path_.c_str());
  }

 private:
  struct Connection {
    int fd = -1;
    std::thread thread;
    bool done = false;  // GUARDED_BY(mu_)
  };

  void accept_loop() {
    for (;;) {
      pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        spdlog::error("object channel: poll: {}", strerror(errno));
        return;
      }
      if (fds[1].revents) return;
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      if (!admitted(fd)) {
        close(fd);
        continue;
      }
      std::lock_guard lock(mu_);
      reap_finished();
      Connection& c = connections_.emplace_back();
      c.fd = fd;
      c.thread = std::thread([this, &c] {
        serve(c.fd);
        std::lock_guard done(mu_);
        c.done = true;
      });
    }
  }

  // Root, or the user the daemon runs as: whoever may open the pool's directory.
  static bool admitted(int fd) {
    ucred peer{};
    socklen_t len = sizeof(peer);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) return false;
    if (peer.uid == 0 || peer.uid == getuid()) return true;
    spdlog::warn("object channel: refused pid {} of uid {} (only root and uid {} may connect)", peer.pid, peer.uid,
                 getuid());
    return false;
  }

  // Under mu_: joins the threads of connections that ended.
  void reap_finished() {
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (!it->done) {
        ++it;
        continue;
      }
      it->thread.join();
      close(it->fd);
      it = connections_.erase(it);
    }
  }

  void serve(int fd) {
    channel::Region region;
    std::string name, text;
    for (;;) {
      Request rq;
      int passed_fd = -1;
      if (!channel::RecvAll(fd, {reinterpret_cast<char*>(&rq), sizeof(rq)}, &passed_fd)) break;
      if (rq.name_len > channel::kTextMax) break;  // not a client of ours
      name.resize(rq.name_len);
      if (!channel::RecvAll(fd, name)) break;
      Reply rp;
      text.clear();
      Error e = handle(rq, name, passed_fd, region, &rp, &text);
      if (e) {
        rp.code = e.code;
        text = std::move(e.message);
      }
      rp.text_len = static_cast<uint32_t>(text.size());
      const std::span<const char> parts[] = {{reinterpret_cast<const char*>(&rp), sizeof(rp)}, text};
      if (!channel::SendAll(fd, parts)) break;
    }
  }

  Error handle(const Request& rq, const std::string& name, int passed_fd, channel::Region& region, Reply* rp,
               std::string* text) {
    if (passed_fd >= 0 && rq.op != channel::kMap) close(passed_fd);
    if (rq.op == channel::kMap) {
      if (passed_fd < 0) return {EINVAL, "the channel's region came without its memfd"};
      if (rq.offset != channel::kVersion) {
        close(passed_fd);
        return {EPROTO, fmt::format("the client speaks version {} of the object channel, the daemon {}: use the "
                                    "same stripefs release for both",
                                    rq.offset, channel::kVersion)};
      }
      return region.map_sealed(passed_fd, rq.length);
    }
    if (!region.data() && rq.op != channel::kSync && rq.op != channel::kStats) {
      return {EINVAL, "no region: the client maps one first"};
    }
    switch (rq.op) {
      case channel::kPut:
      case channel::kAppend: {
        if (rq.data_len > region.size()) return {EINVAL, "the data is larger than the region"};
        const std::string_view data(region.data(), rq.data_len);
        return rq.op == channel::kPut ? pool_->put(name, data, text) : pool_->append(name, data);
      }
      case channel::kRead: {
        const size_t room = std::min<uint64_t>(rq.length, region.size());
        size_t got = 0;
        Error e = pool_->read_into(name, rq.offset, {region.data(), room}, &got, &rp->object_size);
        rp->got = got;
        return e;
      }
      case channel::kSize: return pool_->size(name, &rp->object_size);
      case channel::kRemove: return pool_->remove(name);
      case channel::kList: {
        std::vector<std::string> names;
        if (Error e = pool_->list(name, &names)) return e;
        for (const auto& n : names) (*text += n) += '\0';
        return {};
      }
      case channel::kSync: return pool_->sync();
      case channel::kStats: {
        const Stats s = pool_->stats();
        text->assign(reinterpret_cast<const char*>(&s), sizeof(s));
        return {};
      }
    }
    return {EINVAL, fmt::format("unknown request {}", rq.op)};
  }

  const std::string path_;
  const int listen_fd_, stop_fd_;
  std::unique_ptr<ObjectPool> pool_;
  std::thread acceptor_;
  std::mutex mu_;
  std::list<Connection> connections_;  // GUARDED_BY(mu_)
};

}  // namespace

Result<std::unique_ptr<ChannelServer>> ChannelServer::Start(const std::string& socket_path,
                                                            std::unique_ptr<ObjectPool> pool) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    return Status::Invalid(fmt::format("the object channel's socket path {} is longer than {} bytes", socket_path,
                                       sizeof(addr.sun_path) - 1));
  }
  memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IOError(fmt::format("object channel: socket: {}", strerror(errno)));
  // A socket file left by a daemon that was killed: no one listens there
  // (this daemon holds the pool, so no other can).
  unlink(socket_path.c_str());
  const mode_t old_mask = umask(0077);  // created 0600: only this user (and root) may connect
  const int bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int bind_errno = errno;
  umask(old_mask);
  if (bound != 0 || listen(fd, 64) != 0) {
    const int err = bound != 0 ? bind_errno : errno;
    close(fd);
    return Status::IOError(fmt::format("object channel: cannot listen on {}: {}", socket_path, strerror(err)));
  }
  const int stop_fd = eventfd(0, EFD_CLOEXEC);
  if (stop_fd < 0) {
    close(fd);
    unlink(socket_path.c_str());
    return Status::IOError(fmt::format("object channel: eventfd: {}", strerror(errno)));
  }
  return std::unique_ptr<ChannelServer>(new Server(socket_path, fd, stop_fd, std::move(pool)));
}

}  // namespace stripefs::api
