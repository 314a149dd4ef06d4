// SPDX-License-Identifier: Apache-2.0
// ObjectStore's checked reads: every block read from a drive is verified
// against its checksum; a block that fails is read from another replica and
// the bad copy rewritten from the good one (repair on read). Reads of whole
// blocks go straight into the caller's buffer. The scrub, which checks every
// replica on purpose, is in engine/pool/scrub.cc and repairs through
// rewrite() here. These stay ObjectStore members: they read the object's
// chunk map under its lock, the drive table and the RAM tier.
#include "engine/store/object_store.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "engine/store/aligned_buffer.h"
#include "engine/store/chunk_space.h"
#include "base/crc32c.h"

namespace stripefs {

using meta::ChunkRecord;
using meta::Replica;
using namespace store_space;

Status ObjectStore::read_blocks(const Object& obj, uint64_t index, const ChunkRecord& rec, uint32_t first,
                                uint32_t count, char* buf) {
  Status last = Status::Corruption("chunk has no replica");
  struct BadRun {
    const Replica* replica;
    uint32_t first, count;  // blocks, relative to buf
  };
  std::vector<BadRun> bad;  // runs of blocks a replica answered with wrong bytes
  std::vector<uint32_t> crcs(count);
  std::vector<IoRequest> reqs;
  for (const Replica& e : rec.replicas) {
    if (!drives_.at(e.segment).available) {
      last = Status::IOError(fmt::format("drive {} is missing", e.segment));
      continue;
    }
    reqs.clear();
    add_requests(IoRequest::Op::kRead, e, uint64_t{first} * kBlock, size_t{count} * kBlock, buf, &reqs);
    Status s = io_->run(reqs);
    if (!s.ok()) {
      last = s;
      continue;
    }
    overlay_deferred(obj, index, first, count, buf);
    Crc32cBlocks(buf, kBlock, count, crcs.data());
    const size_t bad_before = bad.size();
    for (uint32_t b = 0; b < count; ++b) {
      if (rec.block_matches(first + b, crcs[b]) || TailVerifiesZeroed(rec, first + b, buf + size_t{b} * kBlock)) continue;
      if (bad.size() > bad_before && bad.back().first + bad.back().count == b) {
        bad.back().count++;
      } else {
        bad.push_back({&e, b, 1});
      }
    }
    if (bad.size() > bad_before) {
      last = Status::Corruption(fmt::format("checksum mismatch in segment {} at chunk offset {}", e.segment,
                                            uint64_t{first + bad[bad_before].first} * kBlock));
      continue;
    }
    if (!bad.empty()) {
      // Another reader may repair the same blocks at the same time: both write
      // the same verified bytes. A writer cannot: it holds the object exclusively.
      std::vector<IoRequest> repairs;
      for (const BadRun& r : bad) {
        add_requests(IoRequest::Op::kWrite, *r.replica, uint64_t{first + r.first} * kBlock, size_t{r.count} * kBlock,
                     buf + size_t{r.first} * kBlock, &repairs);
      }
      Status w = rewrite(repairs);
      if (w.ok()) {
        spdlog::warn("object {} chunk {}: {} run(s) of blocks in {}-{} failed their checksum; rewritten from drive {}",
                     obj.uri, index, bad.size(), first, first + count - 1, e.segment);
      } else {
        spdlog::error("object {} chunk {}: cannot rewrite bad blocks: {}", obj.uri, index, w.message());
      }
    }
    return Status::OK();
  }
  return last;
}

Status ObjectStore::read_old_blocks(const Object& obj, uint64_t index, const ChunkRecord& rec, uint32_t first,
                                    uint32_t count, char* buf) {
  // The newest bytes of a deferred block are in memory, and its checksum
  // in the record was computed from them: a drive read would be overlaid.
  if (overlay_deferred(obj, index, first, count, buf) == count) return Status::OK();
  if (cache_ && cache_->read(obj.ino, index, first * kBlock, count * kBlock, buf)) return Status::OK();
  return read_blocks(obj, index, rec, first, count, buf);
}

Status ObjectStore::rewrite(std::vector<IoRequest>& repairs) {
  SFS_RETURN_IF_ERROR(write_to_drives(repairs));
  for (const IoRequest& r : repairs) repaired_blocks_.fetch_add(r.len / kBlock, std::memory_order_relaxed);
  return Status::OK();
}

Status ObjectStore::read_aligned(Object& obj, uint64_t offset, size_t len, char* out) {
  if (!obj.loaded) {
    std::unique_lock lock(obj.mu);
    SFS_RETURN_IF_ERROR(ensure_loaded(obj));
  }
  std::shared_lock lock(obj.mu);
  // Pieces are whole blocks (offset, len and the chunk size are multiples of
  // a block), so each is read straight into its place in out.
  struct Part {
    uint64_t index;
    char* dst;
    const ChunkRecord* rec;
    uint32_t first, count;
  };
  thread_local std::vector<Part> parts;
  thread_local std::vector<IoRequest> reqs;
  thread_local std::vector<uint32_t> crcs;
  parts.clear();
  reqs.clear();
  for (uint64_t done = 0; done < len;) {
    const uint64_t pos = offset + done;
    const uint64_t index = pos / obj.chunk_size;
    const auto in_chunk = static_cast<uint32_t>(pos % obj.chunk_size);
    const auto n = static_cast<uint32_t>(std::min<uint64_t>(obj.chunk_size - in_chunk, len - done));
    char* dst = out + done;
    done += n;
    auto it = obj.chunks.find(index);
    const uint32_t valid_end = it == obj.chunks.end() ? 0 : std::min(in_chunk + n, it->second.length);
    if (valid_end <= in_chunk) {  // a hole, or past the written data
      std::memset(dst, 0, n);
      continue;
    }
    if (cache_ && cache_->read(obj.ino, index, in_chunk, n, dst)) continue;  // the RAM tier has it
    const uint32_t first = in_chunk / kBlock;
    const uint32_t count = static_cast<uint32_t>(RoundUp(valid_end, kBlock) / kBlock) - first;
    std::memset(dst + size_t{count} * kBlock, 0, n - size_t{count} * kBlock);
    parts.push_back({index, dst, &it->second, first, count});
    add_requests(IoRequest::Op::kRead, readable_replica(it->second), uint64_t{first} * kBlock, size_t{count} * kBlock,
                 dst, &reqs);
  }
  Status batch = io_->run(reqs);
  for (const Part& p : parts) {
    bool good = batch.ok();
    if (good) {
      overlay_deferred(obj, p.index, p.first, p.count, p.dst);
      crcs.resize(p.count);
      Crc32cBlocks(p.dst, kBlock, p.count, crcs.data());
      for (uint32_t b = 0; b < p.count && good; ++b) {
        good = p.rec->block_matches(p.first + b, crcs[b]) ||
               TailVerifiesZeroed(*p.rec, p.first + b, p.dst + size_t{b} * kBlock);
      }
    }
    if (!good) {
      // The first replica failed or did not verify: try them all, one at a time.
      Status s = read_blocks(obj, p.index, *p.rec, p.first, p.count, p.dst);
      if (!s.ok()) return Status(s.code(), fmt::format("object {} chunk {}: {}", obj.uri, p.index, s.message()));
    }
    // Bytes of the last block past the chunk's length are stale on disk.
    const uint64_t valid = p.rec->length - uint64_t{p.first} * kBlock;
    if (valid < size_t{p.count} * kBlock) std::memset(p.dst + valid, 0, size_t{p.count} * kBlock - valid);
    // Admission: a read of a whole chunk's data, which is then known good.
    if (admits(obj) && p.first == 0 && p.count == p.rec->blocks()) {
      cache_->insert(obj.ino, p.index, p.dst, p.rec->length);
    }
  }
  return Status::OK();
}

Result<const char*> ObjectStore::read(Object& obj, uint64_t offset, size_t len, AlignedBuffer& buf) {
  const uint64_t start = offset / kBlock * kBlock;
  const uint64_t span = RoundUp(offset + len, kBlock) - start;
  buf.reserve(span);
  SFS_RETURN_IF_ERROR(read_aligned(obj, start, span, buf.data()));
  return static_cast<const char*>(buf.data() + (offset - start));
}

Status ObjectStore::read(Object& obj, uint64_t offset, size_t len, char* out) {
  if (len == 0) return Status::OK();
  if (offset % kBlock == 0 && len % kBlock == 0 && reinterpret_cast<uintptr_t>(out) % kBlock == 0) {
    return read_aligned(obj, offset, len, out);
  }
  thread_local AlignedBuffer bounce;
  SFS_ASSIGN_OR_RETURN(const char* bytes, read(obj, offset, len, bounce));
  std::memcpy(out, bytes, len);
  return Status::OK();
}

}  // namespace stripefs
