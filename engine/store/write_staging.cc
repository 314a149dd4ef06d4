// SPDX-License-Identifier: Apache-2.0
// ObjectStore's write path: a write is staged (space reserved, blocks ready,
// a small overwrite deferred, a larger one moved out of place), its blocks go
// to the drives (or, deferred, into its commit), its records join a commit,
// and it is finished or abandoned. write(),
// replace() and replace_many() are built from these steps. They stay
// ObjectStore members: every step reads the object's chunk map, the placer,
// the drive table, the RAM tier and the free ledger, which a class of its own
// would have to be handed one by one. The protocol is in object_store.h.
#include "engine/store/object_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "engine/store/chunk_space.h"
#include "engine/store/staged_write.h"
#include "base/crc32c.h"
#include "engine/store/striper.h"
#include "meta/chunk_table.h"

namespace stripefs {

using meta::ChunkRecord;
using meta::Extent;
using meta::InodeRecord;
using meta::Replica;
using meta::Transaction;
using namespace store_space;

namespace {
// Chunks up to this much data enter the RAM tier when written (see finish()).
constexpr uint32_t kWriteAdmitMax = 256 << 10;
}  // namespace

Result<InodeRecord> ObjectStore::write(Object& obj, uint64_t offset, const char* data, size_t len) {
  auto written = write_or_replace(obj, offset, data, len, /*replace=*/false);
  maybe_apply_deferred();
  return written;
}

Result<InodeRecord> ObjectStore::replace(Object& obj, const char* data, size_t len) {
  if (len == 0) return truncate(obj, 0, meta::NowNs());
  return write_or_replace(obj, 0, data, len, /*replace=*/true);
}

ObjectStore::StagedWrite::StagedWrite(Object& o, uint64_t off, size_t n, bool whole)
    : obj(&o), lock(o.mu), offset(off), len(n), replace(whole) {}
ObjectStore::StagedWrite::~StagedWrite() = default;

Result<InodeRecord> ObjectStore::write_or_replace(Object& obj, uint64_t offset, const char* data, size_t len,
                                                  bool replace) {
  StagedWrite w(obj, offset, len, replace);
  SFS_RETURN_IF_ERROR(stage(w, data));
  if (w.deferred) {  // one record in the write log, no commit
    auto logged = log_deferred(w, meta::NowNs());
    if (!logged.ok()) {
      abandon(w);
      return logged.status();
    }
    finish(w);
    return logged;
  }
  {
    std::vector<IoRequest> reqs;
    queue_writes(w, &reqs);
    if (Status s = write_to_drives(reqs); !s.ok()) {
      abandon(w);
      return s;
    }
  }
  meta::Namespace::InodeWrite record;
  record.ino = obj.ino;
  add_records(w, &record, meta::NowNs());
  auto committed = ns_->commit_with_inode(std::move(record), false);
  if (!committed.ok()) {
    abandon(w);
    return committed.status();
  }
  finish(w);
  return committed;
}

void ObjectStore::replace_many(std::span<Put> puts) {
  // Several object locks are held at once: taken in inode order.
  std::vector<Put*> by_ino;
  for (Put& p : puts) by_ino.push_back(&p);
  std::sort(by_ino.begin(), by_ino.end(), [](const Put* a, const Put* b) { return a->obj->ino < b->obj->ino; });
  std::vector<std::pair<Put*, std::unique_ptr<StagedWrite>>> staged;
  for (Put* p : by_ino) {
    if (p->len == 0) {
      p->status = replace(*p->obj, p->data, 0).status();
      continue;
    }
    auto w = std::make_unique<StagedWrite>(*p->obj, 0, p->len, /*replace=*/true);
    p->status = stage(*w, p->data);  // a put that finds no room fails alone
    if (p->status.ok()) staged.emplace_back(p, std::move(w));
  }
  if (staged.empty()) return;
  std::vector<IoRequest> reqs;
  for (auto& [p, w] : staged) queue_writes(*w, &reqs);
  if (Status s = write_to_drives(reqs); !s.ok()) {
    for (auto& [p, w] : staged) {
      abandon(*w);
      p->status = s;
    }
    return;
  }
  std::vector<meta::Namespace::InodeUpdate> updates(staged.size());
  const int64_t now = meta::NowNs();
  for (size_t i = 0; i < staged.size(); ++i) {
    StagedWrite& w = *staged[i].second;
    updates[i].write.ino = w.obj->ino;
    updates[i].entry = staged[i].first->entry;
    add_records(w, &updates[i].write, now);
  }
  ns_->commit_with_inodes(updates);
  for (size_t i = 0; i < staged.size(); ++i) {
    auto& [p, w] = staged[i];
    p->status = updates[i].result.ok() ? Status::OK() : updates[i].result.status();
    if (p->status.ok()) {
      finish(*w);
    } else {
      abandon(*w);
    }
  }
}

// Gives back every reservation of w (nothing of it was committed).
void ObjectStore::unreserve(StagedWrite& w) {
  for (StagedWrite::Plan& p : w.plans) {
    if (p.relocated) {
      release_now(p.after.replicas);
    } else if (p.after.capacity > p.before.capacity) {
      release_now(CutReplicas(p.after.replicas, p.before.capacity));
    }
    if (p.moved) release_now(p.fresh);
  }
  w.plans.clear();
}

void ObjectStore::abandon(StagedWrite& w) {
  unreserve(w);
  // Overwritten blocks may now hold old or new bytes: the cached records
  // must accept both, as the committed intents do.
  for (auto& [index, rec] : w.intents) w.obj->chunks[index] = std::move(rec);
  w.intents.clear();
  w.freed.clear();
}

Result<std::pair<std::vector<Replica>, uint32_t>> ObjectStore::reserve(const Object& obj, uint64_t index, uint32_t need,
                                                                        bool ahead) {
  Status why;
  for (int attempt = 0; attempt < 2; ++attempt) {
    // Ahead: a whole chunk in one run, so the writes that follow need no new
    // space and the chunk never moves (trim() gives back the rest at close).
    if (ahead && need < obj.chunk_size) {
      auto got = placer_.place(*obj.strategy, {obj.hash, index, obj.chunk_size, false}, obj.replicas, obj.replicas);
      if (got.ok()) return std::make_pair(std::move(got).value(), obj.chunk_size);
    }
    auto got = placer_.place(*obj.strategy, {obj.hash, index, need, true}, obj.replicas, obj.replicas);
    if (got.ok()) return std::make_pair(std::move(got).value(), need);
    why = got.status();
    // Space freed by commits becomes reusable after a sync; another writer
    // may be releasing some right now (it no longer counts as pending), so
    // sync unconditionally: that waits for any release in progress.
    if (attempt == 0) SFS_RETURN_IF_ERROR(ledger_.sync_and_release());
  }
  return Status::NoSpace(fmt::format("pool is full: chunk {} of object {} needs {} bytes on each of {} replica(s): {} ({})",
                                     index, obj.uri, need, obj.replicas, why.message(),
                                     placer_.describe_free(obj.strategy->ram_only())));
}

bool ObjectStore::grow_in_place(ChunkRecord& rec, uint32_t to, bool spread) {
  if (to <= rec.capacity) return true;
  const uint64_t more = to - rec.capacity;
  std::vector<Replica> grown = rec.replicas;
  std::vector<Replica> added;  // what was taken so far, to give back on failure
  for (Replica& r : grown) {
    SegmentAllocator* a = drives_[r.segment].allocator;
    if (!a || r.extents.empty()) break;
    Replica& more_space = added.emplace_back();
    more_space.segment = r.segment;
    const Extent& last = r.extents.back();
    if (a->try_extend(last.offset, last.length, last.length + more)) {
      more_space.extents.push_back({last.offset + last.length, more});
    } else if (!spread || !a->allocate_spread(more, &more_space.extents).ok()) {
      added.pop_back();
      break;
    }
    for (const Extent& e : more_space.extents) r.append(e);
  }
  if (added.size() < grown.size()) {
    placer_.release(added);
    return false;
  }
  rec.replicas = std::move(grown);
  rec.capacity = to;
  return true;
}

// 1. Space for one chunk's part: the chunk grown where it lies, or moved.
// On failure p is not added and holds nothing.
Status ObjectStore::plan_chunk(StagedWrite& w, const ChunkPiece& piece) {
  const Object& obj = *w.obj;
  StagedWrite::Plan p;
  p.piece = piece;
  auto it = w.replace ? obj.chunks.end() : obj.chunks.find(piece.index);
  p.existed = it != obj.chunks.end();
  if (p.existed) p.before = it->second;
  p.after = p.before;  // pending checksums of blocks this write does not cover stay (see prepare_blocks())
  p.after.length = std::max(p.before.length, piece.offset + piece.length);
  uint32_t need = static_cast<uint32_t>(RoundUp(p.after.length, kBlock));
  // A chunk with a replica on a missing drive moves, whole, to drives that are present.
  const bool degraded = p.existed && !all_replicas_available(p.before);
  if (need > p.before.capacity || degraded) {
    // Grown where it lies if its drives have room: first to a whole chunk
    // right after its last extent (a stream keeps long runs), else by what
    // this write needs, anywhere on the same drives. Otherwise it moves.
    // A replace knows the whole contents: just what is needed (no later
    // close gives back the rest of an object put).
    const bool grown = p.existed && !degraded &&
                       ((need < obj.chunk_size && grow_in_place(p.after, obj.chunk_size, false)) ||
                        grow_in_place(p.after, need, true));
    if (!grown) {
      SFS_ASSIGN_OR_RETURN(auto got, reserve(obj, piece.index, need, !w.replace));
      p.relocated = true;
      p.after.replicas = std::move(got.first);
      p.after.capacity = got.second;
    }
  }
  w.plans.push_back(std::move(p));
  return Status::OK();
}

// 2a. Whole blocks for the drives at p.bytes: the caller's bytes as they are,
// else a buffer with the old contents merged in where the write covers a
// block partly.
Status ObjectStore::prepare_blocks(const Object& obj, StagedWrite::Plan& p, const char* data) {
  const uint32_t old_blocks = p.before.blocks();
  const uint32_t end = p.piece.offset + p.piece.length;
  const uint32_t first = p.relocated ? 0 : std::min(p.piece.offset, p.before.length) / kBlock;
  const uint32_t last = p.relocated ? p.after.blocks() : static_cast<uint32_t>(RoundUp(end, kBlock) / kBlock);
  p.first_block = first;
  p.last_block = last;
  // A block left with new data and only a pending checksum by an interrupted
  // overwrite must keep that checksum until it is written again: dropping
  // it made the block fail its check (EIO) after the next write elsewhere
  // in the chunk.
  std::erase_if(p.after.pending, [&](const auto& e) { return e.first >= first && e.first < last; });
  const char* src = data + p.piece.buffer_offset;
  if (uint64_t{first} * kBlock == p.piece.offset && uint64_t{last} * kBlock == end &&
      !(p.relocated && p.existed && old_blocks > 0) && reinterpret_cast<uintptr_t>(src) % kBlock == 0) {
    // The write covers exactly these whole blocks and the caller's bytes are
    // aligned (the FUSE frontend arranges that): the drives take them as they are.
    p.bytes = src;
    return Status::OK();
  }
  // Every byte of it is set below: old blocks read, stale and new bytes written.
  p.buf.resize_uninitialized(size_t{last - first} * kBlock);
  p.bytes = p.buf.data();
  if (p.relocated && p.existed && old_blocks > 0) {
    SFS_RETURN_IF_ERROR(read_old_blocks(obj, p.piece.index, p.before, 0, old_blocks, p.buf.data()));
  } else if (p.existed) {
    uint32_t head = first, tail = last - 1;
    if (head < old_blocks && (p.piece.offset > head * kBlock || end < (head + 1) * kBlock)) {
      SFS_RETURN_IF_ERROR(read_old_blocks(obj, p.piece.index, p.before, head, 1, p.buf.data()));
    }
    if (tail != head && tail < old_blocks && end % kBlock != 0) {
      SFS_RETURN_IF_ERROR(
          read_old_blocks(obj, p.piece.index, p.before, tail, 1, p.buf.data() + size_t{tail - first} * kBlock));
    }
  }
  // Bytes past the old length are stale on disk: they read as zeros.
  uint64_t stale_from = std::max<uint64_t>(p.before.length, uint64_t{first} * kBlock) - uint64_t{first} * kBlock;
  if (stale_from < p.buf.size()) std::memset(p.buf.data() + stale_from, 0, p.buf.size() - stale_from);
  std::memcpy(p.buf.data() + (p.piece.offset - uint64_t{first} * kBlock), src, p.piece.length);
  return Status::OK();
}

// 2b. The new checksums of p's blocks. With intent (data overwritten in
// place: neither deferred nor moved), a block overwritten gets its new
// checksum as pending beside the old one, into intent (protocol step 2).
void ObjectStore::add_checksums(StagedWrite& w, StagedWrite::Plan& p, Transaction* intent) {
  const uint32_t first = p.first_block, last = p.last_block;
  const uint32_t old_blocks = p.before.blocks();
  p.after.crcs.resize(p.after.blocks());
  Crc32cBlocks(p.bytes, kBlock, last - first, p.after.crcs.data() + first);
  ChunkRecord pending = p.before;
  for (uint32_t b = first; b < std::min(last, old_blocks); ++b) {
    if (intent) pending.pending.emplace_back(b, p.after.crcs[b]);
  }
  if (intent && pending.pending.size() > p.before.pending.size()) {
    meta::PutChecksums(intent, w.obj->ino, p.piece.index, p.before, pending);
    pending.whole_checksum_record = false;  // stored as pages now
    w.intents.emplace(p.piece.index, std::move(pending));
  }
}

Status ObjectStore::stage(StagedWrite& w, const char* data) {
  Object& obj = *w.obj;
  SFS_RETURN_IF_ERROR(ensure_loaded(obj));
  Status s;
  for (const ChunkPiece& piece : SplitRange(w.offset, w.len, obj.chunk_size)) {
    if (s = plan_chunk(w, piece); !s.ok()) break;
  }
  // Protocol step 2: a small write that overwrites data is deferred whole;
  // otherwise each chunk's overwritten blocks move out of place. Files of
  // ram directories do neither: their data does not outlive the mount.
  // A write that starts at or past the chunk's end overwrites no data: it
  // rewrites the old last block with the same bytes below the old length,
  // and bytes past the length do not count in its checksum
  // (TailVerifiesZeroed()), so it goes in place.
  auto overwrites = [](const StagedWrite::Plan& p) {
    return p.existed && !p.relocated && p.piece.offset < p.before.length;
  };
  // Deferred: data overwritten, nothing past a chunk's length (a logged
  // write changes no length).
  auto inside = [](const StagedWrite::Plan& p) {
    return p.existed && !p.relocated && p.piece.offset + p.piece.length <= p.before.length;
  };
  const bool lasting = !w.replace && !obj.strategy->ram_only();
  w.deferred = s.ok() && lasting && w.len <= kDeferredMax && std::all_of(w.plans.begin(), w.plans.end(), inside);
  // Any other write changes chunk records: the deferred writes before it settle first.
  if (s.ok() && !w.deferred) s = settle(obj);
  Transaction intent;
  for (size_t i = 0; s.ok() && i < w.plans.size(); ++i) {
    StagedWrite::Plan& p = w.plans[i];
    s = prepare_blocks(obj, p, data);
    if (!s.ok()) break;
    // A pool too full for new extents leaves the blocks to be overwritten in place.
    if (lasting && !w.deferred && overwrites(p)) move_out_of_place(p);
    add_checksums(w, p, overwrites(p) && !p.moved && !w.deferred ? &intent : nullptr);
  }
  // 3. Intent for overwrites in place (the data follows, by the caller): only
  // when the pool had no room to move them. Not synced: syncing here would
  // first need every dirty drive flushed (the WAL sync makes all earlier
  // commits durable), a flush per overwrite. So a power cut can leave such a
  // block with its new bytes on the drive and only its old checksum: it then
  // reads as EIO, never as wrong bytes.
  if (s.ok() && !intent.empty()) s = kv_->commit(intent, false);
  if (!s.ok()) {  // nothing stays reserved, and no intent was committed
    w.intents.clear();
    unreserve(w);
    return s;
  }
  if (cache_ && w.replace) {
    cache_->erase_object(obj.ino);
  } else if (cache_) {
    for (const StagedWrite::Plan& p : w.plans) cache_->erase(obj.ino, p.piece.index);
  }
  return Status::OK();
}

bool ObjectStore::move_out_of_place(StagedWrite::Plan& p) {
  const uint32_t end = std::min(p.last_block, p.before.blocks());  // blocks past it hold no data yet
  if (p.first_block >= end) return true;
  const uint64_t pos = uint64_t{p.first_block} * kBlock, len = uint64_t{end - p.first_block} * kBlock;
  std::vector<Replica> moved;
  for (const Replica& r : p.after.replicas) {
    SegmentAllocator* a = drives_[r.segment].allocator;
    Replica fresh;
    fresh.segment = r.segment;
    if (!a || !a->allocate_spread(len, &fresh.extents).ok()) {
      release_now(p.fresh);
      p.fresh.clear();
      return false;
    }
    moved.push_back(SpliceReplica(r, pos, len, fresh.extents));
    p.fresh.push_back(std::move(fresh));
  }
  for (const Replica& r : p.after.replicas) {
    r.map(pos, len, [&](uint64_t at, uint64_t, uint64_t n) { p.replaced.push_back({r.segment, {at, n}}); });
  }
  p.after.replicas = std::move(moved);
  p.moved = true;
  return true;
}

void ObjectStore::queue_writes(const StagedWrite& w, std::vector<IoRequest>* reqs) const {
  for (const StagedWrite::Plan& p : w.plans) {
    for (const Replica& r : p.after.replicas) {
      add_requests(IoRequest::Op::kWrite, r, uint64_t{p.first_block} * kBlock, p.length(), const_cast<char*>(p.bytes),
                   reqs);
    }
  }
}

// 4. Chunk records and the inode's change, for the commit.
void ObjectStore::add_records(StagedWrite& w, meta::Namespace::InodeWrite* out, int64_t now) {
  const Object& obj = *w.obj;
  Transaction* txn = &out->records;
  int64_t footprint_delta = 0;
  if (w.replace) {  // every old chunk goes: its record now unless rewritten below, its space after the next sync
    for (const auto& [index, rec] : obj.chunks) {
      if (index >= w.plans.size()) meta::DeleteChunk(txn, obj.ino, index, rec);  // plans cover chunks 0..n-1
      footprint_delta -= static_cast<int64_t>(Footprint(rec));
      FreeLedger::add_freed(rec.replicas, &w.freed);
    }
  }
  static const ChunkRecord kNothing;
  for (StagedWrite::Plan& p : w.plans) {
    // What the metadata holds for the chunk now: the intent, else the chunk
    // as it was (for a replace, the old object's), else nothing.
    const ChunkRecord* stored = &kNothing;
    if (auto it = w.intents.find(p.piece.index); it != w.intents.end()) {
      stored = &it->second;
    } else if (auto old = obj.chunks.find(p.piece.index); old != obj.chunks.end()) {
      stored = &old->second;
    }
    meta::PutChunk(txn, obj.ino, p.piece.index, *stored, p.after);
    p.after.whole_checksum_record = false;
    footprint_delta += static_cast<int64_t>(Footprint(p.after)) - static_cast<int64_t>(Footprint(p.before));
    if (p.relocated && p.existed) {
      FreeLedger::add_freed(p.before.replicas, &w.freed);
    }
    w.freed.insert(w.freed.end(), p.replaced.begin(), p.replaced.end());
  }
  if (w.replace) {
    out->change.size = w.offset + w.len;
  } else {
    out->change.size_at_least = w.offset + w.len;
  }
  out->change.mtime_ns = now;
  out->change.allocated_delta = footprint_delta;
}

void ObjectStore::finish(StagedWrite& w) {
  Object& obj = *w.obj;
  if (w.replace) {
    obj.chunks.clear();
    drop_deferred(obj, ~uint64_t{0});
  }
  if (w.deferred) keep_deferred(w);
  for (StagedWrite::Plan& p : w.plans) {
    // Write-through admission of small chunks: a write that now holds a
    // chunk's whole data (a small object's put) has every byte at hand, so
    // the first read of it is a memory copy too. Large chunks are left out:
    // streams would pay a copy per write and churn the cache.
    if (admits(obj) && p.first_block == 0 && p.last_block == p.after.blocks() && p.after.length <= kWriteAdmitMax) {
      cache_->insert(obj.ino, p.piece.index, p.bytes, p.after.length);
    }
    // The drives now hold the newest bytes of the blocks written.
    if (!w.deferred) drop_deferred(obj, p.piece.index, p.first_block, p.last_block);
    obj.chunks[p.piece.index] = std::move(p.after);
  }
  w.plans.clear();  // nothing left to give back
  ledger_.release_later(std::move(w.freed));
}

}  // namespace stripefs
