// SPDX-License-Identifier: Apache-2.0
// FreeLedger: deferred frees and dirty drives; see free_ledger.h.
#include "engine/store/free_ledger.h"

namespace stripefs {

FreeLedger::FreeLedger(meta::KvStore* kv, IoBackend* io, const std::vector<DriveSlot>* drives)
    : kv_(kv), io_(io), drives_(drives), dirty_(drives->size(), false) {}

void FreeLedger::add_freed(const std::vector<meta::Replica>& replicas, std::vector<Freed>* out) {
  for (const meta::Replica& r : replicas) {
    for (const meta::Extent& e : r.extents) out->push_back({r.segment, e});
  }
}

void FreeLedger::release_later(std::vector<Freed> freed) {
  std::lock_guard lock(mu_);
  for (Freed& f : freed) {
    pending_bytes_ += f.extent.length;
    pending_.push_back(f);
  }
}

void FreeLedger::mark_written(const std::vector<IoRequest>& reqs) {
  std::lock_guard lock(mu_);
  for (const IoRequest& r : reqs) dirty_[r.segment] = true;
}

uint64_t FreeLedger::pending_bytes() const {
  std::lock_guard lock(mu_);
  return pending_bytes_;
}

uint64_t FreeLedger::pending_bytes(uint32_t segment) const {
  std::lock_guard lock(mu_);
  uint64_t total = 0;
  for (const Freed& f : pending_) total += f.segment == segment ? f.extent.length : 0;
  return total;
}

Status FreeLedger::sync_and_release() {
  // One at a time: a writer that found no room and syncs must see the space
  // an earlier, still running sync_and_release is about to give back.
  const uint64_t call = sync_calls_.fetch_add(1) + 1;
  std::lock_guard release(release_mu_);
  if (synced_calls_ >= call) return Status::OK();  // a sync that started after this call finished
  const uint64_t covered = sync_calls_.load();    // every call so far: their work is done
  std::vector<Freed> freed;
  std::vector<bool> dirty;
  {
    std::lock_guard lock(mu_);
    freed.swap(pending_);
    pending_bytes_ = 0;
    dirty.swap(dirty_);
    dirty_.assign(drives_->size(), false);
  }
  Status s;
  for (size_t i = 0; i < dirty.size() && s.ok(); ++i) {
    if (dirty[i]) s = io_->flush(static_cast<uint32_t>(i));
  }
  if (s.ok()) s = kv_->sync();
  if (!s.ok()) {  // nothing was released; try again next time
    release_later(std::move(freed));
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < dirty.size(); ++i) dirty_[i] = dirty_[i] || dirty[i];
    return s;
  }
  for (const Freed& f : freed) {
    // Space on a missing drive is not tracked; the drive's replacement rebuilds it.
    if (SegmentAllocator* a = (*drives_)[f.segment].allocator) a->release(f.extent.offset, f.extent.length);
  }
  synced_calls_ = covered;
  return Status::OK();
}

}  // namespace stripefs
