// SPDX-License-Identifier: Apache-2.0
// A 4 KiB-aligned byte buffer, as O_DIRECT needs.
#pragma once

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace stripefs {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 4096;

  AlignedBuffer() = default;
  // n bytes, zeroed.
  explicit AlignedBuffer(size_t n) {
    reserve(n);
    if (n) std::memset(data_, 0, n);
    size_ = n;
  }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), capacity_(std::exchange(o.capacity_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(capacity_, o.capacity_);
    return *this;
  }
  ~AlignedBuffer() { std::free(data_); }

  // Room for n bytes; the contents are not kept when it grows. Reused
  // buffers (one per thread on the read path) keep their pages, so a read
  // does not pay for page faults on fresh memory.
  void reserve(size_t n) {
    if (n <= capacity_) return;
    void* p = nullptr;
    if (posix_memalign(&p, kAlignment, n) != 0) throw std::bad_alloc();
    std::free(data_);
    data_ = static_cast<char*>(p);
    capacity_ = n;
  }
  // n bytes whose contents are left as they are: for callers that write all of them.
  void resize_uninitialized(size_t n) {
    reserve(n);
    size_ = n;
  }
  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace stripefs
