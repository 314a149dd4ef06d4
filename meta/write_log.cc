// SPDX-License-Identifier: Apache-2.0
// The write log's segments. A record on file: u32 length, u32 CRC-32C of the
// length and the bytes, then the bytes. A reader stops a segment at the first
// frame that is short or fails its check: what follows was never acknowledged
// as durable (an append is acknowledged only after the ones before it).
#include "meta/write_log.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/crc32c.h"

namespace stripefs::meta {
namespace {

constexpr std::string_view kSegmentPrefix = "segment-";
constexpr size_t kFrameHeader = 8;

// ENOSPC stays a full disk (the caller's message says the metadata's); the rest is EIO.
Status ErrnoStatus(int err, const std::string& what) {
  std::string m = what + ": " + std::strerror(err);
  return err == ENOSPC ? Status::NoSpace(std::move(m)) : Status::IOError(std::move(m));
}
Status Errno(const std::string& what) { return ErrnoStatus(errno, what); }

std::string FrameHeader(std::span<const std::string_view> pieces) {
  uint32_t len = 0;
  for (std::string_view p : pieces) len += static_cast<uint32_t>(p.size());
  uint32_t crc = Crc32c(&len, sizeof len);
  for (std::string_view p : pieces) crc = Crc32c(p.data(), p.size(), crc);
  std::string h(kFrameHeader, '\0');
  std::memcpy(h.data(), &len, 4);
  std::memcpy(h.data() + 4, &crc, 4);
  return h;
}

// Calls fn for each whole frame's bytes in `data`, until a torn one.
bool ReadFrames(std::string_view data, const LogReader& fn) {
  while (data.size() >= kFrameHeader) {
    uint32_t len, crc;
    std::memcpy(&len, data.data(), 4);
    std::memcpy(&crc, data.data() + 4, 4);
    if (data.size() - kFrameHeader < len) return true;
    std::string_view record = data.substr(kFrameHeader, len);
    if (Crc32c(record.data(), record.size(), Crc32c(&len, sizeof len)) != crc) return true;
    if (!fn(record)) return false;
    data.remove_prefix(kFrameHeader + len);
  }
  return true;
}

Status SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open " + dir);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus(err, "cannot sync " + dir);
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<FileWriteLog>> FileWriteLog::Open(const std::string& dir, bool read_only) {
  if (!read_only && ::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return Errno("cannot create " + dir);
  std::vector<uint64_t> segments;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string_view name = e->d_name;
      if (!name.starts_with(kSegmentPrefix)) continue;
      segments.push_back(std::strtoull(std::string(name.substr(kSegmentPrefix.size())).c_str(), nullptr, 10));
    }
    ::closedir(d);
  } else if (errno != ENOENT || !read_only) {
    return Errno("cannot list " + dir);
  }
  std::sort(segments.begin(), segments.end());
  return std::unique_ptr<FileWriteLog>(new FileWriteLog(dir, read_only, std::move(segments)));
}

FileWriteLog::FileWriteLog(std::string dir, bool read_only, std::vector<uint64_t> segments)
    : dir_(std::move(dir)), read_only_(read_only), closed_(std::move(segments)) {
  current_ = closed_.empty() ? 1 : closed_.back() + 1;
}

FileWriteLog::~FileWriteLog() {
  if (fd_ >= 0) ::close(fd_);
}

std::string FileWriteLog::segment_path(uint64_t id) const { return fmt::format("{}/{}{:016}", dir_, kSegmentPrefix, id); }

Status FileWriteLog::append(std::span<const std::string_view> pieces) {
  if (read_only_) return Status(Code::kPermission, "metadata opened read-only");
  const std::string header = FrameHeader(pieces);
  std::vector<iovec> iov;
  iov.push_back({const_cast<char*>(header.data()), header.size()});
  size_t total = header.size();
  for (std::string_view p : pieces) {
    iov.push_back({const_cast<char*>(p.data()), p.size()});
    total += p.size();
  }
  std::lock_guard lock(mu_);
  if (fd_ < 0) {
    fd_ = ::open(segment_path(current_).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) return Errno("cannot create the write log's segment " + segment_path(current_));
    size_ = 0;
    dir_unsynced_ = true;
  }
  ssize_t n = ::pwritev(fd_, iov.data(), static_cast<int>(iov.size()), static_cast<off_t>(size_));
  if (n != static_cast<ssize_t>(total)) {
    // A short write would leave a torn frame before every later record: cut it off.
    const int err = n < 0 ? errno : ENOSPC;
    if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
      ::close(fd_);  // the next append starts a segment of its own
      fd_ = -1;
      closed_.push_back(current_++);
    }
    return ErrnoStatus(err, "cannot append to the write log in " + dir_);
  }
  size_ += total;
  unsynced_ = true;
  return Status::OK();
}

Status FileWriteLog::sync_locked() {
  if (unsynced_ && fd_ >= 0) {
    if (::fdatasync(fd_) != 0) return Errno("cannot sync the write log in " + dir_);
    unsynced_ = false;
  }
  if (dir_unsynced_) {
    SFS_RETURN_IF_ERROR(SyncDir(dir_));
    dir_unsynced_ = false;
  }
  return Status::OK();
}

Status FileWriteLog::sync() {
  if (read_only_) return Status::OK();
  std::lock_guard lock(mu_);
  return sync_locked();
}

Result<uint64_t> FileWriteLog::roll() {
  std::lock_guard lock(mu_);
  if (fd_ < 0) return current_ - 1;  // nothing appended to current_: the segments before it
  SFS_RETURN_IF_ERROR(sync_locked());
  ::close(fd_);
  fd_ = -1;
  closed_.push_back(current_);
  return current_++;
}

Status FileWriteLog::drop(uint64_t through) {
  std::lock_guard lock(mu_);
  while (!closed_.empty() && closed_.front() <= through) {
    if (::unlink(segment_path(closed_.front()).c_str()) != 0 && errno != ENOENT) {
      return Errno("cannot delete " + segment_path(closed_.front()));
    }
    closed_.erase(closed_.begin());
    dir_unsynced_ = true;
  }
  return sync_locked();
}

Status FileWriteLog::read(const LogReader& fn) {
  std::vector<uint64_t> ids;
  {
    std::lock_guard lock(mu_);
    ids = closed_;
    if (fd_ >= 0) ids.push_back(current_);
  }
  for (uint64_t id : ids) {
    const std::string path = segment_path(id);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Errno("cannot open " + path);
    std::string data;
    struct stat st;
    if (::fstat(fd, &st) == 0) data.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < data.size()) {
      ssize_t n = ::pread(fd, data.data() + got, data.size() - got, static_cast<off_t>(got));
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    const int err = errno;
    ::close(fd);
    if (got < data.size()) return ErrnoStatus(err ? err : EIO, "cannot read " + path);
    if (!ReadFrames(data, fn)) return Status::OK();
  }
  return Status::OK();
}

Status MemWriteLog::append(std::span<const std::string_view> pieces) {
  std::string record;
  for (std::string_view p : pieces) record.append(p);
  std::lock_guard lock(mu_);
  segments_.back().records.push_back(std::move(record));
  return Status::OK();
}

void MemWriteLog::mark_synced() {
  std::lock_guard lock(mu_);
  for (Segment& s : segments_) s.synced = s.records.size();
}

Result<uint64_t> MemWriteLog::roll() {
  std::lock_guard lock(mu_);
  Segment& last = segments_.back();
  last.synced = last.records.size();  // a roll syncs what it closes, as FileWriteLog's does
  segments_.push_back({last.id + 1, {}, 0});
  return segments_[segments_.size() - 2].id;
}

Status MemWriteLog::drop(uint64_t through) {
  std::lock_guard lock(mu_);
  while (segments_.size() > 1 && segments_.front().id <= through) segments_.erase(segments_.begin());
  return Status::OK();
}

Status MemWriteLog::read(const LogReader& fn) {
  std::vector<std::string> records;
  {
    std::lock_guard lock(mu_);
    for (const Segment& s : segments_) records.insert(records.end(), s.records.begin(), s.records.end());
  }
  for (const std::string& r : records) {
    if (!fn(r)) break;
  }
  return Status::OK();
}

void MemWriteLog::drop_unsynced() {
  std::lock_guard lock(mu_);
  for (Segment& s : segments_) s.records.resize(s.synced);
}

}  // namespace stripefs::meta
