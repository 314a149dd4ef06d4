// SPDX-License-Identifier: Apache-2.0
// The metadata schema: key layout and versioned record encodings.
//
// Keys (integers big-endian so RocksDB orders them numerically):
//   'P' "config"                 -> PoolConfig (JSON)
//   'P' "next_ino"               -> next inode number to hand out (u64)
//   'P' "log_seq"                -> the write log's next sequence number, at the last settle (u64)
//   'I' ino                      -> InodeRecord
//   'D' parent name              -> DirEntry
//   'C' ino chunk_index          -> ChunkRecord placement: length, capacity, replicas
//   'K' ino chunk_index page     -> ChunkRecord checksums of one page of blocks: crcs, pending
// (split so a mount, which rebuilds the allocators, reads only the small placement half;
// in pages so an overwrite of a few blocks stores a few hundred bytes, not the whole
// chunk's checksums. Pools written before pages hold one 'K' ino chunk_index record
// per chunk; it is read as it is and replaced by pages when the chunk is next stored.)
//   'X' ino name                 -> xattr value (raw bytes)
//   'O' ino                      -> orphan: nlink reached 0; reclaim at next mount
//   'W' seq                      -> DeferredWrite: blocks of a small in-place overwrite, committed
//                                   with their checksums and copied to the drives after a WAL sync
//                                   (replayed at mount; pools written before the write log)
//   'L' ino                      -> the write log's floor for the inode (u64): records of it in
//                                   the KvStore's write log with a seq at or below it are in
//                                   the keys above already (engine/store/deferred_writes.cc)
// Every record value starts with a format-version byte.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace stripefs::meta {

inline constexpr uint64_t kRootIno = 1;
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint32_t kBlockSize = 4096;  // checksum and allocation unit
inline constexpr uint32_t kChecksumPageBlocks = 64;  // blocks per checksum record

struct SegmentConfig {
  uint32_t id = 0;
  std::string kind;  // "drive" or "ram"
  std::string path;  // drive file or device; "ram" for the RAM segment
  uint64_t capacity = 0;  // usable data bytes
};

// Pool-wide settings fixed at mkfs.
struct PoolConfig {
  uint32_t format_version = kFormatVersion;
  std::string uuid;
  uint32_t chunk_size = 4u << 20;
  std::string strategy = "striped";
  uint32_t replicas = 1;
  std::vector<SegmentConfig> segments;

  size_t drive_count() const {
    size_t n = 0;
    for (const auto& s : segments) n += s.kind == "drive";
    return n;
  }
  uint64_t ram_bytes() const {
    uint64_t n = 0;
    for (const auto& s : segments) n += s.kind == "ram" ? s.capacity : 0;
    return n;
  }
};

struct InodeRecord {
  uint64_t ino = 0;
  uint32_t mode = 0;  // type and permission bits, as st_mode
  uint32_t uid = 0, gid = 0;
  uint32_t nlink = 0;
  uint64_t size = 0;
  uint64_t rdev = 0;
  int64_t atime_ns = 0, mtime_ns = 0, ctime_ns = 0;
  uint64_t parent = 0;      // directories only: the parent directory
  std::string uri;          // regular files only: the immutable object URI
  uint32_t chunk_size = 0;  // regular files only: fixed at creation
  std::string strategy;     // regular files only: fixed at creation
  uint32_t replicas = 1;    // regular files only
  std::string symlink;      // symlinks only: the target
  uint64_t allocated = 0;   // bytes of drive space held by this file's chunks
};

struct DirEntry {
  uint64_t ino = 0;
  uint32_t type = 0;  // S_IFMT bits of the child
};

// A run of bytes on one segment: offset inside the segment's data area, and
// length, both multiples of the allocation unit.
struct Extent {
  uint64_t offset = 0;
  uint64_t length = 0;
  bool operator==(const Extent&) const = default;
};

// One copy of a chunk: where on its segment each part of the chunk's reserved
// bytes lies. The extents cover the chunk's bytes [0, capacity) in order, the
// first extent holding its first bytes; they are as long as the allocator
// could find when the space was taken (one, for a chunk written in one go on
// a pool with room).
struct Replica {
  uint32_t segment = 0;
  std::vector<Extent> extents;
  bool operator==(const Replica&) const = default;

  uint64_t bytes() const;  // the sum of the extents' lengths
  // Appends an extent; one that starts where the last one ends lengthens it.
  void append(Extent e);
  // Keeps the first `keep` bytes and appends the extents past them to *rest.
  void cut(uint64_t keep, std::vector<Extent>* rest);
  // Calls fn(segment_offset, range_offset, n) for each piece of the chunk's
  // bytes [pos, pos+len): n bytes at segment_offset on the segment are the
  // range's bytes from range_offset. REQUIRES: pos+len <= bytes().
  template <typename Fn>
  void map(uint64_t pos, uint64_t len, Fn&& fn) const {
    uint64_t start = 0, done = 0;
    for (const Extent& e : extents) {
      if (done == len) return;
      const uint64_t end = start + e.length;
      if (pos + done < end) {
        const uint64_t in = pos + done - start, n = std::min(e.length - in, len - done);
        fn(e.offset + in, done, n);
        done += n;
      }
      start = end;
    }
  }
};

// Where one chunk of a file lives. Blocks [0, ceil(length / 4096)) hold
// written data, each with a crc32c; bytes past length read as zeros.
struct ChunkRecord {
  uint32_t length = 0;    // valid bytes from the chunk's start
  uint32_t capacity = 0;  // bytes reserved on each replica (multiple of 4096): the sum of its extents
  std::vector<Replica> replicas;
  std::vector<uint32_t> crcs;  // one per written block
  // Blocks being overwritten in place: the checksum of the new contents,
  // recorded before the data is written, so a crash mid-write leaves a block
  // that matches either the old or the new checksum.
  std::vector<std::pair<uint32_t, uint32_t>> pending;  // (block, crc)
  // Loaded from one whole-chunk checksum record (pools written before pages).
  bool whole_checksum_record = false;

  uint32_t blocks() const { return (length + kBlockSize - 1) / kBlockSize; }
  uint32_t checksum_pages() const { return (blocks() + kChecksumPageBlocks - 1) / kChecksumPageBlocks; }
  bool block_matches(uint32_t block, uint32_t crc) const;
};

std::string ConfigKey();
std::string NextInoKey();
// The next write log sequence number, stored when records are settled (u64).
std::string LogSeqKey();
std::string InodeKey(uint64_t ino);
std::string DirEntryKey(uint64_t parent, std::string_view name);
std::string DirPrefix(uint64_t parent);
std::string ChunkKey(uint64_t ino, uint64_t index);
std::string ChunkPrefix(uint64_t ino);
std::string ChunkPrefixAll();
// A chunk's whole-chunk checksum record; also the prefix of its pages.
std::string ChecksumKey(uint64_t ino, uint64_t index);
std::string ChecksumPageKey(uint64_t ino, uint64_t index, uint32_t page);
std::string ChecksumPrefix(uint64_t ino);
std::string ChecksumPrefixAll();
std::string XattrKey(uint64_t ino, std::string_view name);
std::string XattrPrefix(uint64_t ino);
std::string OrphanKey(uint64_t ino);
std::string OrphanPrefixAll();
// A regular file whose data lives in memory (strategy kRamStrategyName): the
// next mount drops it. Written with the inode, deleted with it.
std::string VolatileKey(uint64_t ino);
std::string VolatilePrefixAll();
std::string DeferredKey(uint64_t seq);
std::string DeferredPrefixAll();
inline constexpr std::string_view kRamStrategyName = "ram";
std::string InodePrefixAll();
std::string DirPrefixAll();
std::string XattrPrefixAll();

// Decoders for keys produced above.
uint64_t DecodeU64BE(std::string_view bytes);
inline uint64_t InoFromKey(std::string_view key) { return DecodeU64BE(key.substr(1, 8)); }
inline uint64_t ChunkIndexFromKey(std::string_view key) { return DecodeU64BE(key.substr(9, 8)); }
inline std::string_view NameFromKey(std::string_view key) { return key.substr(9); }

std::string EncodeConfig(const PoolConfig& c);
Result<PoolConfig> DecodeConfig(std::string_view bytes);
std::string EncodeU64(uint64_t v);
Result<uint64_t> DecodeU64Value(std::string_view bytes);
std::string EncodeInode(const InodeRecord& r);
Result<InodeRecord> DecodeInode(std::string_view bytes);
std::string EncodeDirEntry(const DirEntry& e);
Result<DirEntry> DecodeDirEntry(std::string_view bytes);
// The placement half of a chunk record (crcs and pending are not part of it).
std::string EncodeChunk(const ChunkRecord& r);
Result<ChunkRecord> DecodeChunk(std::string_view bytes);
// The checksum half as one whole-chunk record (the format before pages);
// decoding fills rec's crcs and pending and checks the count against rec's length.
std::string EncodeChecksums(const ChunkRecord& r);
Status DecodeChecksums(std::string_view bytes, ChunkRecord* rec);
// One page of the checksum half: blocks [page * kChecksumPageBlocks, ...) of rec.
std::string EncodeChecksumPage(const ChunkRecord& r, uint32_t page);
// Whether page `page` holds the same checksums (and pending ones) in a and b.
bool SameChecksumPage(const ChunkRecord& a, const ChunkRecord& b, uint32_t page);

// The blocks of a small overwrite waiting to be copied to the drives
// (DeferredKey). blocks holds whole 4 KiB blocks, first_block onwards.
struct DeferredWrite {
  uint64_t ino = 0;
  uint64_t index = 0;  // chunk index
  uint32_t first_block = 0;
  std::string blocks;
  uint32_t count() const { return static_cast<uint32_t>(blocks.size() / kBlockSize); }
};
std::string EncodeDeferred(const DeferredWrite& d);
Result<DeferredWrite> DecodeDeferred(std::string_view bytes);
uint64_t SeqFromDeferredKey(std::string_view key);

// A small overwrite in the KvStore's write log: the blocks of each chunk it
// covers and the mtime it gave the inode. The chunks' checksums are those of
// the blocks.
struct LoggedWrite {
  struct Part {
    uint64_t index = 0;  // chunk index
    uint32_t first_block = 0;
    std::string_view blocks;  // into the record decoded
    uint32_t count() const { return static_cast<uint32_t>(blocks.size() / kBlockSize); }
  };
  uint64_t seq = 0;
  uint64_t ino = 0;
  int64_t mtime_ns = 0;
  std::vector<Part> parts;
};
// The record is this header followed by the parts' blocks in order (appended
// as pieces, not copied).
std::string EncodeLoggedWriteHeader(const LoggedWrite& w);
Result<LoggedWrite> DecodeLoggedWrite(std::string_view record);
std::string LogFloorKey(uint64_t ino);

// Builds the checksum halves of one inode's chunk records from the records
// under their ChecksumKey (a whole-chunk record or pages), fed in any order.
class ChecksumLoader {
 public:
  // key, value: a record whose key starts with ChecksumKey(ino, index) of
  // rec; rec: that chunk, its placement half decoded.
  Status add(std::string_view key, std::string_view value, ChunkRecord* rec);
  // Whether rec got every checksum it needs (and nothing else) from add(),
  // and every add() succeeded.
  bool complete(uint64_t index, const ChunkRecord& rec) const;

 private:
  std::map<uint64_t, uint32_t> records_;  // chunk index -> records added
  bool failed_ = false;
};

// PutChunk, DeleteChunk and loading: meta/chunk_table.h.

}  // namespace stripefs::meta
