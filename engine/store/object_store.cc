// ObjectStore: the write protocol is described in object_store.h.
#include "engine/store/object_store.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "engine/store/aligned_buffer.h"
#include "engine/store/chunk_space.h"
#include "engine/store/crc32c.h"
#include "engine/store/striper.h"
#include "meta/chunk_table.h"

namespace stripefs {

using meta::ChunkRecord;
using meta::Extent;
using meta::Replica;
using meta::InodeRecord;
using meta::Transaction;
using namespace store_space;

namespace {

std::vector<Placer::Segment> PlaceableDrives(const std::vector<DriveSlot>& drives) {
  std::vector<Placer::Segment> out;
  for (const DriveSlot& d : drives) {
    if (d.allocator) out.push_back({d.id, d.allocator, d.ram});
  }
  return out;
}

// The drive table at its final size (see ObjectStore::drives_): slots past the
// pool's segments are empty (no allocator, not available) until add_drive().
std::vector<DriveSlot> SizedDriveTable(std::vector<DriveSlot> drives) {
  const size_t given = drives.size();
  drives.resize(std::max<size_t>(given, kMaxSegments));
  for (size_t i = given; i < drives.size(); ++i) drives[i] = {static_cast<uint32_t>(i), 0, nullptr, false};
  return drives;
}

}  // namespace

ObjectStore::ObjectStore(meta::KvStore* kv, meta::Namespace* ns, IoBackend* io, std::vector<DriveSlot> drives)
    : kv_(kv), ns_(ns), io_(io), drives_(SizedDriveTable(std::move(drives))), placer_(PlaceableDrives(drives_)),
      ledger_(kv, io, &drives_) {}

Status ObjectStore::add_drive(DriveSlot slot) {
  std::lock_guard lock(add_drive_mu_);
  if (slot.id >= drives_.size()) {
    return Status::Invalid(fmt::format("segment {} is past the largest segment id {}", slot.id, drives_.size() - 1));
  }
  DriveSlot& d = drives_[slot.id];
  if (d.allocator || d.available) return Status::Invalid(fmt::format("segment {} is in use already", slot.id));
  // No thread reads this slot yet: nothing names the id until the placer
  // hands it out, and Placer::add publishes it (release) after this store.
  d = slot;
  d.available = true;
  if (!slot.allocator) return Status::OK();
  return placer_.add({slot.id, slot.allocator, slot.ram});
}

Result<std::shared_ptr<ObjectStore::Object>> ObjectStore::object(const InodeRecord& inode, bool just_created) {
  std::lock_guard lock(objects_mu_);
  auto it = objects_.find(inode.ino);
  if (it != objects_.end()) return it->second;
  auto& strategy = strategies_[inode.strategy];
  if (!strategy) {
    auto made = MakeStrategy(inode.strategy);
    if (!made.ok()) {
      strategies_.erase(inode.strategy);
      return made.status();
    }
    strategy = std::move(made).value();
  }
  auto obj = std::make_shared<Object>();
  obj->ino = inode.ino;
  obj->uri = inode.uri;
  obj->hash = ObjectHash(inode.uri);
  obj->chunk_size = inode.chunk_size;
  obj->replicas = std::max<uint32_t>(1, inode.replicas);
  obj->strategy = strategy.get();
  obj->loaded = just_created;  // (no one else can hold it yet: it is not in objects_)
  objects_[inode.ino] = obj;
  return obj;
}

void ObjectStore::forget_if_unused(uint64_t ino) {
  std::lock_guard lock(objects_mu_);
  // References are only handed out under objects_mu_, so a count of one means no holder.
  auto it = objects_.find(ino);
  if (it != objects_.end() && it->second.use_count() == 1) objects_.erase(it);
}

Result<std::map<uint64_t, ChunkRecord>> ObjectStore::load_chunks(uint64_t ino) { return meta::LoadChunks(kv_, ino); }

Status ObjectStore::ensure_loaded(Object& obj) {
  if (obj.loaded) return Status::OK();
  SFS_ASSIGN_OR_RETURN(obj.chunks, load_chunks(obj.ino));
  obj.loaded = true;
  return Status::OK();
}

void ObjectStore::set_cache(uint64_t capacity_bytes, const std::string& policy) {
  SegmentAllocator* ram = nullptr;  // files of ram directories share the RAM segment with the cache
  for (const DriveSlot& d : drives_) {
    if (d.ram && d.allocator) ram = d.allocator;
  }
  std::function<uint64_t()> taken;
  if (ram) taken = [ram] { return ram->capacity() - ram->free_bytes(); };
  cache_ = capacity_bytes
               ? std::make_unique<ChunkCache>(capacity_bytes, [&policy] { return NewEvictionPolicy(policy); }, taken)
               : nullptr;
}

void ObjectStore::add_requests(IoRequest::Op op, const Replica& r, uint64_t pos, size_t len, char* buf,
                               std::vector<IoRequest>* out) const {
  const uint64_t base = drives_.at(r.segment).data_offset;
  r.map(pos, len, [&](uint64_t at, uint64_t from, uint64_t n) {
    out->push_back({op, r.segment, base + at, buf + from, static_cast<size_t>(n)});
  });
}

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
    Crc32cBlocks(buf, kBlock, count, crcs.data());
    const size_t bad_before = bad.size();
    for (uint32_t b = 0; b < count; ++b) {
      if (rec.block_matches(first + b, crcs[b])) continue;
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
      crcs.resize(p.count);
      Crc32cBlocks(p.dst, kBlock, p.count, crcs.data());
      for (uint32_t b = 0; b < p.count && good; ++b) good = p.rec->block_matches(p.first + b, crcs[b]);
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

void ObjectStore::release_now(const std::vector<Replica>& replicas) { placer_.release(replicas); }

bool ObjectStore::all_replicas_available(const ChunkRecord& rec) const {
  for (const Replica& e : rec.replicas) {
    if (!drives_.at(e.segment).available) return false;
  }
  return true;
}

const Replica& ObjectStore::readable_replica(const ChunkRecord& rec) const {
  for (const Replica& e : rec.replicas) {
    if (drives_.at(e.segment).available) return e;
  }
  return rec.replicas.front();  // none: the read fails and says which drive is missing
}

uint64_t ObjectStore::pending_free_bytes() const { return ledger_.pending_bytes(); }

uint64_t ObjectStore::pending_free_bytes(uint32_t segment) const { return ledger_.pending_bytes(segment); }

Status ObjectStore::sync() { return ledger_.sync_and_release(); }

Status ObjectStore::write_to_drives(std::vector<IoRequest>& reqs) {
  SFS_RETURN_IF_ERROR(io_->run(reqs));
  ledger_.mark_written(reqs);
  return Status::OK();
}


Result<InodeRecord> ObjectStore::truncate(Object& obj, uint64_t size, int64_t mtime_ns) {
  std::unique_lock lock(obj.mu);
  SFS_RETURN_IF_ERROR(ensure_loaded(obj));
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
      footprint_delta += static_cast<int64_t>(Footprint(after)) - static_cast<int64_t>(Footprint(rec));
      meta::PutChunk(&txn, obj.ino, index, rec, after);
      after.whole_checksum_record = false;
      cut[index] = std::move(after);
    }
  }
  auto committed = ns_->commit_with_inode(
      obj.ino,
      [&](InodeRecord& r) {
        r.size = size;
        r.mtime_ns = r.ctime_ns = mtime_ns;
        r.allocated = static_cast<uint64_t>(static_cast<int64_t>(r.allocated) + footprint_delta);
      },
      &txn, false);
  SFS_RETURN_IF_ERROR(committed.status());
  for (uint64_t index : dropped) obj.chunks.erase(index);
  for (auto& [index, rec] : cut) obj.chunks[index] = std::move(rec);
  if (cache_) {
    for (uint64_t index : dropped) cache_->erase(obj.ino, index);
    for (const auto& [index, rec] : obj.chunks) {
      if (index * obj.chunk_size + rec.length >= size) cache_->erase(obj.ino, index);  // the cut one
    }
  }
  ledger_.release_later(std::move(freed));
  return committed;
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
    SFS_RETURN_IF_ERROR(ns_->commit_with_inode(
                               obj.ino,
                               [&](InodeRecord& r) {
                                 r.mtime_ns = r.ctime_ns = now;
                                 r.allocated = static_cast<uint64_t>(static_cast<int64_t>(r.allocated) + footprint_delta);
                               },
                               &txn, false)
                            .status());
    for (uint64_t index : dropped) obj.chunks.erase(index);
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

Result<uint64_t> ObjectStore::seek(Object& obj, uint64_t offset, bool data, uint64_t size) {
  if (offset >= size) return Status(Code::kPastEnd, "offset is at or past the end of the file");
  if (!obj.loaded) {
    std::unique_lock lock(obj.mu);
    SFS_RETURN_IF_ERROR(ensure_loaded(obj));
  }
  std::shared_lock lock(obj.mu);
  uint64_t pos = offset;
  for (auto it = obj.chunks.lower_bound(offset / obj.chunk_size); it != obj.chunks.end(); ++it) {
    const uint64_t start = it->first * obj.chunk_size, data_end = start + it->second.length;
    if (data_end <= pos) continue;  // the data of this chunk ends before pos
    if (data) {
      if (start <= pos) return pos;
      if (start < size) return start;
      break;
    }
    if (start > pos) break;  // pos is in a hole before this chunk
    pos = data_end;          // in data: the hole starts where the data run ends
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
  auto committed = ns_->commit_with_inode(
      obj.ino,
      [&](InodeRecord& r) { r.allocated = static_cast<uint64_t>(static_cast<int64_t>(r.allocated) + footprint_delta); },
      &txn, false);
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
