// SPDX-License-Identifier: Apache-2.0
// The client's end of the object channel (api/object_channel.h,
// api/channel_protocol.h): an ObjectPool whose every call is one request to
// the mount's daemon, posted in the memory both map.
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "api/channel_io.h"
#include "api/object_channel.h"

namespace stripefs::api {
namespace {

using channel::Reply;
using channel::Request;

// The payload's first size; it grows to the largest transfer (the region a
// power of two) and stays, as the memfd's pages are only touched where data went.
constexpr size_t kFirstPayload = 4 << 20;

class ChannelPool;

// What an I/O buffer knows of its pool, which it may outlive: the pool
// clears it as it closes.
struct BufferOwner {
  std::mutex mu;
  ChannelPool* pool = nullptr;  // GUARDED_BY(mu)
};

class ChannelBuffer final : public IoBuffer {
 public:
  ChannelBuffer(channel::Region region, uint32_t id, std::shared_ptr<BufferOwner> owner)
      : id_(id), owner_(std::move(owner)) {
    swap(region_, region);
  }
  ~ChannelBuffer() override;
  std::span<char> span() override { return {region_.data(), region_.size()}; }

 private:
  channel::Region region_;
  const uint32_t id_;
  const std::shared_ptr<BufferOwner> owner_;
};

class ChannelPool final : public ObjectPool {
 public:
  explicit ChannelPool(int fd) : fd_(fd), owner_(std::make_shared<BufferOwner>()) { owner_->pool = this; }
  ~ChannelPool() override {
    {
      std::lock_guard lock(owner_->mu);  // waits for a buffer telling the daemon it goes
      owner_->pool = nullptr;
    }
    close(fd_);
  }

  // Maps the first region, on the socket; the daemon checks the protocol's version.
  Error start() {
    std::lock_guard lock(mu_);
    channel::Region first;
    if (Error e = first.create(kFirstPayload)) return e;
    new (first.control()) channel::Control();
    Request rq{channel::kMap, 0, channel::kVersion, first.size(), 0};
    const std::span<const char> parts[] = {{reinterpret_cast<const char*>(&rq), sizeof(rq)}};
    Reply rp;
    if (!channel::SendAll(fd_, parts, first.fd()) ||
        !channel::RecvAll(fd_, {reinterpret_cast<char*>(&rp), sizeof(rp)}) || rp.text_len > channel::kMessageMax) {
      return {EACCES, "the daemon closed the connection at once: only root and the user it runs as may use its "
                      "object channel (its log says who was refused)"};
    }
    std::string message(rp.text_len, '\0');
    if (!channel::RecvAll(fd_, message)) return gone();
    if (rp.code) return {rp.code, message};
    swap(region_, first);
    return {};
  }

  const char* path() const override { return "daemon"; }

  Error put(std::string_view name, std::string_view data, std::string* uri) override {
    std::lock_guard lock(mu_);
    if (Error e = grow(data.size())) return e;
    memcpy(region_.payload(), data.data(), data.size());
    Reply rp;
    if (Error e = call({channel::kPut, 0, 0, 0, data.size()}, name, &rp)) return e;
    if (uri) uri->assign(region_.payload(), rp.text_len);
    return {};
  }

  Error append(std::string_view name, std::string_view data) override {
    std::lock_guard lock(mu_);
    if (Error e = grow(data.size())) return e;
    memcpy(region_.payload(), data.data(), data.size());
    Reply rp;
    return call({channel::kAppend, 0, 0, 0, data.size()}, name, &rp);
  }

  Error get(std::string_view name, std::string* data) override { return read(name, 0, UINT64_MAX, data); }

  Error read(std::string_view name, uint64_t offset, size_t length, std::string* data) override {
    std::lock_guard lock(mu_);
    Reply rp;
    if (Error e = read_locked(name, offset, length, &rp)) return e;
    data->resize(rp.got);
    memcpy(data->data(), region_.payload(), rp.got);
    return {};
  }

  Error read_into(std::string_view name, uint64_t offset, std::span<char> buffer, size_t* got,
                  uint64_t* object_size) override {
    *got = 0;
    std::lock_guard lock(mu_);
    if (auto [id, at] = registered(buffer); id) {  // the daemon fills the caller's memory itself
      Reply rp;
      if (Error e = call({channel::kRead, 0, offset, buffer.size(), 0, id, 0, at}, name, &rp)) return e;
      *got = rp.got;
      if (object_size) *object_size = rp.object_size;
      return {};
    }
    if (Error e = grow(buffer.size())) return e;
    Reply rp;
    if (Error e = read_locked(name, offset, buffer.size(), &rp)) return e;
    memcpy(buffer.data(), region_.payload(), rp.got);
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
    Error e = call({channel::kList}, dir, &rp);
    if (e.code == ERANGE && rp.object_size > region_.payload_size()) {  // a long listing: room for it, again
      if (Error grown = grow(rp.object_size)) return grown;
      e = call({channel::kList}, dir, &rp);
    }
    if (e) return e;
    names->clear();
    const std::string_view text(region_.payload(), rp.text_len);
    for (size_t i = 0; i < text.size();) {
      const size_t end = text.find('\0', i);
      names->emplace_back(text.substr(i, end - i));
      i = end + 1;
    }
    return {};
  }

  Error sync() override {
    std::lock_guard lock(mu_);
    Reply rp;
    return call({channel::kSync}, "", &rp);
  }

  std::unique_ptr<IoBuffer> alloc_buffer(size_t size, Error* error) override {
    std::lock_guard lock(mu_);
    channel::Region region;
    Reply rp;
    *error = region.create(size);
    if (!*error) *error = send_fd(channel::kAddBuffer, region.fd(), region.size(), &rp);
    if (*error) return nullptr;
    buffers_[region.data()] = {static_cast<uint32_t>(rp.got), region.size()};
    return std::make_unique<ChannelBuffer>(std::move(region), static_cast<uint32_t>(rp.got), owner_);
  }

  // An I/O buffer going: the daemon unmaps it too.
  void forget_buffer(char* base, uint32_t id) {
    std::lock_guard lock(mu_);
    buffers_.erase(base);
    Reply rp;
    (void)call({channel::kRemoveBuffer, 0, id}, "", &rp);  // a daemon gone has forgotten it already
  }

  Stats stats() const override {
    std::lock_guard lock(mu_);
    Reply rp;
    Stats s;
    if (!call({channel::kStats}, "", &rp) && rp.text_len == sizeof(s)) memcpy(&s, region_.payload(), sizeof(s));
    return s;
  }

 private:
  // Under mu_: up to length bytes from offset into the payload (all of them
  // when the object's rest is larger than the payload: the region grows and
  // the read is made again, so a get returns one version of the object).
  Error read_locked(std::string_view name, uint64_t offset, uint64_t length, Reply* rp) {
    const uint64_t room = std::min<uint64_t>(length, region_.payload_size());
    if (Error e = call({channel::kRead, 0, offset, room, 0}, name, rp)) return e;
    const uint64_t rest = rp->object_size > offset ? rp->object_size - offset : 0;
    if (rp->got == room && room < length && rest > room) {
      if (Error e = grow(std::min<uint64_t>(length, rest))) return e;
      return call({channel::kRead, 0, offset, std::min<uint64_t>(length, region_.payload_size()), 0}, name, rp);
    }
    return {};
  }

  // Under mu_: a payload of at least n bytes, shared with the daemon.
  Error grow(size_t n) {
    if (n <= region_.payload_size()) return {};
    channel::Region bigger;
    if (Error e = bigger.create(std::bit_ceil(channel::kPayloadOffset + n))) return e;
    new (bigger.control()) channel::Control();
    Reply rp;
    if (Error e = send_fd(channel::kMap, bigger.fd(), bigger.size(), &rp)) return e;
    swap(region_, bigger);  // the daemon answered in the old one and moved to this one
    return {};
  }

  // Under mu_: a request that hands the daemon a memfd (kMap, kAddBuffer):
  // the descriptor goes on the socket with one byte, the request as any other.
  Error send_fd(channel::Op op, int fd, uint64_t size, Reply* rp) {
    const char byte = 0;
    const std::span<const char> parts[] = {{&byte, 1}};
    if (!channel::SendAll(fd_, parts, fd)) return gone();
    return call({op, 0, channel::kVersion, size, 0}, "", rp);
  }

  // Under mu_: the I/O buffer that holds all of span, as its id and span's
  // offset in it; id 0 when none does.
  std::pair<uint32_t, uint64_t> registered(std::span<char> span) const {
    auto it = buffers_.upper_bound(span.data());
    if (it == buffers_.begin()) return {0, 0};
    --it;
    const uint64_t at = span.data() - it->first;
    if (at + span.size() > it->second.size) return {0, 0};
    return {it->second.id, at};
  }

  // Under mu_: posts one request and waits for its answer; the daemon's
  // error, or EPIPE when it is gone.
  Error call(Request rq, std::string_view name, Reply* rp) const {
    if (name.size() > channel::kNameMax) {
      return {ENAMETOOLONG, fmt::format("a name of {} bytes is longer than the channel carries", name.size())};
    }
    channel::Control* c = region_.control();
    rq.name_len = static_cast<uint32_t>(name.size());
    c->request = rq;
    memcpy(c->name, name.data(), name.size());
    channel::Publish(c->state, channel::kPosted, c->daemon_sleeps);
    if (!channel::AwaitChange(c->state, channel::kPosted, c->client_sleeps, [this] { return channel::Closed(fd_); })) {
      return gone();
    }
    *rp = c->reply;
    if (rp->code) return {rp->code, std::string(c->message, std::min<uint32_t>(rp->text_len, channel::kMessageMax))};
    return {};
  }

  static Error gone() {
    return {EPIPE, "the mount's daemon closed the object channel (was the pool unmounted?)"};
  }

  const int fd_;
  const std::shared_ptr<BufferOwner> owner_;
  mutable std::mutex mu_;  // one request at a time
  channel::Region region_;  // GUARDED_BY(mu_)
  struct Registered {
    uint32_t id;
    size_t size;
  };
  std::map<char*, Registered> buffers_;  // GUARDED_BY(mu_): the I/O buffers, by where they start
};

ChannelBuffer::~ChannelBuffer() {
  std::lock_guard lock(owner_->mu);
  if (owner_->pool) owner_->pool->forget_buffer(region_.data(), id_);
}

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
    *error = {errno, fmt::format("cannot reach a mount's daemon on {}: {}", socket_path, strerror(errno))};
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
