// SPDX-License-Identifier: Apache-2.0
// The key-value seam under all metadata. RocksDB is the embedded default;
// MemKvStore backs unit tests; a distributed transactional KV can replace both.
#pragma once

#include <functional>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace stripefs::meta {

// One user-visible metadata change: every put and delete in it commits
// atomically (a RocksDB WriteBatch), or none does.
class Transaction {
 public:
  struct Op {
    bool is_delete;
    std::string key;
    std::string value;
  };
  void put(std::string key, std::string value) { ops_.push_back({false, std::move(key), std::move(value)}); }
  void del(std::string key) { ops_.push_back({true, std::move(key), {}}); }
  // Moves every op of other to the end of this batch, in order.
  void append(Transaction&& other) {
    ops_.insert(ops_.end(), std::make_move_iterator(other.ops_.begin()), std::make_move_iterator(other.ops_.end()));
    other.ops_.clear();
  }
  bool empty() const { return ops_.empty(); }
  const std::vector<Op>& ops() const { return ops_; }

 private:
  std::vector<Op> ops_;
};

// Thread-safe. get() returns NotFound for a missing key.
class KvStore {
 public:
  virtual ~KvStore() = default;
  virtual Status get(std::string_view key, std::string* value) = 0;
  // Calls fn for every key starting with prefix, in key order, until fn returns false.
  virtual Status scan(std::string_view prefix,
                      const std::function<bool(std::string_view key, std::string_view value)>& fn) = 0;
  // Applies txn atomically. With sync, it and everything before it survive power loss.
  virtual Status commit(const Transaction& txn, bool sync) = 0;
  // Makes every earlier commit and log record durable (syncs the WAL and the write log).
  virtual Status sync() = 0;

  // The write log: records beside the keys, in the same durability domain.
  // An appended record is in the operating system when append_log returns
  // (a killed process loses none) and durable after the next sync() or sync
  // commit. Records are read back in append order; one torn by a power cut
  // is not read, nor any after it in its segment. The object store logs
  // small overwrites here, one record each, instead of committing them.
  //
  // One record, the pieces concatenated.
  virtual Status append_log(std::span<const std::string_view> pieces) = 0;
  // Later appends go to a new segment; the one closed is synced and its id returned.
  virtual Result<uint64_t> roll_log() = 0;
  // Deletes the records of every segment up to and including `through`.
  virtual Status drop_log(uint64_t through) = 0;
  // Calls fn for every record, oldest first, until it returns false.
  virtual Status read_log(const std::function<bool(std::string_view record)>& fn) = 0;

  // What the store holds and the room it has left to grow: for RocksDB its
  // directory's files and the free space of their file system; for etcd the
  // database size against the cluster's space quota.
  struct Space {
    uint64_t used = 0;  // bytes the store takes
    uint64_t free = 0;  // bytes it may still grow by
    uint64_t size = 0;  // used and free, and whatever else shares the room
  };
  virtual Result<Space> space() = 0;

  // A hint from a caller about to create what owns prefix (a new
  // directory's entries, a new inode's xattrs): no key under it exists yet.
  // A store that caches (NewWriteBehindKvStore) then answers gets under it
  // from memory; the others ignore it.
  virtual void known_empty(std::string_view prefix) { (void)prefix; }
};

// In-memory store for tests. Crash-free: sync() is a no-op, and so is the log's durability.
std::unique_ptr<KvStore> NewMemKvStore();

enum class OpenMode { kCreate, kReadWrite, kReadOnly };
// Opens (or with kCreate, creates) a RocksDB store in dir. A store held by a
// running daemon cannot be opened kReadWrite: the error is kBusy.
Result<std::unique_ptr<KvStore>> OpenRocksKvStore(const std::string& dir, OpenMode mode);

// Opens the store where a pool's metadata lives, as --meta names it: a
// directory (RocksDB) or etcd://HOST:PORT[,HOST:PORT...]/PREFIX (see
// meta/etcd_kv_store.h and its IsEtcdUri).
Result<std::unique_ptr<KvStore>> OpenKvStore(const std::string& meta, OpenMode mode);

}  // namespace stripefs::meta
