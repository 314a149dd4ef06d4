// SPDX-License-Identifier: Apache-2.0
// The segment allocators and their registry by name. Best fit: free runs kept
// in two ordered indexes (by offset for coalescing, by length for best fit).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <map>
#include <memory_resource>
#include <mutex>
#include <set>

#include "engine/placement/allocator.h"

namespace stripefs {
namespace {

class BestFitAllocator final : public SegmentAllocator {
 public:
  BestFitAllocator(uint64_t capacity, uint64_t unit)
      : capacity_(capacity - capacity % unit), unit_(unit), by_len_(&nodes_), by_off_(&nodes_) {
    if (capacity_ > 0) insert(0, capacity_);
  }

  Result<uint64_t> allocate(uint64_t len) override {
    if (len == 0 || len % unit_ != 0) return Status::Invalid("allocation length not a multiple of the unit");
    std::lock_guard lock(mu_);
    return take_best_fit(len);
  }

  Status allocate_spread(uint64_t len, std::vector<meta::Extent>* out) override {
    if (len == 0 || len % unit_ != 0) return Status::Invalid("allocation length not a multiple of the unit");
    std::lock_guard lock(mu_);
    if (free_.load(std::memory_order_relaxed) < len) return Status::NoSpace("segment full");
    // While no run is long enough: the longest, whole. Then the best fit for the rest.
    while (len > 0 && by_len_.rbegin()->first < len) {
      auto [run_len, off] = *by_len_.rbegin();
      erase(off, run_len);
      out->push_back({off, run_len});
      len -= run_len;
    }
    if (len > 0) out->push_back({take_best_fit(len).value(), len});
    return Status::OK();
  }

  void release(uint64_t offset, uint64_t len) override {
    std::lock_guard lock(mu_);
    uint64_t start = offset, end = offset + len;
    auto next = by_off_.lower_bound(offset);
    if (next != by_off_.end() && next->first == end) {  // merge with the run after
      end += next->second->first;
      by_len_.erase(next->second);
      next = by_off_.erase(next);
    }
    if (next != by_off_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second->first == start) {  // merge into the run before: grow it in place
        auto len_node = by_len_.extract(prev->second);
        len_node.value().first = end - prev->first;
        prev->second = by_len_.insert(std::move(len_node)).position;
        free_.fetch_add(len, std::memory_order_relaxed);
        return;
      }
    }
    auto li = by_len_.insert({end - start, start}).first;
    by_off_.emplace_hint(next, start, li);
    free_.fetch_add(len, std::memory_order_relaxed);
  }

  Status mark_used(uint64_t offset, uint64_t len) override {
    std::lock_guard lock(mu_);
    if (offset % unit_ || len % unit_ || len == 0 || offset > capacity_ || len > capacity_ - offset) {
      return Status::Corruption(fmt::format("extent {}+{} lies outside the segment (capacity {})",
                                            offset, len, capacity_));
    }
    if (!carve(offset, len)) {
      return Status::Corruption(fmt::format("extent {}+{} overlaps another extent", offset, len));
    }
    return Status::OK();
  }

  bool try_extend(uint64_t offset, uint64_t len, uint64_t new_len) override {
    if (new_len <= len) return true;
    if (offset > capacity_ || new_len > capacity_ - offset) return false;
    std::lock_guard lock(mu_);
    return carve(offset + len, new_len - len);
  }

  uint64_t capacity() const override { return capacity_; }
  uint64_t free_bytes() const override { return free_.load(std::memory_order_relaxed); }
  uint64_t unit() const override { return unit_; }
  uint64_t largest_free_run() const override {
    std::lock_guard lock(mu_);
    return by_len_.empty() ? 0 : by_len_.rbegin()->first;
  }
  double fragmentation() const override {
    std::lock_guard lock(mu_);
    uint64_t free = free_.load(std::memory_order_relaxed);
    if (free == 0 || by_len_.empty()) return 0.0;
    return 1.0 - static_cast<double>(by_len_.rbegin()->first) / static_cast<double>(free);
  }
  void for_each_free(const std::function<void(uint64_t, uint64_t)>& fn) const override {
    std::lock_guard lock(mu_);
    for (const auto& [off, run] : by_off_) fn(off, run->first);
  }

 private:
  // REQUIRES: mu_ held.
  Result<uint64_t> take_best_fit(uint64_t len) {
    auto best = by_len_.lower_bound({len, 0});
    if (best == by_len_.end()) return Status::NoSpace("segment full");
    auto [run_len, off] = *best;
    auto run = by_off_.find(off);
    if (run_len == len) {  // an exact fit: the run goes away
      by_len_.erase(best);
      by_off_.erase(run);
    } else {  // the run keeps its tail; both tree nodes are reused
      auto len_node = by_len_.extract(best);
      len_node.value() = {run_len - len, off + len};
      auto moved = by_len_.insert(std::move(len_node)).position;
      auto hint = std::next(run);
      auto off_node = by_off_.extract(run);
      off_node.key() = off + len;
      off_node.mapped() = moved;
      by_off_.insert(hint, std::move(off_node));
    }
    free_.fetch_sub(len, std::memory_order_relaxed);
    return off;
  }
  // Removes [offset, offset+len) from the free runs if one run contains all of it.
  bool carve(uint64_t offset, uint64_t len) {
    auto it = by_off_.upper_bound(offset);
    if (it == by_off_.begin()) return false;
    --it;
    uint64_t run_off = it->first, run_len = it->second->first;
    if (offset + len > run_off + run_len) return false;
    erase(run_off, run_len);
    if (offset > run_off) insert(run_off, offset - run_off);
    if (offset + len < run_off + run_len) insert(offset + len, run_off + run_len - offset - len);
    return true;
  }
  void insert(uint64_t off, uint64_t len) {
    by_off_[off] = by_len_.insert({len, off}).first;
    free_.fetch_add(len, std::memory_order_relaxed);
  }
  void erase(uint64_t off, uint64_t len) {
    auto it = by_off_.find(off);
    by_len_.erase(it->second);
    by_off_.erase(it);
    free_.fetch_sub(len, std::memory_order_relaxed);
  }

  const uint64_t capacity_;
  const uint64_t unit_;
  mutable std::mutex mu_;
  // Tree nodes come from a pool, not malloc: allocate and release each add and
  // remove a few nodes, and this is the hot path of placement.
  // Each offset entry points at its run's (length, offset) entry, so merging
  // and splitting runs never search the length index a second time.
  using LengthIndex = std::pmr::set<std::pair<uint64_t, uint64_t>>;
  std::pmr::unsynchronized_pool_resource nodes_;                // GUARDED_BY(mu_)
  LengthIndex by_len_;                                          // GUARDED_BY(mu_): (length, offset)
  std::pmr::map<uint64_t, LengthIndex::iterator> by_off_;       // GUARDED_BY(mu_): offset -> by_len_ entry
  std::atomic<uint64_t> free_{0};  // written under mu_, read without it (placement looks at it)
};

}  // namespace

std::unique_ptr<SegmentAllocator> NewBestFitAllocator(uint64_t capacity, uint64_t unit) {
  return std::make_unique<BestFitAllocator>(capacity, unit);
}

namespace {

struct RegisteredAllocator {
  std::string_view name;
  std::unique_ptr<SegmentAllocator> (*make)(uint64_t capacity, uint64_t unit);
};

// Every allocator, once: MakeAllocator() and AllocatorNames() read only this.
constexpr RegisteredAllocator kRegistry[] = {
    {kBestFitAllocator, NewBestFitAllocator},
};

}  // namespace

const std::vector<std::string>& AllocatorNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const RegisteredAllocator& r : kRegistry) names.emplace_back(r.name);
    return names;
  }();
  return kNames;
}

Result<std::unique_ptr<SegmentAllocator>> MakeAllocator(std::string_view name, uint64_t capacity, uint64_t unit) {
  for (const RegisteredAllocator& r : kRegistry) {
    if (r.name == name) return r.make(capacity, unit);
  }
  return Status::Invalid(
      fmt::format("unknown allocator '{}' (choose one of: {})", name, fmt::join(AllocatorNames(), ", ")));
}

}  // namespace stripefs
