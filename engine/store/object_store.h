// SPDX-License-Identifier: Apache-2.0
// ObjectStore: reads, writes and truncates objects (the contents of regular
// files) as chunks striped over the pool's drives.
//
// Write protocol (DESIGN invariants 4 and 6):
//  1. New space is allocated in memory only; the allocator is rebuilt from the
//     chunk records at mount, so space of a write that never committed is free again.
//  2. A write never overwrites committed data in place before its commit is
//     durable, so a power cut leaves every block old or new, never unreadable:
//     - a small overwrite (up to kDeferredMax, inside the chunks' data) is
//       deferred: its blocks go into the metadata's write log, one record and
//       no commit, are read from memory, and are settled later: the log
//       synced, the blocks copied to the drives, their checksums committed
//       (deferred_writes.cc; replayed at mount);
//     - a larger one goes out of place: the blocks it overwrites get new
//       extents, and the commit switches the chunk's extents to them.
//     Only when the pool has no room for that does an overwrite go in place,
//     its new checksums first committed as "pending" beside the old ones.
//  3. Data goes to every replica, all pieces concurrently.
//  4. Chunk records and the inode's size/mtime commit in one batch
//     (replace_many: the records and inodes of many objects in one batch).
//  5. Space a commit gave up is reused only after the WAL is synced, so a lost
//     unsynced commit can never leave a record pointing at reused space.
#pragma once

#include <cstdint>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "engine/store/aligned_buffer.h"
#include "engine/placement/allocator.h"
#include "engine/store/chunk_cache.h"
#include "engine/store/drive_slot.h"
#include "engine/store/free_ledger.h"
#include "engine/store/striper.h"
#include "engine/io/io_backend.h"
#include "engine/placement/placement.h"
#include "meta/namespace.h"

namespace stripefs {

// What a scrub found, summed over the chunks it checked.
struct ScrubReport {
  uint64_t chunks = 0;
  uint64_t bytes = 0;             // bytes read and checked, every replica counted
  uint64_t repaired_blocks = 0;   // 4 KiB blocks rewritten from an intact replica
  uint64_t missing_replicas = 0;  // on drives absent from a degraded mount: replace-drive rebuilds them
  std::vector<std::string> unrepairable;  // one line per chunk that still has a bad block
  // Set by Pool::scrub before it starts: about what `bytes` will reach (the
  // present segments' used bytes), for a progress line's total and ETA.
  uint64_t planned_bytes = 0;

  void add(const ScrubReport& other);
};

class ObjectStore {
 public:
  // Per-object state: the chunk map (loaded on first use) and the lock that
  // orders writes against reads of the same object.
  struct Object : std::enable_shared_from_this<Object> {
    // Blocks of deferred writes not yet copied to the drives: what a read
    // must see instead of the drive's bytes. The blocks of one record share
    // one buffer, aligned for O_DIRECT.
    struct DeferredBlock {
      uint64_t seq = 0;  // of the log record holding it (meta::LoggedWrite)
      std::shared_ptr<const AlignedBuffer> bytes;
      size_t at = 0;  // where the block starts in bytes
      const char* data() const { return bytes->data() + at; }
    };
    uint64_t ino = 0;
    std::string uri;
    uint64_t hash = 0;
    uint32_t chunk_size = 0;
    uint32_t replicas = 1;
    const PlacementStrategy* strategy = nullptr;
    std::shared_mutex mu;
    bool loaded = false;                          // GUARDED_BY(mu)
    std::map<uint64_t, meta::ChunkRecord> chunks; // GUARDED_BY(mu)
    std::map<std::pair<uint64_t, uint32_t>, DeferredBlock> deferred;  // GUARDED_BY(mu): (chunk, block) ->
  };

  // Overwrites of at most this many bytes are deferred (protocol step 2).
  static constexpr size_t kDeferredMax = 64 << 10;
  // Deferred bytes held in memory before a write copies them to the drives.
  static constexpr uint64_t kDeferredApplyAt = 8 << 20;

  // Does not own its arguments; they outlive the store.
  ObjectStore(meta::KvStore* kv, meta::Namespace* ns, IoBackend* io, std::vector<DriveSlot> drives);

  // The shared state of a regular file, created on first use. just_created:
  // the inode was created a moment ago, so it has no chunks to load.
  Result<std::shared_ptr<Object>> object(const meta::InodeRecord& inode, bool just_created = false);
  // Drops the cached state of an object (its chunk map) when nothing but the
  // cache holds it, so memory follows the open files, not every file ever touched.
  void forget_if_unused(uint64_t ino);

  // Reads [offset, offset+len) into out; holes and bytes past the written
  // data read as zeros. The caller clips len to the file size.
  // kCorruption when no replica of a block matches its checksum.
  // With offset, len and out 4 KiB-aligned the drives read straight into out;
  // otherwise through a per-thread buffer and a copy.
  Status read(Object& obj, uint64_t offset, size_t len, char* out);
  // The same without a copy: reads the whole blocks around the range into buf
  // and returns where the range starts in it. Valid until buf is reused.
  Result<const char*> read(Object& obj, uint64_t offset, size_t len, AlignedBuffer& buf);
  // Writes data at offset and commits it with the inode's new size and mtime.
  // kNoSpace when the pool is full (nothing of this call is then stored).
  Result<meta::InodeRecord> write(Object& obj, uint64_t offset, const char* data, size_t len);
  // Makes data the object's whole contents (an object put), in one commit:
  // written to new extents, so a crash leaves the old contents or the new,
  // and the old extents are freed. Empty data truncates to 0.
  Result<meta::InodeRecord> replace(Object& obj, const char* data, size_t len);
  // One object's new whole contents for replace_many(), and how it went.
  struct Put {
    Object* obj = nullptr;
    const char* data = nullptr;
    size_t len = 0;
    const meta::NewEntry* entry = nullptr;  // a new object's reserved entry, stored by the same commit (len > 0)
    Status status;
  };
  // replace() of many objects at once (the write-back buffer's flush): one
  // submission to the drives and one metadata commit for all of them, so the
  // cost of a commit is shared. Each put succeeds or fails on its own: one
  // that finds no room, or whose object was removed (kNotFound), fails
  // alone; a failed drive write or commit fails them all. Each object may
  // appear once (its lock is held until the commit).
  void replace_many(std::span<Put> puts);
  // Sets the size: drops or cuts chunks past it; growing leaves a hole.
  Result<meta::InodeRecord> truncate(Object& obj, uint64_t size, int64_t mtime_ns);
  // fallocate(2) PUNCH_HOLE: frees the chunks wholly inside [offset,
  // offset+len) and writes zeros over the written bytes of the chunks it
  // covers in part. The size stays.
  Status punch_hole(Object& obj, uint64_t offset, uint64_t len);
  // fallocate(2) mode 0 and KEEP_SIZE: stores zeros in every part of
  // [offset, offset+len) that holds no data yet, so later writes there need no
  // new space; without keep_size the file grows to offset+len. With keep_size
  // nothing is stored past the end of the file.
  Status allocate(Object& obj, uint64_t offset, uint64_t len, bool keep_size);
  // lseek(2) SEEK_DATA (data=true) and SEEK_HOLE: the first offset at or after
  // offset where data or a hole starts; the end of the file counts as a hole.
  // kPastEnd when offset is at or past size, or no data follows.
  Result<uint64_t> seek(Object& obj, uint64_t offset, bool data, uint64_t size);
  // Gives back reserved but unwritten space at the end of each chunk (on last
  // close). True when it gave any back (the inode's allocated size changed).
  Result<bool> trim(Object& obj);
  // Deletes an orphan: its chunks, inode and xattrs, in one batch. Safe to call
  // more than once, also concurrently: an inode already gone is left alone.
  Status reclaim(uint64_t ino);
  // Makes everything written so far durable: drives flushed, WAL and write log synced.
  // (Deferred writes are durable in the write log; they stay in memory.)
  Status sync();
  // Settles every deferred write (none waiting: does nothing) and drops the
  // write log's records of them. Writes call it when more than
  // kDeferredApplyAt bytes wait; an unmount calls it too.
  Status apply_deferred();
  // At mount: copies the deferred writes a crash left to the drives and
  // commits their checksums: the write log's records newer than their
  // inode's floor, and the 'W' records of pools written before the log
  // (each block only if it is still what its chunk's checksum says). Before
  // the store is used.
  Status replay_deferred();
  // Deferred bytes waiting in memory.
  uint64_t deferred_bytes() const;
  // Syncs so far, asked for or made by the store itself (a write that finds
  // the pool full, or one that settles deferred writes first).
  uint64_t syncs() const { return ledger_.syncs(); }
  // Starts placing new chunks on a drive added to the pool while the store is
  // in use (its id had no slot yet; the I/O backend serves it already).
  // Readers and writers go on meanwhile. kInvalidArgument for an id that is
  // taken or past kMaxSegments.
  Status add_drive(DriveSlot slot);
  // Reads every replica of every chunk of obj, checks each block, and rewrites
  // a bad block (checksum mismatch or read error) from an intact replica.
  // Readers and writers of obj go on meanwhile; each chunk is checked under
  // the object's shared lock. Call sync() to make the repairs durable.
  Result<ScrubReport> scrub(Object& obj);
  // Turns the RAM tier's read cache on (capacity_bytes > 0) or off. Call
  // before the store is used.
  void set_cache(uint64_t capacity_bytes, const std::string& policy);
  // Zeros when the cache is off.
  CacheStats cache_stats() const { return cache_ ? cache_->stats() : CacheStats{}; }
  // Blocks rewritten from another replica since the store opened (by reads and scrubs).
  uint64_t repaired_blocks() const { return repaired_blocks_.load(std::memory_order_relaxed); }

  // Chunk records of an inode, by chunk index, straight from the store.
  Result<std::map<uint64_t, meta::ChunkRecord>> load_chunks(uint64_t ino);
  // Bytes given up by commits but not yet reusable (see protocol step 5).
  uint64_t pending_free_bytes() const;
  // The same, for one segment.
  uint64_t pending_free_bytes(uint32_t segment) const;

 private:
  using Freed = FreeLedger::Freed;
  Status ensure_loaded(Object& obj);  // REQUIRES: obj.mu held
  // Whether obj's chunks may enter the RAM tier: not when it is off, and not
  // for files of a ram directory (in memory already: they would be held twice).
  bool admits(const Object& obj) const { return cache_ && !obj.strategy->ram_only(); }
  // A write between planning and commit: the object's lock held, space
  // reserved, every block it writes ready in memory. A write is staged, its
  // blocks go to the drives, its records join a commit, and then it is
  // finished (the object's state updated) or abandoned (its space given back).
  struct StagedWrite {
    struct Plan;  // one chunk's part
    StagedWrite(Object& obj, uint64_t offset, size_t len, bool replace);
    ~StagedWrite();
    Object* obj;
    std::unique_lock<std::shared_mutex> lock;
    uint64_t offset;
    size_t len;
    bool replace;  // the object's old chunks are ignored while planning and dropped in the commit
    bool deferred = false;  // a small overwrite: its blocks go into the write log, not to the drives
    uint64_t seq = 0;       // deferred: the first record's sequence number (one per plan)
    std::vector<Plan> plans;
    std::map<uint64_t, meta::ChunkRecord> intents;  // chunk index -> record with pending checksums
    std::vector<Freed> freed;                       // space the commit gives up
  };
  // write() and replace(): one staged write on its own.
  Result<meta::InodeRecord> write_or_replace(Object& obj, uint64_t offset, const char* data, size_t len,
                                             bool replace);
  // Reserves the space, prepares the blocks and commits the intent for
  // in-place overwrites. On failure nothing stays reserved.
  Status stage(StagedWrite& w, const char* data);
  // The steps of stage(): each chunk's space planned, then for each plan its
  // blocks prepared and their checksums added to the intent.
  Status plan_chunk(StagedWrite& w, const ChunkPiece& piece);
  Status prepare_blocks(const Object& obj, StagedWrite::Plan& p, const char* data);
  void add_checksums(StagedWrite& w, StagedWrite::Plan& p, meta::Transaction* intent);
  // Moves the blocks p overwrites to new extents (protocol step 2); false
  // when the drives have no room for them (nothing then changed).
  bool move_out_of_place(StagedWrite::Plan& p);
  void queue_writes(const StagedWrite& w, std::vector<IoRequest>* reqs) const;
  // A deferred write's records into the write log, its mtime into the
  // inode in memory, and its blocks into the object: the write, done.
  Result<meta::InodeRecord> log_deferred(StagedWrite& w, int64_t now);
  void keep_deferred(StagedWrite& w);
  // Settles the deferred blocks of objs (their locks held exclusively): the
  // write log synced, the blocks written to the drives and flushed, then
  // their chunks' checksums, the inodes and the inodes' log floors committed
  // in one batch. Every change of an object's chunk records settles it
  // first: a commit of checksums whose blocks are only in the log, or of a
  // chunk the log would replay into later, could leave blocks reading EIO
  // or older bytes after a crash.
  Status settle(std::span<Object* const> objs);
  Status settle(Object& obj) {
    Object* one[] = {&obj};
    return settle(one);
  }
  // replay_deferred()'s two parts.
  Status replay_deferred_records();
  Status replay_log();
  // Copies the deferred blocks of chunk `index` among [first, first+count)
  // into buf (the blocks as read from a drive), and says how many there
  // were. REQUIRES: obj.mu held.
  uint32_t overlay_deferred(const Object& obj, uint64_t index, uint32_t first, uint32_t count, char* buf) const;
  // Forgets the deferred blocks [from, to) of chunk `index` (their bytes
  // were rewritten or cut off); index ~0: of every chunk.
  // REQUIRES: obj.mu held exclusively.
  static void drop_deferred(Object& obj, uint64_t index, uint32_t from = 0, uint32_t to = ~uint32_t{0});
  // After a write's commit: apply_deferred() when enough waits. Errors are
  // logged: the write itself is stored.
  void maybe_apply_deferred();
  // Runs reqs and marks their drives dirty.
  Status write_to_drives(std::vector<IoRequest>& reqs);
  // What w's commit writes: its chunk records, and the inode's new size,
  // times and footprint.
  void add_records(StagedWrite& w, meta::Namespace::InodeWrite* out, int64_t now);
  void finish(StagedWrite& w);   // after the commit
  void abandon(StagedWrite& w);  // instead of it
  void unreserve(StagedWrite& w);
  // read() of whole blocks: offset and len multiples of 4 KiB, out 4 KiB-aligned.
  Status read_aligned(Object& obj, uint64_t offset, size_t len, char* out);
  // Reads blocks [first, first+count) of a chunk into buf, verified, from any
  // good replica, and rewrites the replicas that failed the check from it.
  Status read_blocks(const Object& obj, uint64_t index, const meta::ChunkRecord& rec, uint32_t first, uint32_t count,
                     char* buf);
  // read_blocks for a read-modify-write: from memory when every block is a
  // deferred one (a small overwrite next to the last), else from the RAM tier
  // when it has the chunk, else from the drives.
  Status read_old_blocks(const Object& obj, uint64_t index, const meta::ChunkRecord& rec, uint32_t first,
                         uint32_t count, char* buf);
  Status scrub_chunk(const Object& obj, uint64_t index, const meta::ChunkRecord& rec, ScrubReport* report);
  // Writes the repair requests and marks their drives dirty; counts the blocks.
  Status rewrite(std::vector<IoRequest>& repairs);
  void release_now(const std::vector<meta::Replica>& replicas);
  // Reserves what a chunk needs: a whole chunk in one run per replica when
  // `ahead` and it can, else `need` bytes spread over free runs; syncs once
  // to reuse freed space before it gives up. kNoSpace says why.
  Result<std::pair<std::vector<meta::Replica>, uint32_t>> reserve(const Object& obj, uint64_t index, uint32_t need,
                                                                   bool ahead);
  // Grows every replica of rec from rec.capacity to `to` bytes on its own
  // segment: by lengthening its last extent, else (spread) with new extents
  // anywhere on the segment. On success rec's replicas and capacity are the
  // grown ones; otherwise nothing changed.
  bool grow_in_place(meta::ChunkRecord& rec, uint32_t to, bool spread);
  // A truncate's cut inside a block: after's last block becomes the old one
  // with zeros past the new length, stored in new space (its old space into
  // *freed), and its checksum that of those bytes.
  Status cut_last_block(const Object& obj, uint64_t index, const meta::ChunkRecord& before, meta::ChunkRecord* after,
                        std::vector<Freed>* freed);
  // write() of len zero bytes at offset, in pieces.
  Status write_zeros(Object& obj, uint64_t offset, uint64_t len);
  // True when every replica of rec is on a drive that is present.
  bool all_replicas_available(const meta::ChunkRecord& rec) const;
  // Orders rec's replicas so the ones on present drives come first.
  const meta::Replica& readable_replica(const meta::ChunkRecord& rec) const;
  // Appends the requests that move the chunk's bytes [pos, pos+len) of
  // replica r from or to buf: one per extent the range crosses.
  void add_requests(IoRequest::Op op, const meta::Replica& r, uint64_t pos, size_t len, char* buf,
                    std::vector<IoRequest>* out) const;

  meta::KvStore* kv_;
  meta::Namespace* ns_;
  IoBackend* io_;
  // Indexed by segment id; sized once to kMaxSegments (at least) and never
  // resized, so add_drive() can fill an empty slot while other threads read
  // their slots without a lock. A slot is read only for a segment id taken
  // from the placer or from a chunk record, both of which come after the
  // slot was filled (the placer publishes the id with release/acquire).
  std::vector<DriveSlot> drives_;
  std::mutex add_drive_mu_;  // one add_drive() at a time
  Placer placer_;                  // over the drives that take new chunks

  std::mutex objects_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<Object>> objects_;  // GUARDED_BY(objects_mu_)
  std::map<std::string, std::unique_ptr<PlacementStrategy>> strategies_;  // GUARDED_BY(objects_mu_)

  std::mutex reclaim_mu_;  // serializes reclaim(): see there

  FreeLedger ledger_;  // space given up by commits, and drives written, until the next sync
  // Deferred writes not yet settled by apply_deferred(), in log order: the
  // objects it must settle, and the bytes each holds in memory.
  struct DeferredRecord {
    std::shared_ptr<Object> obj;
    size_t bytes;
  };
  mutable std::mutex deferred_mu_;
  std::vector<DeferredRecord> deferred_;  // GUARDED_BY(deferred_mu_)
  std::atomic<uint64_t> deferred_bytes_{0};  // of deferred_'s records (read without the lock)
  std::mutex append_mu_;                  // a log append with its deferred_ records, or a roll of the log
  uint64_t next_seq_;                     // GUARDED_BY(deferred_mu_): of the next log record (or 'W' record)
  std::mutex apply_mu_;                   // one apply_deferred() at a time
  std::atomic<uint64_t> repaired_blocks_{0};
  std::unique_ptr<ChunkCache> cache_;  // null: the RAM tier is off
};

}  // namespace stripefs
