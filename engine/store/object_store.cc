// SPDX-License-Identifier: Apache-2.0
// ObjectStore's core: the object cache (object(), forget_if_unused()), the
// drive table and add_drive(), the RAM tier's switch, and the glue the other
// parts share: requests for a replica's extents, writes that mark drives
// dirty, and sync. The other parts, each ObjectStore members in a file of
// their own: write_staging.cc (the write path), checked_reads.cc (reads,
// verified and repaired), object_ops.cc (truncate, punch_hole, allocate,
// seek, trim, reclaim); the free ledger is a class of its own
// (free_ledger.h). The write protocol is described in object_store.h.
#include "engine/store/object_store.h"

#include <fmt/format.h>

#include <algorithm>

#include "meta/chunk_table.h"

namespace stripefs {

using meta::ChunkRecord;
using meta::InodeRecord;
using meta::Replica;

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
      ledger_(kv, io, &drives_),
      next_seq_(1) {}

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


}  // namespace stripefs
