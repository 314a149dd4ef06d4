// SPDX-License-Identifier: Apache-2.0
// The namespace: inodes, directory entries, attributes and xattrs, kept in a
// KvStore. Each public mutation is one Transaction. Thread-safe: one mutex
// serializes mutations; inode records are cached in memory.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "meta/kv_store.h"
#include "meta/schema.h"

namespace stripefs::meta {

inline constexpr size_t kNameMax = 255;
inline constexpr size_t kXattrValueMax = 64 * 1024;

// What a new inode is; for regular files also its layout.
struct NewInode {
  uint32_t mode = 0;  // type and permission bits
  uint32_t uid = 0, gid = 0;
  uint64_t rdev = 0;
  std::string symlink;
  uint32_t chunk_size = 0;
  std::string strategy;
  uint32_t replicas = 1;
  std::vector<std::pair<std::string, std::string>> xattrs;  // set in the same batch (inherited layout)
};

// A setattr: only the fields set are changed. Size is the data path's job.
struct AttrChange {
  std::optional<uint32_t> mode;  // permission bits only
  std::optional<uint32_t> uid, gid;
  std::optional<int64_t> atime_ns, mtime_ns;
  bool keep_ctime = false;  // an access-time update by a read is not a change of the inode
};

// How the data path changes an inode in its commit (Namespace::InodeWrite).
// Size is set, or grown to a bound, or left; times and the allocated bytes
// likewise.
struct InodeChange {
  std::optional<uint64_t> size;     // the new size (a truncate, an object put)
  uint64_t size_at_least = 0;       // the size grows to this if smaller (a write)
  std::optional<int64_t> mtime_ns;  // sets ctime_ns too
  int64_t allocated_delta = 0;      // bytes reserved on the drives, every replica counted
};

// A new entry whose inode number is taken but which is not stored yet
// (Namespace::reserve): the record create() would have stored.
struct NewEntry {
  uint64_t parent = 0;
  std::string name;
  InodeRecord record;
  std::vector<std::pair<std::string, std::string>> xattrs;
};

struct Listing {
  std::string name;
  DirEntry entry;
};

int64_t NowNs();

class Namespace {
 public:
  // Adds the root directory and the inode counter to txn (used by mkfs).
  static void Format(Transaction* txn, uint32_t root_uid, uint32_t root_gid);
  // pool_uuid names object URIs: stripefs://<pool_uuid>/<inode hex>.
  static Result<std::unique_ptr<Namespace>> Open(KvStore* kv, std::string pool_uuid);
  // For a reader beside another process's writes (a read-only mount of an
  // etcd pool): from now on every load reads the store, so a record the
  // writer changed is never answered from memory.
  void read_through() {
    std::lock_guard lock(mu_);
    read_through_ = true;
    cache_.clear();
  }

  Result<InodeRecord> get(uint64_t ino);
  // What a read needs of get(): type bits, size and times, without copying
  // the record's strings (for the object API's and the mount's reads).
  struct Brief {
    uint32_t mode = 0;
    uint64_t size = 0;
    int64_t atime_ns = 0, mtime_ns = 0, ctime_ns = 0;
  };
  Result<Brief> brief(uint64_t ino);
  Result<InodeRecord> lookup(uint64_t parent, std::string_view name);
  // Creates a file, directory, symlink, FIFO, socket or device node.
  // Errors: kExists, kNotFound (parent), kNotDirectory, kNameTooLong.
  Result<InodeRecord> create(uint64_t parent, std::string_view name, const NewInode& n);
  // A regular file with no name in parent (open(O_TMPFILE)): stored at
  // nlink 0 with its orphan mark, so the caller reclaims it when its last
  // handle closes (or the next mount does), unless link() names it first.
  // The directory is not changed. Errors: kNotFound (parent), kNotDirectory.
  Result<InodeRecord> create_unnamed(uint64_t parent, const NewInode& n);
  // The checks and the record of create(), with the inode number taken, but
  // nothing of the entry stored: the caller stores it later, with the first
  // data of the new file (InodeUpdate::entry), or by add(). Until then
  // lookups do not find it, and the caller must keep the name from being
  // reserved twice. A reserved entry never stored leaves an unused number.
  Result<NewEntry> reserve(uint64_t parent, std::string_view name, NewInode n);
  // Stores a reserved entry on its own; kExists when the name was taken meanwhile.
  Result<InodeRecord> add(const NewEntry& e);
  Result<InodeRecord> link(uint64_t ino, uint64_t parent, std::string_view name);
  // Removes a non-directory entry and returns the inode as it is afterwards.
  // At nlink 0 the inode becomes an orphan, recorded in the same batch; the
  // caller reclaims it once no handle is open (or the next mount does).
  Result<InodeRecord> unlink(uint64_t parent, std::string_view name);
  Status rmdir(uint64_t parent, std::string_view name);
  // flags: RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT (the old name
  // becomes a whiteout, a character device 0/0 owned by uid:gid, in the same
  // commit: what overlayfs asks of its upper directory). Returns a replaced
  // inode, if one lost a link, so the caller can reclaim it when it became an
  // orphan.
  Result<std::optional<InodeRecord>> rename(uint64_t parent, std::string_view name,
                                            uint64_t new_parent, std::string_view new_name,
                                            unsigned flags, uint32_t uid = 0, uint32_t gid = 0);
  Result<InodeRecord> setattr(uint64_t ino, const AttrChange& change);
  Result<std::vector<Listing>> list(uint64_t dir);

  Result<std::string> getxattr(uint64_t ino, std::string_view name);
  // flags: XATTR_CREATE, XATTR_REPLACE.
  Status setxattr(uint64_t ino, std::string_view name, std::string_view value, int flags);
  Result<std::vector<std::string>> listxattr(uint64_t ino);
  Status removexattr(uint64_t ino, std::string_view name);

  // What a data-path commit writes for one inode: the records of its chunks
  // (placement records and checksum pages, put or deleted; chunk_table.h
  // builds them) and the change to the inode itself.
  struct InodeWrite {
    uint64_t ino = 0;
    Transaction records;
    InodeChange change;
  };
  // The data path's commit: applies w.change to the inode and commits it with
  // w.records as one batch. Returns the inode as committed.
  Result<InodeRecord> commit_with_inode(InodeWrite w, bool sync);
  // The same for many inodes in one batch (the write-back buffer's flush).
  // An inode's records and change go into the batch only if it still exists,
  // so a removed one leaves nothing behind. result: the new record, or the
  // error loading the inode (kNotFound: removed); every result is the
  // commit's error when it fails. entry: a reserved entry, stored by this
  // batch (with its directory's times) instead of loading an inode that
  // does not exist yet. Each write's records are moved into the batch.
  struct InodeUpdate {
    InodeWrite write;
    const NewEntry* entry = nullptr;
    Result<InodeRecord> result = Status::NotFound("not committed");
  };
  void commit_with_inodes(std::span<InodeUpdate> updates);
  // Applies change to the inode in memory only (a logged write: the write
  // log holds it until it is settled); the next commit of the inode stores it.
  Result<InodeRecord> change_uncommitted(uint64_t ino, const InodeChange& change);
  // Deletes an orphan's inode, xattrs and orphan mark, together with whatever
  // txn already holds (its chunk records), as one batch.
  Status reclaim(uint64_t ino, Transaction* txn);
  // Inodes whose last link went away (left over by a crash or still open).
  Result<std::vector<uint64_t>> orphans();

 private:
  Namespace(KvStore* kv, std::string uuid, uint64_t next_ino)
      : kv_(kv), uuid_(std::move(uuid)), next_ino_(next_ino), ino_bound_(next_ino) {}
  static constexpr uint64_t kInoBatch = 1024;  // inode numbers taken per write of the stored counter
  Result<InodeRecord> load(uint64_t ino);         // REQUIRES: mu_ held
  Result<InodeRecord> load_dir(uint64_t ino);     // REQUIRES: mu_ held
  Result<std::optional<DirEntry>> find(uint64_t parent, std::string_view name);  // REQUIRES: mu_ held
  Result<bool> is_empty_dir(uint64_t ino);        // REQUIRES: mu_ held
  // The directory parent, once name passes the checks of every new entry
  // (a valid name, a directory not removed, no entry of that name). REQUIRES: mu_ held.
  Result<InodeRecord> dir_for_new(uint64_t parent, std::string_view name);
  // The record of a new entry, its inode number taken. REQUIRES: mu_ held.
  Result<NewEntry> new_entry(uint64_t parent, std::string_view name, NewInode n);
  // Adds the new inode's own records to txn: the inode, its xattrs, its volatile mark.
  void put_new_inode(Transaction* txn, const NewEntry& e);
  // Adds e's records to txn, and to dir its new link and times. REQUIRES: mu_ held.
  void add_entry(Transaction* txn, const NewEntry& e, InodeRecord* dir, int64_t now);
  // Commits e with its directory dir, as one batch. REQUIRES: write_mu_ and mu_ held.
  Status store_entry(const NewEntry& e, InodeRecord dir, int64_t now);
  // Commits txn and, on success, installs the changed inodes in the cache.
  Status commit(Transaction* txn, const std::vector<InodeRecord>& changed, bool sync = false);  // REQUIRES: mu_ held
  void put_inode(Transaction* txn, const InodeRecord& r);
  void delete_xattrs(Transaction* txn, uint64_t ino);
  void drop_link(Transaction* txn, InodeRecord* r, int64_t now);

  // A change holds write_mu_ from its first read to its commit, so changes
  // apply one after another; readers need only mu_. A change holds mu_ as
  // well, except while commit_with_inodes builds and writes its large
  // batch: readers go on meanwhile, from the cache, which still has the
  // state before it, and so does reserve(), which holds only mu_: it
  // changes nothing stored but the inode counter.
  class ChangeLock {
   public:
    explicit ChangeLock(Namespace* ns) : writing_(ns->write_mu_), locked_(ns->mu_) {}

   private:
    std::lock_guard<std::mutex> writing_;
    std::lock_guard<std::mutex> locked_;
  };

  KvStore* kv_;
  std::string uuid_;
  std::mutex write_mu_;
  std::mutex mu_;
  uint64_t next_ino_;                                   // GUARDED_BY(mu_)
  uint64_t ino_bound_;                                  // GUARDED_BY(mu_): the stored counter, above next_ino_
  std::unordered_map<uint64_t, InodeRecord> cache_;     // GUARDED_BY(mu_)
  bool read_through_ = false;                            // GUARDED_BY(mu_): load() keeps nothing in cache_
};

}  // namespace stripefs::meta
