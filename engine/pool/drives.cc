// SPDX-License-Identifier: Apache-2.0
// A pool's drives after format: adding one to an unmounted pool (AddDrive)
// or to a mounted one in use (add_drive), and putting a new drive in place of
// a missing or failing one (ReplaceDrive).
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/pool/drive_files.h"
#include "engine/pool/pool.h"
#include "engine/pool/superblock.h"

namespace stripefs {

namespace {

// Checks a drive the pool in config is to take as its next segment, creates
// or grows it to the size asked for and writes its superblock (flushed).
// Returns the segment for the configuration; the caller records it. A drive
// that already holds the superblock this would write (an add that stopped
// before recording it) is taken again without --force.
Result<meta::SegmentConfig> FormatNewDrive(const meta::PoolConfig& config, const DriveSpec& drive, bool force) {
  const auto id = static_cast<uint32_t>(config.segments.size());
  SFS_ASSIGN_OR_RETURN(JoiningDrive d, OpenDriveToJoin(config, drive, id, /*replacing=*/false, force));
  const int fd = d.fd;
  const std::string& path = d.path;
  const uint64_t current = d.device_size;
  const uint64_t size = drive.size ? drive.size : current;
  if (UsableCapacity(size) < config.chunk_size) {
    return Status::Invalid(fmt::format("drive {} is too small: it needs at least {} bytes for one chunk", drive.path,
                                       kDataOffset + config.chunk_size));
  }
  struct stat st;
  fstat(fd, &st);
  if (S_ISBLK(st.st_mode) && drive.size > current) {
    return Status::Invalid(fmt::format("drive {} has {} bytes, less than the {} asked for", drive.path, current, drive.size));
  }
  if (S_ISREG(st.st_mode) && current < size && ftruncate(fd, static_cast<off_t>(size)) != 0) {
    return Status::IOError(fmt::format("cannot grow drive {} to {} bytes: {}", drive.path, size, strerror(errno)));
  }
  SFS_RETURN_IF_ERROR(WriteSuperblock(fd, {meta::kFormatVersion, id, config.uuid, size}));
  if (fdatasync(fd) != 0) return Status::IOError(fmt::format("cannot flush drive {}: {}", drive.path, strerror(errno)));
  return meta::SegmentConfig{id, "drive", path, UsableCapacity(size)};
}

}  // namespace

Result<uint32_t> Pool::AddDrive(const std::string& meta_dir, const DriveSpec& drive, bool force) {
  SFS_ASSIGN_OR_RETURN(auto pool, Open(meta_dir, Mode::kCheck));
  meta::PoolConfig config = pool->config_;
  SFS_ASSIGN_OR_RETURN(meta::SegmentConfig seg, FormatNewDrive(config, drive, force));
  config.segments.push_back(seg);
  meta::Transaction txn;
  txn.put(meta::ConfigKey(), meta::EncodeConfig(config));
  SFS_RETURN_IF_ERROR(pool->kv_->commit(txn, true));
  return seg.id;
}

Result<uint32_t> Pool::add_drive(const DriveSpec& drive, bool force) {
  std::lock_guard adding(add_drive_mu_);
  if (!mounted_) return Status::Invalid("the pool is not mounted read-write");
  if (!missing_.empty()) {
    return Status::Invalid(fmt::format("the pool is mounted degraded ({}): replace the missing drive before adding "
                                       "one (`stripefs replace-drive`)",
                                       missing_.front()));
  }
  meta::PoolConfig config = this->config();
  if (config.segments.size() >= kMaxSegments) {  // the data path's tables end there (see ObjectStore::drives_)
    return Status::Invalid(fmt::format("the pool has {} segments, the most a mounted pool can grow to; unmount it "
                                       "to add more",
                                       config.segments.size()));
  }
  // 1. The drive's superblock, as offline.
  SFS_ASSIGN_OR_RETURN(meta::SegmentConfig seg, FormatNewDrive(config, drive, force));
  SFS_ASSIGN_OR_RETURN(auto allocator, MakeAllocator(kPoolAllocator, seg.capacity, kDriveAllocationUnit));
  int fd = OpenDrive(seg.path, true);
  if (fd < 0) return Status::IOError(fmt::format("cannot open drive {}: {}", seg.path, strerror(errno)));
  // 2. The configuration, synced, before any chunk can be placed on the drive:
  // a chunk record never names a segment the stored configuration lacks, so
  // a crash anywhere in here leaves a pool that mounts (with or without it).
  config.segments.push_back(seg);
  meta::Transaction txn;
  txn.put(meta::ConfigKey(), meta::EncodeConfig(config));
  if (Status s = kv_->commit(txn, true); !s.ok()) {
    close(fd);
    return s;
  }
  SegmentAllocator* a = allocator.get();
  {
    // 3. df, placement and statfs see the drive (empty until step 5).
    std::unique_lock lock(config_mu_);
    config_.segments.push_back(seg);
    fds_.resize(seg.id + 1, -1);
    fds_[seg.id] = fd;  // closed by ~Pool
    allocators_.resize(seg.id + 1);
    allocators_[seg.id] = std::move(allocator);
  }
  // 4. The I/O backend serves the id, then 5. the object store hands it out
  // for new chunks. In this order: nothing names the id before step 5.
  Status s = io_->add_segment(seg.id, fd);
  if (s.ok()) s = store_->add_drive({seg.id, kDataOffset, a, true});
  if (!s.ok()) {
    return Status(s.code(), fmt::format("drive {} was added to the pool as drive {}, but this mount cannot use it "
                                        "({}): new chunks use it from the next mount",
                                        drive.path, seg.id, s.message()));
  }
  spdlog::info("added drive {} ({}, {} bytes) while mounted; new chunks use it now", seg.id, seg.path, seg.capacity);
  return seg.id;
}

Result<ScrubReport> Pool::ReplaceDrive(const std::string& meta_dir, uint32_t id, const DriveSpec& drive, bool force,
                                       const std::function<void(const ScrubReport&)>& progress) {
  {
    SFS_ASSIGN_OR_RETURN(auto pool, Open(meta_dir, Mode::kCheck, /*degraded=*/true));
    meta::PoolConfig config = pool->config_;
    if (id >= config.segments.size() || config.segments[id].kind != "drive") {
      std::string ids;
      for (const auto& seg : config.segments) ids += seg.kind == "drive" ? fmt::format(" {}", seg.id) : "";
      return Status::Invalid(fmt::format("the pool has no drive {} (its drives are{})", id, ids));
    }
    meta::SegmentConfig& seg = config.segments[id];
    // Running again after an interruption finds its own superblock: that is allowed.
    SFS_ASSIGN_OR_RETURN(JoiningDrive d, OpenDriveToJoin(config, drive, id, /*replacing=*/true, force));
    const int fd = d.fd;
    const bool resuming = d.resuming;
    const uint64_t current = d.device_size;
    const std::string& path = d.path;
    const uint64_t size = std::max(drive.size, current);
    if (UsableCapacity(size) < seg.capacity) {
      return Status::Invalid(fmt::format("drive {} is too small: drive {} needs {} bytes", drive.path, id,
                                         kDataOffset + seg.capacity));
    }
    struct stat st;
    fstat(fd, &st);
    if (S_ISREG(st.st_mode) && current < size && ftruncate(fd, static_cast<off_t>(size)) != 0) {
      return Status::IOError(fmt::format("cannot grow drive {} to {} bytes: {}", drive.path, size, strerror(errno)));
    }
    if (!resuming) {
      SFS_RETURN_IF_ERROR(WriteSuperblock(fd, {meta::kFormatVersion, id, config.uuid, size}));
    }
    if (fdatasync(fd) != 0) return Status::IOError(fmt::format("cannot flush drive {}: {}", drive.path, strerror(errno)));
    seg.path = path;
    meta::Transaction txn;
    txn.put(meta::ConfigKey(), meta::EncodeConfig(config));
    SFS_RETURN_IF_ERROR(pool->kv_->commit(txn, true));
  }
  // Every replica on the new drive now fails its checksum (or reads zeros
  // that match): the scrub rewrites them from the other replicas.
  SFS_ASSIGN_OR_RETURN(auto pool, Open(meta_dir, Mode::kMount));
  return pool->scrub(progress);
}

}  // namespace stripefs
