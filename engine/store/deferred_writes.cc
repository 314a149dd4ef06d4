// SPDX-License-Identifier: Apache-2.0
// ObjectStore's deferred writes (write protocol step 2 in object_store.h).
//
// A small overwrite does not touch the drives and commits nothing: its
// blocks go as one record into the metadata store's write log
// (KvStore::append_log), its chunks' new checksums and the inode's mtime
// change in memory, and the blocks stay in the object's memory, where reads
// find them. A power cut leaves each block either old (the record was not
// synced) or recoverable (it was). settle() makes an object's logged writes
// part of its records: the log synced (no block overwrites a drive's bytes
// before its record is durable), the blocks written and flushed, then their
// checksums, the inode and the inode's log floor committed. Every other
// change of an object's chunk records settles it first, so a mount can
// replay every record above its inode's floor, in log order, into the
// chunks as committed. apply_deferred() settles everything and drops the
// log's closed segments. Pools written before the log may hold 'W' records
// (meta::DeferredKey): they are replayed at mount as before, each block only
// where its chunk's checksum is the record's.
//
// These stay ObjectStore members: they read the object's chunk map under its
// lock, the drive table and the free ledger.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "engine/store/chunk_space.h"
#include "base/crc32c.h"
#include "engine/store/object_store.h"
#include "engine/store/staged_write.h"
#include "meta/chunk_table.h"

namespace stripefs {

using meta::ChunkRecord;
using meta::InodeRecord;
using meta::Replica;
using meta::Transaction;
using namespace store_space;

namespace {
// The drives take only aligned buffers (O_DIRECT).
std::shared_ptr<const AlignedBuffer> CopyAligned(const char* bytes, size_t n) {
  auto copy = std::make_shared<AlignedBuffer>();
  copy->resize_uninitialized(n);
  std::memcpy(copy->data(), bytes, n);
  return copy;
}
}  // namespace

Result<InodeRecord> ObjectStore::log_deferred(StagedWrite& w, int64_t now) {
  // The inode first: failing there, nothing is logged. (Its mtime in memory
  // is all that a failed append below leaves.)
  meta::InodeChange change;
  change.mtime_ns = now;
  SFS_ASSIGN_OR_RETURN(InodeRecord inode, ns_->change_uncommitted(w.obj->ino, change));
  // The append and the records' place in deferred_ both under append_mu_
  // (appends are one at a time in the log anyway): apply_deferred() rolls
  // the log under it too, so every record of a segment it drops is one it
  // settled. deferred_mu_ is held only for moments, so writers checking
  // deferred_bytes() or settling never wait for an append. One record for
  // the whole write, so a crash replays all of it or none.
  std::lock_guard append(append_mu_);
  meta::LoggedWrite rec;
  {
    std::lock_guard lock(deferred_mu_);
    rec.seq = next_seq_++;
  }
  rec.ino = w.obj->ino;
  rec.mtime_ns = now;
  for (const StagedWrite::Plan& p : w.plans) {
    rec.parts.push_back({p.piece.index, p.first_block, std::string_view(p.bytes, p.length())});
  }
  const std::string header = meta::EncodeLoggedWriteHeader(rec);
  std::vector<std::string_view> pieces{header};
  for (const auto& part : rec.parts) pieces.push_back(part.blocks);
  SFS_RETURN_IF_ERROR(kv_->append_log(pieces));  // a number left unused on failure is harmless
  w.seq = rec.seq;
  for (StagedWrite::Plan& p : w.plans) p.deferred = CopyAligned(p.bytes, p.length());
  std::lock_guard lock(deferred_mu_);
  for (StagedWrite::Plan& p : w.plans) {
    deferred_.push_back({w.obj->shared_from_this(), p.length()});
    deferred_bytes_.fetch_add(p.length(), std::memory_order_relaxed);
  }
  return inode;
}

void ObjectStore::keep_deferred(StagedWrite& w) {
  Object& obj = *w.obj;
  for (const StagedWrite::Plan& p : w.plans) {
    for (uint32_t b = p.first_block; b < p.last_block; ++b) {
      obj.deferred[{p.piece.index, b}] = {w.seq, p.deferred, size_t{b - p.first_block} * kBlock};
    }
  }
}

uint32_t ObjectStore::overlay_deferred(const Object& obj, uint64_t index, uint32_t first, uint32_t count,
                                       char* buf) const {
  if (obj.deferred.empty()) return 0;
  uint32_t copied = 0;
  for (auto it = obj.deferred.lower_bound({index, first});
       it != obj.deferred.end() && it->first.first == index && it->first.second < first + count; ++it) {
    std::memcpy(buf + size_t{it->first.second - first} * kBlock, it->second.data(), kBlock);
    ++copied;
  }
  return copied;
}

void ObjectStore::drop_deferred(Object& obj, uint64_t index, uint32_t from, uint32_t to) {
  if (obj.deferred.empty()) return;
  if (index == ~uint64_t{0}) {
    obj.deferred.clear();
    return;
  }
  obj.deferred.erase(obj.deferred.lower_bound({index, from}), obj.deferred.lower_bound({index, to}));
}

uint64_t ObjectStore::deferred_bytes() const {
  return deferred_bytes_.load(std::memory_order_relaxed);
}

void ObjectStore::maybe_apply_deferred() {
  if (deferred_bytes() < kDeferredApplyAt) return;
  if (Status s = apply_deferred(); !s.ok()) {
    spdlog::error("copying deferred writes to the drives failed (they stay in memory and in the metadata log): {}",
                  s.message());
  }
}

Status ObjectStore::settle(std::span<Object* const> objs) {
  std::vector<Object*> logged;
  for (Object* o : objs) {
    if (!o->deferred.empty()) logged.push_back(o);
  }
  if (logged.empty()) return Status::OK();
  // 1. The log's records durable before a block of theirs overwrites a drive's bytes.
  SFS_RETURN_IF_ERROR(ledger_.sync_and_release());
  // 2. The blocks to every replica, then flushed: the commit below makes
  // their records moot, so they must be on the drives before it can be durable.
  std::vector<IoRequest> reqs;
  for (Object* o : logged) {
    for (const auto& [at, block] : o->deferred) {
      auto chunk = o->chunks.find(at.first);
      if (chunk == o->chunks.end() || at.second >= chunk->second.blocks()) continue;  // cannot happen: cutting drops them
      for (const Replica& rep : chunk->second.replicas) {
        if (!drives_[rep.segment].available) continue;
        add_requests(IoRequest::Op::kWrite, rep, uint64_t{at.second} * kBlock, kBlock, const_cast<char*>(block.data()),
                     &reqs);
      }
    }
  }
  SFS_RETURN_IF_ERROR(write_to_drives(reqs));
  SFS_RETURN_IF_ERROR(ledger_.sync_and_release());
  // 3. Their checksums, the inodes (the mtimes the writes gave them) and the
  // floors: the log's records of these inodes so far are now in the records.
  uint64_t next_seq;
  {
    std::lock_guard lock(deferred_mu_);
    next_seq = next_seq_;
  }
  std::vector<meta::Namespace::InodeUpdate> updates(logged.size());
  for (size_t i = 0; i < logged.size(); ++i) {
    Object& o = *logged[i];
    Transaction& txn = updates[i].write.records;
    updates[i].write.ino = o.ino;
    for (auto it = o.deferred.begin(); it != o.deferred.end();) {
      const uint64_t index = it->first.first;
      std::vector<uint32_t> blocks;
      for (; it != o.deferred.end() && it->first.first == index; ++it) blocks.push_back(it->first.second);
      auto chunk = o.chunks.find(index);
      if (chunk == o.chunks.end()) continue;
      meta::PutChecksumPagesOf(&txn, o.ino, index, chunk->second, blocks);
      chunk->second.whole_checksum_record = false;
    }
    txn.put(meta::LogFloorKey(o.ino), meta::EncodeU64(next_seq - 1));
  }
  updates[0].write.records.put(meta::LogSeqKey(), meta::EncodeU64(next_seq));
  ns_->commit_with_inodes(updates);
  for (const auto& u : updates) SFS_RETURN_IF_ERROR(u.result.status());
  for (Object* o : logged) o->deferred.clear();
  return Status::OK();
}

Status ObjectStore::apply_deferred() {
  std::lock_guard one(apply_mu_);
  std::vector<DeferredRecord> records;
  uint64_t through = 0;
  {
    std::lock_guard append(append_mu_);
    std::lock_guard lock(deferred_mu_);
    // The roll with no append under way: the closed segments hold exactly
    // the records taken here (and older ones, settled already).
    auto rolled = kv_->roll_log();
    if (!rolled.ok()) return rolled.status();
    through = rolled.value();
    records.swap(deferred_);
    deferred_bytes_.store(0, std::memory_order_relaxed);
  }
  // On failure every record is kept for the next try (its segment too).
  auto keep = [&](Status s) {
    std::lock_guard lock(deferred_mu_);
    for (const DeferredRecord& r : records) deferred_bytes_.fetch_add(r.bytes, std::memory_order_relaxed);
    records.insert(records.end(), std::make_move_iterator(deferred_.begin()),
                   std::make_move_iterator(deferred_.end()));
    deferred_ = std::move(records);
    return s;
  };
  // Every object of the records, locked in inode order (as replace_many does).
  std::vector<Object*> objs;
  for (const DeferredRecord& r : records) objs.push_back(r.obj.get());
  std::sort(objs.begin(), objs.end(), [](const Object* a, const Object* b) { return a->ino < b->ino; });
  objs.erase(std::unique(objs.begin(), objs.end()), objs.end());
  {
    std::vector<std::unique_lock<std::shared_mutex>> locks;
    for (Object* o : objs) locks.emplace_back(o->mu);
    if (Status s = settle(objs); !s.ok()) return keep(s);
  }
  // The floors durable, then the records they cover can go.
  if (Status s = ledger_.sync_and_release(); !s.ok()) return keep(s);
  std::vector<uint64_t> inos;
  for (const Object* o : objs) inos.push_back(o->ino);
  records.clear();
  // The records held the objects: those nobody else holds leave the cache now.
  for (uint64_t ino : inos) forget_if_unused(ino);
  return kv_->drop_log(through);
}

Status ObjectStore::replay_deferred() {
  SFS_RETURN_IF_ERROR(replay_deferred_records());
  return replay_log();
}

// The 'W' records of pools written before the write log: each block written
// only where its chunk's committed checksum is the record's.
Status ObjectStore::replay_deferred_records() {
  std::vector<std::string> keys;
  uint64_t last_seq = 0;
  std::map<uint64_t, std::map<uint64_t, ChunkRecord>> chunks_of;  // by inode, loaded as met
  std::vector<std::shared_ptr<const AlignedBuffer>> held;        // the requests' bytes
  std::vector<IoRequest> reqs;
  uint64_t blocks = 0;
  Status failed;
  SFS_RETURN_IF_ERROR(kv_->scan(meta::DeferredPrefixAll(), [&](std::string_view key, std::string_view value) {
    keys.emplace_back(key);
    last_seq = std::max(last_seq, meta::SeqFromDeferredKey(key));
    auto d = meta::DecodeDeferred(value);
    if (!d.ok()) {
      failed = d.status();
      return false;
    }
    auto chunks = chunks_of.find(d->ino);
    if (chunks == chunks_of.end()) {
      auto loaded = load_chunks(d->ino);  // an inode gone since has no chunks
      if (!loaded.ok()) {
        failed = loaded.status();
        return false;
      }
      chunks = chunks_of.emplace(d->ino, std::move(loaded).value()).first;
    }
    auto chunk = chunks->second.find(d->index);
    if (chunk == chunks->second.end()) return true;
    const ChunkRecord& rec = chunk->second;
    std::vector<uint32_t> crcs(d->count());
    const auto& bytes = held.emplace_back(CopyAligned(d->blocks.data(), d->blocks.size()));
    Crc32cBlocks(bytes->data(), kBlock, crcs.size(), crcs.data());
    for (uint32_t i = 0; i < crcs.size(); ++i) {
      const uint32_t b = d->first_block + i;
      if (b >= rec.blocks() || !rec.block_matches(b, crcs[i])) continue;  // replaced since
      for (const Replica& rep : rec.replicas) {
        if (!drives_[rep.segment].available) continue;
        add_requests(IoRequest::Op::kWrite, rep, uint64_t{b} * kBlock, kBlock, bytes->data() + size_t{i} * kBlock,
                     &reqs);
      }
      ++blocks;
    }
    return true;
  }));
  SFS_RETURN_IF_ERROR(failed);
  {
    std::lock_guard lock(deferred_mu_);
    next_seq_ = std::max(next_seq_, last_seq + 1);
  }
  if (keys.empty()) return Status::OK();
  SFS_RETURN_IF_ERROR(write_to_drives(reqs));
  SFS_RETURN_IF_ERROR(ledger_.sync_and_release());  // the blocks flushed before their records go
  Transaction done;
  for (const std::string& k : keys) done.del(k);
  SFS_RETURN_IF_ERROR(kv_->commit(done, true));
  spdlog::info("replayed {} deferred write(s): {} block(s) copied to the drives", keys.size(), blocks);
  return Status::OK();
}

// The write log's records newer than their inode's floor, in log order: each
// block written to its chunk's replicas and its checksum set, then (drives
// flushed) the checksums, mtimes and floors committed, synced, and the log
// dropped. A record of a chunk gone since has nothing to go to; replaying
// twice writes the same bytes.
Status ObjectStore::replay_log() {
  struct Logged {
    uint64_t floor = 0;
    std::map<uint64_t, ChunkRecord> chunks;  // as committed, with the records applied
    // (chunk, block) -> its newest logged bytes: a block logged twice is
    // written once, since the writes of one batch may land in any order.
    std::map<std::pair<uint64_t, uint32_t>, const char*> blocks;
    uint64_t last_seq = 0;
    int64_t mtime_ns = 0;
  };
  std::map<uint64_t, Logged> inodes;
  std::vector<std::shared_ptr<const AlignedBuffer>> held;  // the blocks' bytes
  uint64_t records = 0, max_seq = 0;
  Status failed;
  SFS_RETURN_IF_ERROR(kv_->read_log([&](std::string_view record) {
    auto x = meta::DecodeLoggedWrite(record);
    if (!x.ok()) {  // it passed the frame's checksum: damage, not a torn append
      failed = x.status();
      return false;
    }
    ++records;
    max_seq = std::max(max_seq, x->seq);
    auto [it, fresh] = inodes.try_emplace(x->ino);
    Logged& l = it->second;
    if (fresh) {
      std::string floor;
      if (Status s = kv_->get(meta::LogFloorKey(x->ino), &floor); s.ok()) {
        auto v = meta::DecodeU64Value(floor);
        if (!v.ok()) {
          failed = v.status();
          return false;
        }
        l.floor = v.value();
      } else if (s.code() != Code::kNotFound) {
        failed = s;
        return false;
      }
      auto loaded = load_chunks(x->ino);  // an inode gone since has no chunks
      if (!loaded.ok()) {
        failed = loaded.status();
        return false;
      }
      l.chunks = std::move(loaded).value();
    }
    if (x->seq <= l.floor) return true;  // settled before the crash
    for (const meta::LoggedWrite::Part& part : x->parts) {
      auto chunk = l.chunks.find(part.index);
      if (chunk == l.chunks.end()) continue;
      ChunkRecord& rec = chunk->second;
      const auto& bytes = held.emplace_back(CopyAligned(part.blocks.data(), part.blocks.size()));
      std::vector<uint32_t> crcs(part.count());
      Crc32cBlocks(bytes->data(), kBlock, crcs.size(), crcs.data());
      for (uint32_t i = 0; i < crcs.size(); ++i) {
        const uint32_t b = part.first_block + i;
        if (b >= rec.blocks()) continue;  // cannot happen: a cut settles first
        rec.crcs[b] = crcs[i];
        std::erase_if(rec.pending, [&](const auto& e) { return e.first == b; });
        l.blocks[{part.index, b}] = bytes->data() + size_t{i} * kBlock;
      }
    }
    l.last_seq = x->seq;
    l.mtime_ns = std::max(l.mtime_ns, x->mtime_ns);
    return true;
  }));
  SFS_RETURN_IF_ERROR(failed);
  uint64_t next_seq = max_seq + 1;
  {
    std::string stored;
    if (Status s = kv_->get(meta::LogSeqKey(), &stored); s.ok()) {
      SFS_ASSIGN_OR_RETURN(uint64_t v, meta::DecodeU64Value(stored));
      next_seq = std::max(next_seq, v);
    } else if (s.code() != Code::kNotFound) {
      return s;
    }
    std::lock_guard lock(deferred_mu_);
    next_seq_ = std::max(next_seq_, next_seq);
  }
  if (records == 0) return Status::OK();
  std::vector<IoRequest> reqs;
  uint64_t blocks = 0;
  for (auto& [ino, l] : inodes) {
    for (const auto& [at, bytes] : l.blocks) {
      for (const Replica& rep : l.chunks.at(at.first).replicas) {
        if (!drives_[rep.segment].available) continue;
        add_requests(IoRequest::Op::kWrite, rep, uint64_t{at.second} * kBlock, kBlock, const_cast<char*>(bytes),
                     &reqs);
      }
    }
    blocks += l.blocks.size();
  }
  SFS_RETURN_IF_ERROR(write_to_drives(reqs));
  SFS_RETURN_IF_ERROR(ledger_.sync_and_release());  // the blocks flushed before the records that cover them
  for (auto& [ino, l] : inodes) {
    if (l.blocks.empty()) continue;
    Transaction txn;
    for (auto it = l.blocks.begin(); it != l.blocks.end();) {
      const uint64_t index = it->first.first;
      std::vector<uint32_t> in_chunk;
      for (; it != l.blocks.end() && it->first.first == index; ++it) in_chunk.push_back(it->first.second);
      meta::PutChecksumPagesOf(&txn, ino, index, l.chunks.at(index), in_chunk);
    }
    txn.put(meta::LogFloorKey(ino), meta::EncodeU64(l.last_seq));
    meta::InodeChange change;
    auto inode = ns_->get(ino);
    if (!inode.ok() && inode.status().code() == Code::kNotFound) continue;  // cannot happen: its chunks go with it
    SFS_RETURN_IF_ERROR(inode.status());
    if (l.mtime_ns > inode->mtime_ns) change.mtime_ns = l.mtime_ns;
    SFS_RETURN_IF_ERROR(ns_->commit_with_inode({ino, std::move(txn), change}, false).status());
  }
  Transaction seq;
  seq.put(meta::LogSeqKey(), meta::EncodeU64(next_seq));
  SFS_RETURN_IF_ERROR(kv_->commit(seq, true));
  SFS_ASSIGN_OR_RETURN(uint64_t through, kv_->roll_log());
  SFS_RETURN_IF_ERROR(kv_->drop_log(through));
  spdlog::info("replayed {} logged write(s): {} block(s) copied to the drives", records, blocks);
  return Status::OK();
}

}  // namespace stripefs
