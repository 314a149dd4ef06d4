// SPDX-License-Identifier: Apache-2.0
// What a pool holds and has left: the room the metadata store has (its
// directory's file system, or the etcd cluster's quota) and the reserve kept
// there for deletes, and the capacity and use of
// the drives and the RAM segment.
#include <fmt/format.h>

#include <algorithm>

#include "engine/pool/pool.h"
#include "meta/etcd_kv_store.h"

namespace stripefs {

Result<Pool::MetadataSpace> Pool::metadata_space() const {
  auto space = kv_->space();
  if (!space.ok()) return Status(space.status().code(), fmt::format("metadata {}: {}", meta_dir_, space.status().message()));
  MetadataSpace m{};
  m.used = space.value().used;
  m.free = space.value().free;
  m.reserve = reserve_for(space.value().size);
  return m;
}

uint64_t Pool::reserve_for(uint64_t metadata_size) const {
  return metadata_reserve_ ? *metadata_reserve_ : std::min<uint64_t>(64ull << 20, metadata_size / 10);
}

Status Pool::check_metadata_room() {
  const int64_t now = meta::NowNs();
  if (now - metadata_checked_ns_.load(std::memory_order_relaxed) > 100'000'000) {
    metadata_checked_ns_.store(now, std::memory_order_relaxed);
    // A store that cannot say (etcd out of reach) keeps the last answer: the
    // write itself then fails with the store's own error.
    if (auto space = kv_->space(); space.ok()) {
      metadata_low_.store(space.value().free < reserve_for(space.value().size), std::memory_order_relaxed);
    }
  }
  if (!metadata_low_.load(std::memory_order_relaxed)) return Status::OK();
  return Status::NoSpace(fmt::format(
      "{} {} is nearly full (less than the reserve kept free for deletes): free space there, or mount "
      "with a smaller -o meta_reserve=SIZE",
      meta::IsEtcdUri(meta_dir_) ? "the etcd cluster (its space quota) of the metadata store"
                                 : "the file system of the metadata directory",
      meta_dir_));
}

uint64_t Pool::ram_capacity() const {
  std::shared_lock lock(config_mu_);
  return config_.ram_bytes();
}

uint64_t Pool::drive_capacity() const {
  std::shared_lock lock(config_mu_);
  uint64_t total = 0;
  for (const auto& seg : config_.segments) {
    if (seg.kind == "drive" && allocators_[seg.id]) total += allocators_[seg.id]->capacity();
  }
  return total;
}

uint64_t Pool::drive_free() const {
  std::shared_lock lock(config_mu_);
  uint64_t total = 0;
  for (const auto& seg : config_.segments) {
    if (seg.kind == "drive" && allocators_[seg.id]) total += allocators_[seg.id]->free_bytes();
  }
  // (Pending frees of ram files count too: small, and gone at the next sync.)
  return total + store_->pending_free_bytes();
}

uint64_t UsableAtReplicas(std::vector<uint64_t> bytes, uint32_t replicas) {
  replicas = std::max(replicas, 1u);
  if (bytes.size() < replicas) return 0;
  std::sort(bytes.begin(), bytes.end(), std::greater<>());
  uint64_t rest = 0;  // the sum of all but the j largest
  for (uint64_t b : bytes) rest += b;
  uint64_t usable = rest / replicas;
  for (uint32_t j = 1; j < replicas; ++j) {
    rest -= bytes[j - 1];
    usable = std::min(usable, rest / (replicas - j));
  }
  return usable;
}

Pool::UsableSpace Pool::usable_space() const {
  std::shared_lock lock(config_mu_);
  std::vector<uint64_t> capacity, free;
  for (const auto& seg : config_.segments) {
    if (seg.kind != "drive" || !allocators_[seg.id]) continue;
    capacity.push_back(allocators_[seg.id]->capacity());
    free.push_back(allocators_[seg.id]->free_bytes() + store_->pending_free_bytes(seg.id));
  }
  const uint32_t r = config_.replicas;
  return {r, UsableAtReplicas(std::move(capacity), r), UsableAtReplicas(std::move(free), r)};
}

Result<std::vector<SegmentUsage>> Pool::usage() {
  std::shared_lock lock(config_mu_);
  std::vector<SegmentUsage> out;
  for (const auto& seg : config_.segments) {
    uint64_t used = 0;
    // Space freed but waiting for the next WAL sync is free to the user: the next allocation that needs it syncs.
    if (seg.kind == "drive" && allocators_[seg.id]) {
      used = seg.capacity - allocators_[seg.id]->free_bytes() - store_->pending_free_bytes(seg.id);
    } else if (seg.kind == "ram") {
      used = store_->cache_stats().bytes;  // what the RAM tier holds: the read cache ...
      if (allocators_[seg.id]) used += seg.capacity - allocators_[seg.id]->free_bytes();  // ... and ram files
    }
    out.push_back({seg.id, seg.kind, seg.path, seg.capacity, used, seg.kind == "drive" && !allocators_[seg.id]});
  }
  return out;
}

}  // namespace stripefs
