// SPDX-License-Identifier: Apache-2.0
// The client's end of the object channel (api/object_channel.h): an
// ObjectPool whose every call is one request to the mount's daemon.
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "api/channel_io.h"
#include "api/object_channel.h"

namespace stripefs::api {
namespace {

using channel::Reply;
using channel::Request;

// The region's first size; it grows to the largest transfer (a power of two)
// and stays, as the memfd's pages are only touched where data went.
constexpr size_t kFirstRegion = 4 << 20;

class ChannelPool final : public ObjectPool {
 public:
  explicit ChannelPool(int fd) : fd_(fd) {}
  ~ChannelPool() override { close(fd_); }

  // Maps the first region; the daemon checks the protocol's version here.
  Error start() {
    std::lock_guard lock(mu_);
    return grow(kFirstRegion);
  }

  const char* path() const override { return "daemon"; }

  Error put(std::string_view name, std::string_view data, std::string* uri) override {
    std::lock_guard lock(mu_);
    if (Error e = grow(data.size())) return e;
    memcpy(region_.data(), data.data(), data.size());
    Reply rp;
    std::string text;
    if (Error e = call({channel::kPut, 0, 0, 0, data.size()}, name, &rp, &text)) return e;
    if (uri) *uri = std::move(text);
    return {};
  }

  Error append(std::string_view name, std::string_view data) override {
    std::lock_guard lock(mu_);
    if (Error e = grow(data.size())) return e;
    memcpy(region_.data(), data.data(), data.size());
    Reply rp;
    return call({channel::kAppend, 0, 0, 0, data.size()}, name, &rp);
  }

  Error get(std::string_view name, std::string* data) override { return read(name, 0, UINT64_MAX, data); }

  Error read(std::string_view name, uint64_t offset, size_t length, std::string* data) override {
    std::lock_guard lock(mu_);
    Reply rp;
    if (Error e = read_locked(name, offset, length, &rp)) return e;
    data->resize(rp.got);
    memcpy(data->data(), region_.data(), rp.got);
    return {};
  }

  Error read_into(std::string_view name, uint64_t offset, std::span<char> buffer, size_t* got,
                  uint64_t* object_size) override {
    *got = 0;
    std::lock_guard lock(mu_);
    if (Error e = grow(buffer.size())) return e;
    Reply rp;
    if (Error e = read_locked(name, offset, buffer.size(), &rp)) return e;
    memcpy(buffer.data(), region_.data(), rp.got);
    *got = rp.got;
    if (object_size) *object_size = rp.object_size;
    return {};
  }

  Error size(std::string_view name, uint64_t* size) override {
    std::lock_guard lock(mu_);
    Reply rp;
    if (Error e = call({channel::kSize}, name, &rp)) return e;
    *size = rp.object_size;
    return {};
  }

  Error remove(std::string_view name) override {
    std::lock_guard lock(mu_);
    Reply rp;
    return call({channel::kRemove}, name, &rp);
  }

  Error list(std::string_view dir, std::vector<std::string>* names) override {
    std::lock_guard lock(mu_);
    Reply rp;
    std::string text;
    if (Error e = call({channel::kList}, dir, &rp, &text)) return e;
    names->clear();
    for (size_t i = 0; i < text.size();) {
      const size_t end = text.find('\0', i);
      names->push_back(text.substr(i, end - i));
      i = end + 1;
    }
    return {};
  }

  void multi_get(std::span<const std::string> names, std::vector<std::string>* data,
                 std::vector<Error>* errors) override {
    data->resize(names.size());
    errors->resize(names.size());
    for (size_t i = 0; i < names.size(); ++i) (*errors)[i] = get(names[i], &(*data)[i]);
  }

  Error sync() override {
    std::lock_guard lock(mu_);
    Reply rp;
    return call({channel::kSync}, "", &rp);
  }

  Stats stats() const override {
    std::lock_guard lock(mu_);
    Reply rp;
    std::string text;
    Stats s;
    if (!call({channel::kStats}, "", &rp, &text) && text.size() == sizeof(s)) memcpy(&s, text.data(), sizeof(s));
    return s;
  }

 private:
  // Under mu_: up to length bytes from offset into the region (all of them
  // when the object's rest is larger than the region: the region grows and
  // the read is made again, so a get returns one version of the object).
  Error read_locked(std::string_view name, uint64_t offset, uint64_t length, Reply* rp) {
    const uint64_t room = std::min<uint64_t>(length, region_.size());
    if (Error e = call({channel::kRead, 0, offset, room, 0}, name, rp)) return e;
    const uint64_t rest = rp->object_size > offset ? rp->object_size - offset : 0;
    if (rp->got == room && room < length && rest > room) {
      if (Error e = grow(std::min<uint64_t>(length, rest))) return e;
      return call({channel::kRead, 0, offset, std::min<uint64_t>(length, region_.size()), 0}, name, rp);
    }
    return {};
  }

  // Under mu_: a region of at least n bytes, shared with the daemon.
  Error grow(size_t n) {
    if (region_.data() && n <= region_.size()) return {};
    channel::Region bigger;
    if (Error e = bigger.create(std::bit_ceil(std::max(n, kFirstRegion)))) return e;
    Reply rp;
    if (Error e = call({channel::kMap, 0, channel::kVersion, bigger.size(), 0}, "", &rp, nullptr, bigger.fd())) {
      return e;
    }
    swap(region_, bigger);
    return {};
  }

  // Under mu_: one request and its reply; the daemon's error, or EPIPE when it is gone.
  Error call(Request rq, std::string_view name, Reply* rp, std::string* text = nullptr, int passed_fd = -1) const {
    rq.name_len = static_cast<uint32_t>(name.size());
    const std::span<const char> parts[] = {{reinterpret_cast<const char*>(&rq), sizeof(rq)}, name};
    if (!channel::SendAll(fd_, parts, passed_fd) ||
        !channel::RecvAll(fd_, {reinterpret_cast<char*>(rp), sizeof(*rp)})) {
      return gone();
    }
    std::string message;
    std::string& into = rp->code || !text ? message : *text;
    if (rp->text_len > channel::kTextMax) return gone();
    into.resize(rp->text_len);
    if (!channel::RecvAll(fd_, into)) return gone();
    if (rp->code) return {rp->code, std::move(message)};
    return {};
  }

  static Error gone() {
    return {EPIPE, "the mount's daemon closed the object channel (was the pool unmounted?)"};
  }

  const int fd_;
  mutable std::mutex mu_;             // one request at a time on the socket
  mutable channel::Region region_;    // GUARDED_BY(mu_)
};

}  // namespace

std::unique_ptr<ObjectPool> ConnectChannel(const std::string& socket_path, Error* error) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    *error = {ENAMETOOLONG, fmt::format("the object channel's socket path {} is too long", socket_path)};
    return nullptr;
  }
  memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    *error = {errno, fmt::format("no daemon answers on {}: {}", socket_path, strerror(errno))};
    if (fd >= 0) close(fd);
    return nullptr;
  }
  auto pool = std::make_unique<ChannelPool>(fd);
  if (Error e = pool->start()) {
    *error = {e.code, fmt::format("the daemon on {}: {}", socket_path, e.message)};
    return nullptr;
  }
  *error = {};
  return pool;
}

}  // namespace stripefs::api
