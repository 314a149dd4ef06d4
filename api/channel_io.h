// SPDX-License-Identifier: Apache-2.0
// What both ends of the object channel need: whole messages over its socket
// (a request may carry a file descriptor) and the shared region's mapping.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <utility>

#include "api/channel_protocol.h"
#include "stripefs/objects.h"

namespace stripefs::api::channel {

// Sends every byte of each part; false on a broken connection.
bool SendAll(int fd, std::span<const std::span<const char>> parts, int passed_fd = -1);
// Fills out whole; false at the end of the stream or on a broken connection.
// *passed_fd gets a descriptor that came with the bytes (else it stays -1).
bool RecvAll(int fd, std::span<char> out, int* passed_fd = nullptr);

// Sets word to value and wakes the other end if it sleeps on word (sleeps set).
void Publish(std::atomic<uint32_t>& word, uint32_t value, const std::atomic<uint32_t>& sleeps);
// Waits until word is no longer value: polls for kSpin, then sleeps on it
// (with *sleeps set) in slices of kSleepSlice. After each slice, false when
// give_up() says so (the other end went away, or this one stops).
bool AwaitChange(std::atomic<uint32_t>& word, uint32_t value, std::atomic<uint32_t>& sleeps,
                 const std::function<bool()>& give_up);
// True when the other end of socket fd has closed it.
bool Closed(int fd);

// The shared memory of one connection, mapped by each end.
class Region {
 public:
  Region() = default;
  Region(Region&& other) noexcept { swap(*this, other); }
  ~Region() { unmap(); }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  // Maps size bytes of fd, a memfd from the other end, which this region
  // then owns (closed with it): refused unless it is sealed against
  // shrinking and holds size bytes (the daemon's side).
  Error map_sealed(int fd, size_t size);
  // A new memfd of size bytes, mapped (the client's side).
  Error create(size_t size);
  friend void swap(Region& a, Region& b) {
    std::swap(a.fd_, b.fd_);
    std::swap(a.data_, b.data_);
    std::swap(a.size_, b.size_);
  }
  char* data() const { return data_; }
  size_t size() const { return size_; }
  int fd() const { return fd_; }
  Control* control() const { return reinterpret_cast<Control*>(data_); }
  char* payload() const { return data_ + kPayloadOffset; }
  size_t payload_size() const { return size_ > kPayloadOffset ? size_ - kPayloadOffset : 0; }

 private:
  Error map(int fd, size_t size);
  void unmap();
  int fd_ = -1;
  char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace stripefs::api::channel
