// SPDX-License-Identifier: Apache-2.0
// WriteBackBuffer (see write_back.h).
#include "api/write_back.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <vector>

namespace stripefs {

// Room the drives must have beyond everything buffered before a put is
// buffered: one write-through's worth of slack for writers not going
// through the buffer.
constexpr uint64_t kFreeSlack = 64ull << 20;
// Objects stored by one commit in a flush.
constexpr size_t kFlushSlice = 512;

WriteBackBuffer::WriteBackBuffer(ObjectStore* store, std::function<uint64_t()> free_bytes, WriteBackOptions options)
    : store_(store), free_bytes_(std::move(free_bytes)), options_(options) {
  timer_ = std::thread([this] { run(); });
}

WriteBackBuffer::~WriteBackBuffer() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  room_.notify_all();
  timer_.join();
  if (Status s = flush_all(); !s.ok()) {
    spdlog::error("write-back: {} objects could not be stored at close: {}", stats().dirty_objects, s.message());
  }
}

bool WriteBackBuffer::takes(size_t bytes) const {
  return bytes > 0 && bytes <= options_.max_object && bytes <= options_.max_bytes;
}

bool WriteBackBuffer::take(std::shared_ptr<ObjectStore::Object> obj, std::string_view data,
                           std::shared_ptr<const meta::NewEntry> entry) {
  if (!takes(data.size())) return false;
  const uint64_t ino = obj->ino;
  std::unique_lock lock(mu_);
  for (;;) {
    auto it = dirty_.find(ino);
    const uint64_t replaced = it == dirty_.end() ? 0 : it->second.data->size();
    const uint64_t after = dirty_bytes_ - replaced + data.size();
    if (after <= options_.max_bytes) {
      // Every buffered object will need its bytes on each replica. When the
      // drives cannot promise that, what is buffered takes its room first
      // (a flush now), and then the caller writes this put through: a
      // write-through must never take the room of an object already put.
      if (free_bytes_() < after * obj->replicas + kFreeSlack) {
        lock.unlock();
        if (Status s = flush_all(); !s.ok()) spdlog::warn("write-back: flushing a nearly full pool: {}", s.message());
        return false;
      }
      Dirty& d = dirty_[ino];
      d.obj = std::move(obj);
      d.data = std::make_shared<const std::string>(data);
      d.generation = next_generation_++;
      if (entry) d.entry = std::move(entry);  // a later take of an unnamed object keeps its entry
      dirty_bytes_ = after;
      dirty_count_.store(dirty_.size(), std::memory_order_release);
      // The flusher starts before the timer once a whole batch is waiting
      // (or half the byte limit): it stores it on the other core while the
      // caller goes on, instead of leaving it all to the next sync.
      if ((dirty_.size() >= kFlushSlice || after > options_.max_bytes / 2) && !flush_soon_) {
        flush_soon_ = true;
        wake_.notify_one();
      }
      return true;
    }
    // Full: wait for the flusher to make room (back-pressure). After a failed
    // flush the caller writes through instead, and sees the error itself.
    if (flush_failed_ || stop_) return false;
    flush_soon_ = true;
    wake_.notify_one();
    room_.wait(lock);
  }
}

std::optional<uint64_t> WriteBackBuffer::size(uint64_t ino) const {
  if (dirty_count_.load(std::memory_order_acquire) == 0) return std::nullopt;
  std::lock_guard lock(mu_);
  auto it = dirty_.find(ino);
  if (it == dirty_.end()) return std::nullopt;
  return it->second.data->size();
}

Status WriteBackBuffer::flush_locked(std::span<const std::pair<uint64_t, Dirty>> batch) {
  std::vector<ObjectStore::Put> puts;
  puts.reserve(batch.size());
  for (const auto& [ino, d] : batch) puts.push_back({d.obj.get(), d.data->data(), d.data->size(), d.entry.get(), {}});
  store_->replace_many(puts);
  Status first;
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto& [ino, d] = batch[i];
    const Status& s = puts[i].status;
    // kNotFound: the object (or the directory of an unnamed one) was removed
    // after this put; there is nothing left to store it in, and retrying
    // would fail forever.
    if (!s.ok() && s.code() != Code::kNotFound) {
      if (first.ok()) first = s;
      continue;
    }
    auto it = dirty_.find(ino);
    if (it == dirty_.end()) continue;
    if (it->second.generation == d.generation) {
      drop_locked(it);  // not put again meanwhile
    } else {
      it->second.entry.reset();  // put again meanwhile: stored by the next flush, and now named
    }
  }
  return first;
}

void WriteBackBuffer::drop_locked(std::unordered_map<uint64_t, Dirty>::iterator it) {
  dirty_bytes_ -= it->second.data->size();
  dirty_.erase(it);
  dirty_count_.store(dirty_.size(), std::memory_order_release);
  room_.notify_all();
}

Status WriteBackBuffer::flush(uint64_t ino) {
  std::lock_guard flushing(flush_mu_);
  Dirty d;
  {
    std::lock_guard lock(mu_);
    auto it = dirty_.find(ino);
    if (it == dirty_.end()) return Status::OK();
    d = it->second;
  }
  const std::pair<uint64_t, Dirty> one(ino, std::move(d));
  return flush_locked({&one, 1});
}

bool WriteBackBuffer::discard(uint64_t ino) {
  std::lock_guard flushing(flush_mu_);
  std::lock_guard lock(mu_);
  auto it = dirty_.find(ino);
  if (it == dirty_.end()) return false;
  const bool unnamed = it->second.entry != nullptr;
  drop_locked(it);
  return unnamed;
}

std::shared_ptr<const meta::NewEntry> WriteBackBuffer::unnamed(uint64_t ino) const {
  if (dirty_count_.load(std::memory_order_acquire) == 0) return nullptr;
  std::lock_guard lock(mu_);
  auto it = dirty_.find(ino);
  return it == dirty_.end() ? nullptr : it->second.entry;
}

std::vector<std::shared_ptr<const meta::NewEntry>> WriteBackBuffer::unnamed_entries() const {
  std::vector<std::shared_ptr<const meta::NewEntry>> out;
  std::lock_guard lock(mu_);
  for (const auto& [ino, d] : dirty_) {
    if (d.entry) out.push_back(d.entry);
  }
  return out;
}

Status WriteBackBuffer::flush_all() {
  std::lock_guard flushing(flush_mu_);
  std::vector<std::pair<uint64_t, Dirty>> batch;
  {
    std::lock_guard lock(mu_);
    batch.assign(dirty_.begin(), dirty_.end());
  }
  Status first;
  // In slices: a slice's objects stay locked, and the namespace waits for its
  // commit, only as long as one slice takes.
  for (size_t at = 0; at < batch.size(); at += kFlushSlice) {
    const size_t n = std::min(kFlushSlice, batch.size() - at);
    Status s = flush_locked(std::span(batch).subspan(at, n));
    if (!s.ok() && first.ok()) first = s;
  }
  std::lock_guard lock(mu_);
  flush_failed_ = !first.ok();
  room_.notify_all();  // writers waiting for room write through if this failed
  return first;
}

WriteBackStats WriteBackBuffer::stats() const {
  std::lock_guard lock(mu_);
  return {dirty_bytes_, dirty_.size()};
}

void WriteBackBuffer::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::milliseconds(options_.interval_ms), [this] { return stop_ || flush_soon_; });
    flush_soon_ = false;
    if (stop_ || dirty_.empty()) continue;
    lock.unlock();
    if (Status s = flush_all(); !s.ok()) {
      spdlog::warn("write-back: flushing on the timer: {} (kept in memory; the next flush tries again)", s.message());
    }
    lock.lock();
  }
}

}  // namespace stripefs
