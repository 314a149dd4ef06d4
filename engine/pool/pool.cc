// SPDX-License-Identifier: Apache-2.0
// Pool: opening a pool (its configuration, drives with their checks, the RAM
// segment, allocators rebuilt from the chunk records) and closing it; paths
// resolved to inodes. Format is in format.cc, adding and replacing drives in
// drives.cc, capacity and the metadata reserve in space.cc, the df and
// placement answers in pool_reports.cc, fsck and scrub in fsck.cc and scrub.cc.
#include "engine/pool/pool.h"
#include "meta/chunk_table.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include "engine/pool/drive_files.h"
#include "meta/etcd_kv_store.h"
#include "engine/pool/superblock.h"

namespace stripefs {

using meta::ChunkRecord;
using meta::InodeRecord;

Result<std::unique_ptr<Pool>> Pool::Open(const std::string& meta_dir, Mode mode, bool degraded) {
  std::error_code ec;
  if (meta::IsEtcdUri(meta_dir)) {
    // The etcd store itself refuses a prefix that holds no pool.
  } else if (!std::filesystem::is_directory(meta_dir, ec)) {
    return Status::NotFound(fmt::format("{} is not a directory (give the pool's --meta directory)", meta_dir));
  } else if (!std::filesystem::exists(std::filesystem::path(meta_dir) / "CURRENT", ec)) {
    return Status::NotFound(fmt::format("{} holds no stripefs pool (format one with `stripefs mkfs`)", meta_dir));
  }
  std::unique_ptr<Pool> pool(new Pool);
  pool->meta_dir_ = meta_dir;
  SFS_ASSIGN_OR_RETURN(pool->kv_, meta::OpenKvStore(meta_dir, mode == Mode::kInspect ? meta::OpenMode::kReadOnly
                                                                                     : meta::OpenMode::kReadWrite));
  std::string raw;
  Status s = pool->kv_->get(meta::ConfigKey(), &raw);
  if (s.code() == Code::kNotFound) return Status::Corruption(fmt::format("{} has no pool configuration", meta_dir));
  SFS_RETURN_IF_ERROR(s);
  SFS_ASSIGN_OR_RETURN(pool->config_, meta::DecodeConfig(raw));
  SFS_ASSIGN_OR_RETURN(pool->ns_, meta::Namespace::Open(pool->kv_.get(), pool->config_.uuid));
  // An inspecting open runs beside the pool's writer (a tool, or a reader
  // mount of an etcd pool), whose changes it must not answer from memory.
  if (mode == Mode::kInspect) pool->ns_->read_through();
  SFS_RETURN_IF_ERROR(pool->open_drives(mode, degraded));
  if (mode == Mode::kMount) SFS_RETURN_IF_ERROR(pool->drop_ram_files());
  if (mode != Mode::kCheck) SFS_RETURN_IF_ERROR(pool->rebuild_allocators());
  std::vector<DriveSlot> slots;
  for (const auto& seg : pool->config_.segments) {
    slots.push_back({seg.id, kDataOffset, pool->allocators_[seg.id].get(), pool->fds_[seg.id] >= 0, seg.kind == "ram"});
  }
  pool->io_ = NewUringBackend(pool->fds_);
  pool->store_ = std::make_unique<ObjectStore>(pool->kv_.get(), pool->ns_.get(), pool->io_.get(), std::move(slots));
  // Deferred writes a crash left go to the drives before anything reads them.
  if (mode != Mode::kInspect) SFS_RETURN_IF_ERROR(pool->store_->replay_deferred());
  if (mode == Mode::kMount) {
    pool->mounted_ = true;
    // Orphans: files unlinked while open when the last daemon stopped.
    SFS_ASSIGN_OR_RETURN(auto orphans, pool->ns_->orphans());
    for (uint64_t ino : orphans) SFS_RETURN_IF_ERROR(pool->store_->reclaim(ino));
    SFS_RETURN_IF_ERROR(pool->store_->sync());
  }
  return pool;
}

Pool::~Pool() {
  if (store_ && mounted_) {
    // Best effort: the daemon's unmount already synced and reported; fsync
    // callers saw any error. Deferred writes left in memory are replayed at
    // the next mount.
    Status applied = store_->apply_deferred();
    (void)applied;
    Status ignored = store_->sync();
    (void)ignored;
  }
  store_.reset();
  io_.reset();
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
  }
}

Status Pool::open_drives(Mode mode, bool degraded) {
  for (const auto& seg : config_.segments) {
    fds_.push_back(-1);
    allocators_.push_back(nullptr);
    if (seg.kind == "ram" && mode == Mode::kMount) {
      SFS_RETURN_IF_ERROR(open_ram_segment(seg));
      continue;
    }
    if (seg.kind != "drive") continue;
    Status s = open_drive(seg, mode);
    if (s.ok()) continue;
    // Only an absent or unreadable drive may be left out: a foreign, reordered
    // or truncated one means the configuration is wrong, not that a drive died.
    bool lost = s.code() == Code::kNotFound || s.code() == Code::kIOError;
    if (!degraded || !lost) {
      if (lost && mode == Mode::kMount) {
        return Status(s.code(), s.message() + " (mount with -o degraded to use the pool without it)");
      }
      return s;
    }
    if (fds_[seg.id] >= 0) close(fds_[seg.id]);
    fds_[seg.id] = -1;
    allocators_[seg.id] = nullptr;
    missing_.push_back(s.message());
  }
  if (missing_.size() == config_.drive_count()) {
    return Status::NotFound("every drive of the pool is missing");
  }
  return Status::OK();
}

Status Pool::open_ram_segment(const meta::SegmentConfig& seg) {
  // Memory with a file descriptor, so the I/O path, the allocator and the
  // placer treat it like a drive; it starts empty at every mount.
  int fd = memfd_create("stripefs-ram", MFD_CLOEXEC);
  if (fd < 0) return Status::IOError(fmt::format("cannot create the RAM segment: {}", strerror(errno)));
  if (ftruncate(fd, static_cast<off_t>(kDataOffset + seg.capacity)) != 0) {
    close(fd);
    return Status::IOError(fmt::format("cannot size the RAM segment to {} bytes: {}", seg.capacity, strerror(errno)));
  }
  fds_[seg.id] = fd;
  SFS_ASSIGN_OR_RETURN(allocators_[seg.id], MakeAllocator(kPoolAllocator, seg.capacity, kDriveAllocationUnit));
  return Status::OK();
}

Status Pool::drop_ram_files() {
  // Each such file has a marker key, so a pool without them pays one empty scan.
  std::set<uint64_t> inos;
  SFS_RETURN_IF_ERROR(kv_->scan(meta::VolatilePrefixAll(), [&](std::string_view k, std::string_view) {
    inos.insert(meta::InoFromKey(k));
    return true;
  }));
  if (inos.empty()) return Status::OK();
  // Their names: files record no parent, so every entry is read (only when there are some).
  std::vector<std::pair<uint64_t, std::string>> names;  // parent, name
  SFS_RETURN_IF_ERROR(kv_->scan(meta::DirPrefixAll(), [&](std::string_view k, std::string_view v) {
    auto e = meta::DecodeDirEntry(v);
    if (e.ok() && inos.count(e->ino)) names.emplace_back(meta::InoFromKey(k), std::string(meta::NameFromKey(k)));
    return true;
  }));
  for (const auto& [parent, name] : names) SFS_RETURN_IF_ERROR(ns_->unlink(parent, name).status());
  // Their chunks named memory of the last mount: records go, no space is given back.
  for (uint64_t ino : inos) {
    meta::Transaction txn;
    SFS_RETURN_IF_ERROR(meta::DeleteAllChunks(kv_.get(), ino, &txn));
    SFS_RETURN_IF_ERROR(ns_->reclaim(ino, &txn));
  }
  spdlog::info("{} files of ram directories were dropped: their data lived in memory until the last unmount",
               inos.size());
  return Status::OK();
}

Status Pool::open_drive(const meta::SegmentConfig& seg, Mode mode) {
  auto name = fmt::format("drive {} ({})", seg.id, seg.path);
  int fd = OpenDrive(seg.path, mode != Mode::kInspect);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(fmt::format("{} is missing", name));
    return Status::IOError(fmt::format("cannot open {}: {}", name, strerror(errno)));
  }
  fds_[seg.id] = fd;
  auto sb = ReadSuperblock(fd);
  if (!sb.ok()) {
    return Status(sb.status().code() == Code::kIOError ? Code::kIOError : Code::kCorruption,
                  fmt::format("{}: {}", name, sb.status().message()));
  }
  if (!sb.value()) return Status::Corruption(fmt::format("{} holds no stripefs superblock", name));
  const Superblock& super = *sb.value();
  if (super.pool_uuid != config_.uuid) {
    return Status::Corruption(fmt::format("{} belongs to another pool ({}, this pool is {})", name, super.pool_uuid,
                                          config_.uuid));
  }
  if (super.segment_id != seg.id) {
    return Status::Corruption(fmt::format("{} is segment {} of this pool, not segment {}: the drives are in the wrong order",
                                          name, super.segment_id, seg.id));
  }
  SFS_ASSIGN_OR_RETURN(uint64_t size, DeviceSize(fd, seg.path));
  if (size < kDataOffset + seg.capacity) {
    return Status::Corruption(fmt::format("{} is truncated: {} bytes, the pool needs {}", name, size,
                                          kDataOffset + seg.capacity));
  }
  SFS_ASSIGN_OR_RETURN(allocators_[seg.id], MakeAllocator(kPoolAllocator, seg.capacity, kDriveAllocationUnit));
  return Status::OK();
}

bool Pool::holds_chunks(uint32_t id) const {
  return id < config_.segments.size() && (config_.segments[id].kind == "drive" || config_.segments[id].kind == "ram");
}

Status Pool::rebuild_allocators() {
  Status bad;
  SFS_RETURN_IF_ERROR(meta::ForEachChunkPlacement(kv_.get(), [&](uint64_t ino, uint64_t index, Result<meta::ChunkRecord> rec) {
    if (!rec.ok()) {
      bad = rec.status();
      return false;
    }
    for (const auto& e : rec->replicas) {
      if (!holds_chunks(e.segment)) {
        bad = Status::Corruption(fmt::format("a chunk of inode {} names unknown segment {}", ino, e.segment));
        return false;
      }
      if (!allocators_[e.segment]) continue;  // a drive missing from a degraded mount
      Status s;
      for (size_t i = 0; i < e.extents.size() && s.ok(); ++i) {
        s = allocators_[e.segment]->mark_used(e.extents[i].offset, e.extents[i].length);
      }
      if (!s.ok()) {
        bad = Status::Corruption(fmt::format("chunk {} of inode {} on segment {}: {} (run `stripefs fsck`)",
                                             index, ino, e.segment, s.message()));
        return false;
      }
    }
    return true;
  }));
  return bad;
}

meta::PoolConfig Pool::config() const {
  std::shared_lock lock(config_mu_);
  return config_;
}

Result<InodeRecord> Pool::resolve(const std::string& path) {
  SFS_ASSIGN_OR_RETURN(InodeRecord at, ns_->get(meta::kRootIno));
  for (const auto& part : std::filesystem::path(path)) {
    std::string name = part.string();
    if (name.empty() || name == "/" || name == ".") continue;
    SFS_ASSIGN_OR_RETURN(at, ns_->lookup(at.ino, name));
  }
  return at;
}

}  // namespace stripefs
