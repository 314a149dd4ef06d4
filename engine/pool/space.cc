// SPDX-License-Identifier: Apache-2.0
// What a pool holds and has left: the room on the metadata directory's file
// system and the reserve kept there for deletes, and the capacity and use of
// the drives and the RAM segment.
#include <fmt/format.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/pool/pool.h"

namespace stripefs {

Result<Pool::MetadataSpace> Pool::metadata_space() const {
  struct statvfs st;
  if (statvfs(meta_dir_.c_str(), &st) != 0) {
    return Status::IOError(fmt::format("cannot stat the file system of {}: {}", meta_dir_, strerror(errno)));
  }
  MetadataSpace m{};
  m.free = uint64_t{st.f_bavail} * st.f_frsize;
  const uint64_t size = uint64_t{st.f_blocks} * st.f_frsize;
  m.reserve = metadata_reserve_ ? *metadata_reserve_ : std::min<uint64_t>(64ull << 20, size / 10);
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(meta_dir_, ec)) {
    std::error_code size_ec;
    if (f.is_regular_file(size_ec)) m.used += f.file_size(size_ec);
  }
  return m;
}

Status Pool::check_metadata_room() {
  const int64_t now = meta::NowNs();
  if (now - metadata_checked_ns_.load(std::memory_order_relaxed) > 100'000'000) {
    metadata_checked_ns_.store(now, std::memory_order_relaxed);
    struct statvfs st;
    if (statvfs(meta_dir_.c_str(), &st) == 0) {
      const uint64_t free = uint64_t{st.f_bavail} * st.f_frsize;
      const uint64_t reserve = metadata_reserve_ ? *metadata_reserve_
                                                 : std::min<uint64_t>(64ull << 20, uint64_t{st.f_blocks} * st.f_frsize / 10);
      metadata_low_.store(free < reserve, std::memory_order_relaxed);
    }
  }
  if (!metadata_low_.load(std::memory_order_relaxed)) return Status::OK();
  return Status::NoSpace(fmt::format(
      "the file system of the metadata directory {} is nearly full (less than the reserve kept free for "
      "deletes): free space there, or mount with a smaller -o meta_reserve=SIZE",
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
