// SPDX-License-Identifier: Apache-2.0
// ObjectStore's object operations besides reads and writes: truncate,
// punch_hole, allocate (fallocate), seek (SEEK_DATA/SEEK_HOLE), trim (giving
// back reserved space at last close) and reclaim (deleting an orphan). Each
// changes the chunk map and the inode in one commit and hands the space it
// gave up to the free ledger. They stay ObjectStore members: they work on
// the object's chunk map under its lock, the RAM tier and the ledger.
#include "engine/store/object_store.h"

#include <algorithm>
#include <string>

#include "engine/store/aligned_buffer.h"
#include "engine/store/chunk_space.h"
#include "base/crc32c.h"
#include "engine/store/striper.h"
#include "meta/chunk_table.h"

namespace stripefs {

using meta::ChunkRecord;
using meta::InodeRecord;
using meta::Replica;
using meta::Transaction;
using namespace store_space;

Result<InodeRecord> ObjectStore::truncate(Object& obj, uint64_t size, int64_t mtime_ns) {
  std::unique_lock lock(obj.mu);
  SFS_RETURN_IF_ERROR(ensure_loaded(obj));
  SFS_RETURN_IF_ERROR(settle(obj));  // a chunk cut or dropped must not take a logged write later
  Transaction txn;
  std::vector<Freed> freed;
  std::map<uint64_t, ChunkRecord> cut;
  std::vector<uint64_t> dropped;
  int64_t footprint_delta = 0;
  for (auto it = obj.chunks.begin(); it != obj.chunks.end(); ++it) {
    const auto& [index, rec] = *it;
    uint64_t chunk_start = index * obj.chunk_size;
    if (chunk_start >= size) {
      meta::DeleteChunk(&txn, obj.ino, index, rec);
      FreeLedger::add_freed(rec.replicas, &freed);
      footprint_delta -= static_cast<int64_t>(Footprint(rec));
      dropped.push_back(index);
    } else if (chunk_start + rec.length > size) {
      ChunkRecord after = rec;
      after.length = static_cast<uint32_t>(size - chunk_start);
      after.crcs.resize(after.blocks());
      std::erase_if(after.pending, [&](const auto& p) { return p.first >= after.blocks(); });
      after.capacity = static_cast<uint32_t>(RoundUp(after.length, kBlock));
      FreeLedger::add_freed(CutReplicas(after.replicas, after.capacity), &freed);
      SFS_RETURN_IF_ERROR(cut_last_block(obj, index, rec, &after, &freed));
      footprint_delta += static_cast<int64_t>(Footprint(after)) - static_cast<int64_t>(Footprint(rec));
      meta::PutChunk(&txn, obj.ino, index, rec, after);
      after.whole_checksum_record = false;
      cut[index] = std::move(after);
    }
  }
  auto committed = ns_->commit_with_inode(
      {obj.ino, std::move(txn), {.size = size, .mtime_ns = mtime_ns, .allocated_delta = footprint_delta}}, false);
  SFS_RETURN_IF_ERROR(committed.status());
  for (uint64_t index : dropped) {
    obj.chunks.erase(index);
    drop_deferred(obj, index);
  }
  for (auto& [index, rec] : cut) {
    drop_deferred(obj, index, rec.blocks());
    obj.chunks[index] = std::move(rec);
  }
  if (cache_) {
    for (uint64_t index : dropped) cache_->erase(obj.ino, index);
    for (const auto& [index, rec] : obj.chunks) {
      if (index * obj.chunk_size + rec.length >= size) cache_->erase(obj.ino, index);  // the cut one
    }
  }
  ledger_.release_later(std::move(freed));
  return committed;
}

// A block's checksum is of its bytes with zeros past the chunk's length
// (see TailVerifiesZeroed()), and appends write the last block in place. So
// a cut inside a block stores the block, zero-padded, in new space: the
// bytes it cut off may still be durable data, which a later append in place
// must not overwrite before the cut is durable. (A pool with no room left,
// or a file of a ram directory, keeps the block where it is, unchanged.)
Status ObjectStore::cut_last_block(const Object& obj, uint64_t index, const ChunkRecord& before, ChunkRecord* after,
                                   std::vector<Freed>* freed) {
  const uint32_t valid = after->length % kBlock;
  if (valid == 0) return Status::OK();
  const uint32_t last = after->blocks() - 1;
  AlignedBuffer block(kBlock);
  // Unreadable: it keeps its checksum and its place (it reads as EIO either way).
  if (!read_old_blocks(obj, index, before, last, 1, block.data()).ok()) return Status::OK();
  std::memset(block.data() + valid, 0, kBlock - valid);
  after->crcs[last] = Crc32c(block.data(), kBlock);
  std::erase_if(after->pending, [&](const auto& p) { return p.first == last; });
  if (obj.strategy->ram_only()) return Status::OK();
  std::vector<Replica> fresh, moved;
  std::vector<IoRequest> reqs;
  for (const Replica& r : after->replicas) {
    SegmentAllocator* a = drives_[r.segment].allocator;
    Replica& f = fresh.emplace_back();
    f.segment = r.segment;
    if (!a || !a->allocate_spread(kBlock, &f.extents).ok()) {
      // No room: the block stays as it is on the drive, where it verifies
      // with its tail zeroed (only a later append in place could then
      // overwrite cut-off bytes before the cut is durable).
      fresh.pop_back();
      release_now(fresh);
      return Status::OK();
    }
    moved.push_back(SpliceReplica(r, uint64_t{last} * kBlock, kBlock, f.extents));
    add_requests(IoRequest::Op::kWrite, f, 0, kBlock, block.data(), &reqs);
  }
  if (Status s = write_to_drives(reqs); !s.ok()) {
    release_now(fresh);
    return s;
  }
  for (const Replica& r : after->replicas) {
    r.map(uint64_t{last} * kBlock, kBlock, [&](uint64_t at, uint64_t, uint64_t n) { freed->push_back({r.segment, {at, n}}); });
  }
  after->replicas = std::move(moved);
  return Status::OK();
}

Status ObjectStore::write_zeros(Object& obj, uint64_t offset, uint64_t len) {
  static const AlignedBuffer zeros(1 << 20);
  for (uint64_t done = 0; done < len;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(len - done, zeros.size()));
    SFS_RETURN_IF_ERROR(write(obj, offset + done, zeros.data(), n).status());
    done += n;
  }
  return Status::OK();
}

Status ObjectStore::punch_hole(Object& obj, uint64_t offset, uint64_t len) {
  const uint64_t end = offset + len;
  std::vector<std::pair<uint64_t, uint64_t>> zero;  // written ranges of chunks covered in part
  {
    std::unique_lock lock(obj.mu);
    SFS_RETURN_IF_ERROR(ensure_loaded(obj));
    SFS_RETURN_IF_ERROR(settle(obj));  // a chunk dropped must not take a logged write later
    Transaction txn;
    std::vector<Freed> freed;
    std::vector<uint64_t> dropped;
    int64_t footprint_delta = 0;
    for (const auto& [index, rec] : obj.chunks) {
      const uint64_t start = index * obj.chunk_size, data_end = start + rec.length;
      if (start >= end || start + obj.chunk_size <= offset) continue;
      if (start >= offset && start + obj.chunk_size <= end) {
        meta::DeleteChunk(&txn, obj.ino, index, rec);
        FreeLedger::add_freed(rec.replicas, &freed);
        footprint_delta -= static_cast<int64_t>(Footprint(rec));
        dropped.push_back(index);
      } else if (std::max(start, offset) < std::min(data_end, end)) {
        zero.emplace_back(std::max(start, offset), std::min(data_end, end));
      }
    }
    const int64_t now = meta::NowNs();
    meta::InodeChange change;
    change.mtime_ns = now;
    change.allocated_delta = footprint_delta;
    SFS_RETURN_IF_ERROR(ns_->commit_with_inode({obj.ino, std::move(txn), change}, false).status());
    for (uint64_t index : dropped) {
      obj.chunks.erase(index);
      drop_deferred(obj, index);
    }
    if (cache_) {
      for (uint64_t index : dropped) cache_->erase(obj.ino, index);
    }
    ledger_.release_later(std::move(freed));
  }
  for (const auto& [from, to] : zero) SFS_RETURN_IF_ERROR(write_zeros(obj, from, to - from));
  return Status::OK();
}

Status ObjectStore::allocate(Object& obj, uint64_t offset, uint64_t len, bool keep_size) {
  SFS_ASSIGN_OR_RETURN(InodeRecord inode, ns_->get(obj.ino));
  const uint64_t end = keep_size ? std::min(offset + len, inode.size) : offset + len;
  std::vector<std::pair<uint64_t, uint64_t>> empty;  // parts of the range that hold no data
  {
    std::unique_lock lock(obj.mu);
    SFS_RETURN_IF_ERROR(ensure_loaded(obj));
    for (const ChunkPiece& piece : SplitRange(offset, end > offset ? end - offset : 0, obj.chunk_size)) {
      const uint64_t start = piece.index * obj.chunk_size;
      auto it = obj.chunks.find(piece.index);
      // Bytes of a chunk below its length are data (written, or zeros the chunk already stores).
      const uint64_t from = std::max<uint64_t>(start + piece.offset, it == obj.chunks.end() ? 0 : start + it->second.length);
      const uint64_t to = start + piece.offset + piece.length;
      if (from < to) empty.emplace_back(from, to);
    }
  }
  for (const auto& [from, to] : empty) SFS_RETURN_IF_ERROR(write_zeros(obj, from, to - from));
  if (!keep_size && offset + len > inode.size) {
    SFS_ASSIGN_OR_RETURN(inode, ns_->get(obj.ino));  // the zeros may have grown it already
    if (offset + len > inode.size) SFS_RETURN_IF_ERROR(truncate(obj, offset + len, meta::NowNs()).status());
  }
  return Status::OK();
}

namespace {
// The checksum of a block of zeros: only such a block can be a hole inside a chunk.
uint32_t ZeroBlockCrc() {
  static const uint32_t crc = [] {
    const std::string zeros(kBlock, '\0');
    return Crc32c(zeros.data(), zeros.size());
  }();
  return crc;
}
}  // namespace

// A block is data unless it is past its chunk's data or holds only zeros (a
// punched range inside a chunk stores zeros, and so does a written one): so
// SEEK_DATA and SEEK_HOLE agree with what reads return, at block
// granularity. A block whose checksum is that of zeros is read to be sure;
// one that cannot be read, or whose checksum is not settled, counts as data.
Result<uint64_t> ObjectStore::seek(Object& obj, uint64_t offset, bool data, uint64_t size) {
  if (offset >= size) return Status(Code::kPastEnd, "offset is at or past the end of the file");
  if (!obj.loaded) {
    std::unique_lock lock(obj.mu);
    SFS_RETURN_IF_ERROR(ensure_loaded(obj));
  }
  std::shared_lock lock(obj.mu);
  const uint32_t zero_crc = ZeroBlockCrc();
  AlignedBuffer buf;
  uint64_t pos = offset;
  for (auto it = obj.chunks.lower_bound(offset / obj.chunk_size); it != obj.chunks.end() && pos < size; ++it) {
    const uint64_t start = it->first * obj.chunk_size;
    const ChunkRecord& rec = it->second;
    if (start > pos) {  // pos is in a hole before this chunk
      if (!data) return pos;
      pos = std::min(start, size);
      if (pos == size) break;
    }
    if (start + rec.length <= pos) continue;  // the data of this chunk ends before pos
    const uint32_t blocks = rec.blocks();
    auto maybe_zero = [&](uint32_t i) {
      return rec.crcs[i] == zero_crc &&
             std::none_of(rec.pending.begin(), rec.pending.end(), [&](const auto& p) { return p.first == i; });
    };
    for (uint32_t b = static_cast<uint32_t>((pos - start) / kBlock); b < blocks;) {
      if (!maybe_zero(b)) {  // data
        if (data) return std::max(pos, start + uint64_t{b} * kBlock);
        ++b;
        continue;
      }
      // A run of blocks that may be zeros, read in one go (at most 1 MiB).
      uint32_t end = b + 1;
      while (end < blocks && end - b < 256 && maybe_zero(end)) ++end;
      buf.resize_uninitialized(size_t{end - b} * kBlock);
      const uint32_t first = b;
      const bool readable = read_old_blocks(obj, it->first, rec, first, end - first, buf.data()).ok();
      for (; b < end; ++b) {
        const char* block = buf.data() + size_t{b - first} * kBlock;
        const bool zeros = readable && std::all_of(block, block + kBlock, [](char c) { return c == 0; });
        if (zeros != data) return std::max(pos, start + uint64_t{b} * kBlock);
      }
    }
    pos = std::max(pos, start + rec.length);
  }
  if (data) return Status(Code::kPastEnd, "no data after offset");
  return std::min(pos, size);
}

Result<bool> ObjectStore::trim(Object& obj) {
  std::unique_lock lock(obj.mu);
  if (!obj.loaded) return false;  // nothing written through this state
  Transaction txn;
  std::vector<Freed> freed;
  std::map<uint64_t, ChunkRecord> trimmed;
  int64_t footprint_delta = 0;
  for (const auto& [index, rec] : obj.chunks) {
    uint32_t need = static_cast<uint32_t>(RoundUp(rec.length, kBlock));
    if (need >= rec.capacity) continue;
    ChunkRecord after = rec;
    after.capacity = need;
    FreeLedger::add_freed(CutReplicas(after.replicas, need), &freed);
    footprint_delta += static_cast<int64_t>(Footprint(after)) - static_cast<int64_t>(Footprint(rec));
    meta::PutPlacement(&txn, obj.ino, index, after);  // only the reserved bytes changed
    trimmed[index] = std::move(after);
  }
  if (txn.empty()) return false;
  meta::InodeChange change;
  change.allocated_delta = footprint_delta;
  auto committed = ns_->commit_with_inode({obj.ino, std::move(txn), change}, false);
  SFS_RETURN_IF_ERROR(committed.status());
  for (auto& [index, rec] : trimmed) obj.chunks[index] = std::move(rec);
  ledger_.release_later(std::move(freed));
  return true;
}

Status ObjectStore::reclaim(uint64_t ino) {
  // Two callers can reach the same orphan at once (the last close racing the
  // unlink); only the first may free its extents, or they would be freed twice.
  std::lock_guard lock(reclaim_mu_);
  // A trim or truncate of the same object may still be running (the unlink
  // can come right after the last close): wait for it, then read the records.
  std::shared_ptr<Object> cached;
  {
    std::lock_guard objects_lock(objects_mu_);
    if (auto it = objects_.find(ino); it != objects_.end()) cached = it->second;
  }
  std::unique_lock<std::shared_mutex> object_lock;
  if (cached) object_lock = std::unique_lock(cached->mu);
  std::string ignored;
  Status exists = kv_->get(meta::InodeKey(ino), &ignored);
  if (exists.code() == Code::kNotFound) return Status::OK();  // already reclaimed
  SFS_RETURN_IF_ERROR(exists);
  SFS_ASSIGN_OR_RETURN(auto chunks, load_chunks(ino));
  Transaction txn;
  std::vector<Freed> freed;
  for (const auto& [index, rec] : chunks) {
    meta::DeleteChunk(&txn, ino, index, rec);
    FreeLedger::add_freed(rec.replicas, &freed);
  }
  SFS_RETURN_IF_ERROR(ns_->reclaim(ino, &txn));
  if (cached) {  // whoever still holds it must not write the reclaimed chunks back
    cached->chunks.clear();
    drop_deferred(*cached, ~uint64_t{0});
    if (cache_) cache_->erase_object(ino);
    object_lock.unlock();
    cached.reset();
  }
  if (cache_) cache_->erase_object(ino);
  forget_if_unused(ino);
  ledger_.release_later(std::move(freed));
  return Status::OK();
}

}  // namespace stripefs
