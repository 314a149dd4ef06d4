// SPDX-License-Identifier: Apache-2.0
// The daemon's end of the object channel (api/object_channel.h,
// api/channel_protocol.h).
#include <fmt/format.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>

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
    stopping_ = true;  // each connection's thread sees it within a sleep slice
    {
      std::lock_guard lock(mu_);
      for (Connection& c : connections_) shutdown(c.fd, SHUT_RDWR);  // and its client sees the end
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
        shutdown(c.fd, SHUT_RDWR);  // the client sees the end now; the descriptor goes when reaped
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

  // A new region from the memfd that came on the socket with rq.
  static Error map_region(const Request& rq, int passed_fd, channel::Region* region) {
    if (passed_fd < 0) return {EINVAL, "the channel's region came without its memfd"};
    if (rq.offset != channel::kVersion) {
      close(passed_fd);
      return {EPROTO, fmt::format("the client speaks version {} of the object channel, the daemon {}: use the "
                                  "same stripefs release for both",
                                  rq.offset, channel::kVersion)};
    }
    if (rq.length <= channel::kPayloadOffset) {
      close(passed_fd);
      return {EINVAL, "the region has no room past its control block"};
    }
    return region->map_sealed(passed_fd, rq.length);
  }

  void serve(int fd) {
    channel::Region region;
    {  // The first region, on the socket.
      Request rq;
      int passed_fd = -1;
      if (!channel::RecvAll(fd, {reinterpret_cast<char*>(&rq), sizeof(rq)}, &passed_fd)) return;
      Error e = rq.op == channel::kMap ? map_region(rq, passed_fd, &region)
                                       : Error{EINVAL, "the first request must map the region"};
      if (passed_fd >= 0 && rq.op != channel::kMap) close(passed_fd);
      Reply rp;
      rp.code = e.code;
      rp.text_len = static_cast<uint32_t>(e.message.size());
      const std::span<const char> parts[] = {{reinterpret_cast<const char*>(&rp), sizeof(rp)}, e.message};
      if (!channel::SendAll(fd, parts) || e) return;
    }
    const auto give_up = [&] { return stopping_.load() || channel::Closed(fd); };
    std::string name;
    Buffers buffers;
    uint32_t last_buffer = 0;  // ids are the connection's own
    for (;;) {
      channel::Control* c = region.control();
      if (!channel::AwaitChange(c->state, channel::kAnswered, c->daemon_sleeps, give_up)) return;
      const Request rq = c->request;
      Reply rp;
      channel::Region bigger;
      Error e;
      if (rq.name_len > channel::kNameMax) {
        e = {ENAMETOOLONG, "the name is longer than the channel carries"};
      } else if (rq.op == channel::kMap || rq.op == channel::kAddBuffer) {  // its memfd comes on the socket, with one byte
        char byte;
        int passed_fd = -1;
        if (!channel::RecvAll(fd, {&byte, 1}, &passed_fd)) return;
        if (rq.op == channel::kMap) {
          e = map_region(rq, passed_fd, &bigger);
        } else {
          e = buffers[++last_buffer].map_sealed(passed_fd, rq.length);
          if (e) buffers.erase(last_buffer);
          rp.got = last_buffer;
        }
      } else if (rq.op == channel::kRemoveBuffer) {
        buffers.erase(static_cast<uint32_t>(rq.offset));
      } else {
        name.assign(c->name, rq.name_len);
        e = handle(rq, name, region, buffers, &rp);
      }
      if (e) {
        rp = {};
        rp.code = e.code;
        rp.text_len = static_cast<uint32_t>(std::min<size_t>(e.message.size(), channel::kMessageMax));
        memcpy(c->message, e.message.data(), rp.text_len);
      }
      c->reply = rp;
      channel::Publish(c->state, channel::kAnswered, c->client_sleeps);
      if (bigger.data()) swap(region, bigger);  // the client moves to it once answered, as this end does
    }
  }

  // A connection's I/O buffers by id.
  using Buffers = std::unordered_map<uint32_t, channel::Region>;

  // One request on the region's payload; text (a URI, a listing, stats) goes there too.
  Error handle(const Request& rq, const std::string& name, const channel::Region& region, const Buffers& buffers,
               Reply* rp) {
    char* const payload = region.payload();
    const size_t room = region.payload_size();
    auto text = [&](std::string_view t) -> Error {
      if (t.size() > room) {
        rp->object_size = t.size();
        return {ERANGE, fmt::format("the answer needs {} bytes", t.size())};
      }
      memcpy(payload, t.data(), t.size());
      rp->text_len = static_cast<uint32_t>(t.size());
      return {};
    };
    switch (rq.op) {
      case channel::kPut:
      case channel::kAppend: {
        if (rq.data_len > room) return {EINVAL, "the data is larger than the region"};
        const std::string_view data(payload, rq.data_len);
        if (rq.op == channel::kAppend) return pool_->append(name, data);
        std::string uri;
        if (Error e = pool_->put(name, data, &uri)) return e;
        return text(uri);
      }
      case channel::kRead: {
        std::span<char> into(payload, std::min<uint64_t>(rq.length, room));
        if (rq.buffer) {  // straight into the caller's I/O buffer
          auto it = buffers.find(rq.buffer);
          if (it == buffers.end() || rq.buffer_offset > it->second.size()) {
            return {EINVAL, "no such I/O buffer (or an offset past its end)"};
          }
          into = {it->second.data() + rq.buffer_offset,
                  std::min<uint64_t>(rq.length, it->second.size() - rq.buffer_offset)};
        }
        size_t got = 0;
        Error e = pool_->read_into(name, rq.offset, into, &got, &rp->object_size);
        rp->got = got;
        return e;
      }
      case channel::kSize: return pool_->size(name, &rp->object_size);
      case channel::kRemove: return pool_->remove(name);
      case channel::kList: {
        std::vector<std::string> names;
        if (Error e = pool_->list(name, &names)) return e;
        std::string joined;
        for (const auto& n : names) (joined += n) += '\0';
        return text(joined);
      }
      case channel::kSync: return pool_->sync();
      case channel::kStats: {
        const Stats s = pool_->stats();
        return text({reinterpret_cast<const char*>(&s), sizeof(s)});
      }
    }
    return {EINVAL, fmt::format("unknown request {}", rq.op)};
  }

  const std::string path_;
  const int listen_fd_, stop_fd_;
  std::unique_ptr<ObjectPool> pool_;
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};
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
  // 0600: only this user (and root) may connect. (Not through umask, which
  // is the whole process's; the peer check in admitted() covers the moment
  // before the chmod.)
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || chmod(socket_path.c_str(), 0600) != 0 ||
      listen(fd, 64) != 0) {
    const int err = errno;
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
