// SPDX-License-Identifier: Apache-2.0
// FreeLedger: the object store's record of what is not yet durable. It holds
// the space commits gave up until the WAL is synced (write protocol step 5 in
// object_store.h: a lost unsynced commit must never leave a record pointing
// at reused space), and the drives written since their last flush, which a
// sync flushes before it syncs the WAL.
//
// Thread-safe. sync_and_release() runs one at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "engine/io/io_backend.h"
#include "engine/store/drive_slot.h"
#include "meta/kv_store.h"
#include "meta/schema.h"

namespace stripefs {

class FreeLedger {
 public:
  struct Freed {  // space a commit gave up, on one segment
    uint32_t segment;
    meta::Extent extent;
  };
  // Every extent of the replicas, as Freed.
  static void add_freed(const std::vector<meta::Replica>& replicas, std::vector<Freed>* out);

  // Does not own its arguments; they outlive the ledger. drives is the
  // store's drive table, never resized (its slots are read without a lock).
  FreeLedger(meta::KvStore* kv, IoBackend* io, const std::vector<DriveSlot>* drives);

  // Holds space a commit gave up until the next successful sync_and_release().
  void release_later(std::vector<Freed> freed);
  // Records the drives reqs wrote (after they ran), to flush at the next sync.
  void mark_written(const std::vector<IoRequest>& reqs);
  // Flushes the written drives and syncs the WAL, then gives the held space
  // back to the allocators. On failure nothing is given back and every drive
  // stays marked: the next call tries again. Group sync: callers that arrive
  // while one runs wait, and the next runs once for all of them (a sync
  // that started after a call covers everything done before it).
  Status sync_and_release();
  // sync_and_release() calls so far.
  uint64_t syncs() const { return sync_calls_.load(); }

  // Bytes held, not yet reusable.
  uint64_t pending_bytes() const;
  // The same, for one segment.
  uint64_t pending_bytes(uint32_t segment) const;

 private:
  meta::KvStore* kv_;
  IoBackend* io_;
  const std::vector<DriveSlot>* drives_;
  std::mutex release_mu_;  // serializes sync_and_release()
  std::atomic<uint64_t> sync_calls_{0};  // sync_and_release() calls so far
  uint64_t synced_calls_ = 0;            // GUARDED_BY(release_mu_): calls a successful sync covered
  mutable std::mutex mu_;
  std::vector<Freed> pending_;  // GUARDED_BY(mu_)
  uint64_t pending_bytes_ = 0;  // GUARDED_BY(mu_)
  std::vector<bool> dirty_;     // GUARDED_BY(mu_): drives written since the last flush
};

}  // namespace stripefs
