// SPDX-License-Identifier: Apache-2.0
// The write log behind KvStore::append_log(): a sequence of records in
// segments, each record framed with its length and CRC-32C so a record torn
// by a power cut is recognised and not read. FileWriteLog keeps the segments
// as files in a directory (beside RocksDB's); MemWriteLog keeps them in memory
// (for the in-memory store and tests) and can drop what was not synced, as a
// power cut would.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace stripefs::meta {

using LogReader = std::function<bool(std::string_view record)>;

class FileWriteLog {
 public:
  // Opens the log in dir (created unless read_only). Appends go to a new
  // segment: a record after a torn one would never be read.
  static Result<std::unique_ptr<FileWriteLog>> Open(const std::string& dir, bool read_only);
  ~FileWriteLog();

  // One record, the pieces concatenated; in the OS when it returns.
  Status append(std::span<const std::string_view> pieces);
  // Every record appended so far is durable.
  Status sync();
  // Closes the segment appended to (synced) and returns its id.
  Result<uint64_t> roll();
  // Deletes every segment up to and including `through`.
  Status drop(uint64_t through);
  Status read(const LogReader& fn);

 private:
  FileWriteLog(std::string dir, bool read_only, std::vector<uint64_t> segments);
  std::string segment_path(uint64_t id) const;
  Status sync_locked();

  const std::string dir_;
  const bool read_only_;
  std::mutex mu_;
  std::vector<uint64_t> closed_;  // GUARDED_BY(mu_): segments before current_, oldest first
  uint64_t current_;              // GUARDED_BY(mu_): the segment appended to
  int fd_ = -1;                   // GUARDED_BY(mu_): current_'s file, created by its first append
  uint64_t size_ = 0;             // GUARDED_BY(mu_): bytes in it
  bool unsynced_ = false;         // GUARDED_BY(mu_)
  bool dir_unsynced_ = false;     // GUARDED_BY(mu_): a segment created or deleted since the last sync
};

class MemWriteLog {
 public:
  Status append(std::span<const std::string_view> pieces);
  void mark_synced();
  Result<uint64_t> roll();
  Status drop(uint64_t through);
  Status read(const LogReader& fn);
  // Power cut: the records appended since the last sync are lost.
  void drop_unsynced();

 private:
  struct Segment {
    uint64_t id;
    std::vector<std::string> records;
    size_t synced = 0;  // records[0, synced) are durable
  };
  std::mutex mu_;
  std::vector<Segment> segments_{Segment{1, {}, 0}};  // GUARDED_BY(mu_): the last is appended to
};

}  // namespace stripefs::meta
