// ObjectStore's deferred writes (write protocol step 2 in object_store.h).
//
// A small overwrite does not touch the drives: its blocks go into its
// metadata commit as a record (meta::DeferredKey), beside the chunk's new
// checksums, and stay in the object's memory, where reads find them. The
// write is one commit, and a power cut leaves each block either old (the
// commit was lost with its record) or recoverable (the record survived).
// Once a WAL sync has made the records durable, apply_deferred() copies the
// blocks to the drives, flushes them and deletes the records; a block is
// never overwritten on a drive before its record is durable. A mount replays
// the records a crash left, writing each block only if it is still what its
// chunk's checksum says: a block rewritten, moved or cut off since then has
// another checksum, or no chunk, and its old record is just deleted.
//
// These stay ObjectStore members: they read the object's chunk map under its
// lock, the drive table and the free ledger.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "engine/store/chunk_space.h"
#include "engine/store/crc32c.h"
#include "engine/store/object_store.h"
#include "engine/store/staged_write.h"
#include "meta/chunk_table.h"

namespace stripefs {

using meta::ChunkRecord;
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

void ObjectStore::add_deferred_records(StagedWrite& w, Transaction* txn) {
  {
    std::lock_guard lock(deferred_mu_);
    w.seq = next_seq_;
    next_seq_ += w.plans.size();
  }
  for (size_t i = 0; i < w.plans.size(); ++i) {
    StagedWrite::Plan& p = w.plans[i];
    meta::DeferredWrite d;
    d.ino = w.obj->ino;
    d.index = p.piece.index;
    d.first_block = p.first_block;
    d.blocks.assign(p.bytes, p.length());
    txn->put(meta::DeferredKey(w.seq + i), meta::EncodeDeferred(d));
    p.deferred = CopyAligned(p.bytes, p.length());
  }
}

void ObjectStore::keep_deferred(StagedWrite& w) {
  Object& obj = *w.obj;
  std::lock_guard lock(deferred_mu_);
  for (size_t i = 0; i < w.plans.size(); ++i) {
    const StagedWrite::Plan& p = w.plans[i];
    for (uint32_t b = p.first_block; b < p.last_block; ++b) {
      obj.deferred[{p.piece.index, b}] = {w.seq + i, p.deferred, size_t{b - p.first_block} * kBlock};
    }
    deferred_.push_back({obj.shared_from_this(), w.seq + i, p.piece.index, p.first_block,
                         p.last_block - p.first_block});
    deferred_bytes_ += p.length();
  }
}

void ObjectStore::overlay_deferred(const Object& obj, uint64_t index, uint32_t first, uint32_t count,
                                   char* buf) const {
  if (obj.deferred.empty()) return;
  for (auto it = obj.deferred.lower_bound({index, first});
       it != obj.deferred.end() && it->first.first == index && it->first.second < first + count; ++it) {
    std::memcpy(buf + size_t{it->first.second - first} * kBlock, it->second.data(), kBlock);
  }
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
  std::lock_guard lock(deferred_mu_);
  return deferred_bytes_;
}

void ObjectStore::maybe_apply_deferred() {
  if (deferred_bytes() < kDeferredApplyAt) return;
  if (Status s = apply_deferred(); !s.ok()) {
    spdlog::error("copying deferred writes to the drives failed (they stay in memory and in the metadata log): {}",
                  s.message());
  }
}

Status ObjectStore::apply_deferred() {
  std::lock_guard one(apply_mu_);
  std::vector<DeferredRecord> records;
  {
    std::lock_guard lock(deferred_mu_);
    records.swap(deferred_);
    deferred_bytes_ = 0;
  }
  if (records.empty()) return Status::OK();
  // On failure every record is kept for the next try: a block already
  // copied is skipped then (it left the object's memory), its record deleted.
  auto keep = [&](Status s) {
    std::lock_guard lock(deferred_mu_);
    for (const DeferredRecord& r : records) deferred_bytes_ += size_t{r.count} * kBlock;
    records.insert(records.end(), std::make_move_iterator(deferred_.begin()),
                   std::make_move_iterator(deferred_.end()));
    deferred_ = std::move(records);
    return s;
  };
  // 1. Every record durable before a block of it overwrites a drive's bytes.
  if (Status s = ledger_.sync_and_release(); !s.ok()) return keep(s);
  // 2. The blocks no later write replaced, object by object under its lock.
  std::stable_sort(records.begin(), records.end(),
                   [](const DeferredRecord& a, const DeferredRecord& b) { return a.obj.get() < b.obj.get(); });
  std::vector<IoRequest> reqs;
  for (size_t i = 0; i < records.size();) {
    Object& obj = *records[i].obj;
    std::unique_lock lock(obj.mu);
    reqs.clear();
    std::vector<std::map<std::pair<uint64_t, uint32_t>, Object::DeferredBlock>::iterator> copied;
    for (; i < records.size() && records[i].obj.get() == &obj; ++i) {
      const DeferredRecord& r = records[i];
      auto chunk = obj.chunks.find(r.index);
      for (uint32_t b = r.first; b < r.first + r.count; ++b) {
        auto it = obj.deferred.find({r.index, b});
        if (it == obj.deferred.end() || it->second.seq != r.seq) continue;  // rewritten or cut off since
        if (chunk == obj.chunks.end() || b >= chunk->second.blocks()) {  // cannot happen: cutting drops them
          obj.deferred.erase(it);
          continue;
        }
        for (const Replica& rep : chunk->second.replicas) {
          if (!drives_[rep.segment].available) continue;
          add_requests(IoRequest::Op::kWrite, rep, uint64_t{b} * kBlock, kBlock, const_cast<char*>(it->second.data()),
                       &reqs);
        }
        copied.push_back(it);
      }
    }
    if (Status s = write_to_drives(reqs); !s.ok()) return keep(s);
    for (auto it : copied) obj.deferred.erase(it);
  }
  // 3. The blocks durable on the drives, then their records go. (Lost, they
  // would be replayed at mount: the same bytes again.)
  if (Status s = ledger_.sync_and_release(); !s.ok()) return keep(s);
  Transaction done;
  std::vector<uint64_t> inos;
  for (const DeferredRecord& r : records) {
    done.del(meta::DeferredKey(r.seq));
    inos.push_back(r.obj->ino);
  }
  records.clear();
  // The records held the objects: those nobody else holds leave the cache now.
  for (uint64_t ino : inos) forget_if_unused(ino);
  return kv_->commit(done, false);
}

Status ObjectStore::replay_deferred() {
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

}  // namespace stripefs
