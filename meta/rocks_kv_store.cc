// SPDX-License-Identifier: Apache-2.0
// KvStore on RocksDB. One WriteBatch per Transaction; sync commits sync the WAL.
#include <rocksdb/db.h>
#include <rocksdb/table.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/write_batch.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "meta/kv_store.h"
#include "meta/write_log.h"

namespace stripefs::meta {
namespace {

class RocksKvStore final : public KvStore {
 public:
  RocksKvStore(std::string dir, std::unique_ptr<rocksdb::DB> db, std::unique_ptr<FileWriteLog> log, bool read_only)
      : dir_(std::move(dir)), db_(std::move(db)), log_(std::move(log)), read_only_(read_only) {}
  ~RocksKvStore() override {
    if (!read_only_) {
      db_->FlushWAL(true).PermitUncheckedError();
      db_->Close().PermitUncheckedError();
    }
  }

  Status get(std::string_view key, std::string* value) override {
    auto s = db_->Get(rocksdb::ReadOptions(), rocksdb::Slice(key.data(), key.size()), value);
    if (s.IsNotFound()) return Status::NotFound("no such key");
    return convert(s);
  }

  Status scan(std::string_view prefix,
              const std::function<bool(std::string_view, std::string_view)>& fn) override {
    // The iterator stops at the first key past the prefix instead of stepping
    // over every deleted key after it until a live one turns up: without the
    // bound, a scan for a prefix with no keys (the chunks of an empty file)
    // costs as much as all the deletions not yet compacted.
    std::string bound(prefix);
    while (!bound.empty() && static_cast<unsigned char>(bound.back()) == 0xff) bound.pop_back();
    rocksdb::Slice upper;
    rocksdb::ReadOptions ro;
    if (!bound.empty()) {
      bound.back() = static_cast<char>(static_cast<unsigned char>(bound.back()) + 1);
      upper = rocksdb::Slice(bound);
      ro.iterate_upper_bound = &upper;
    }
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
    rocksdb::Slice p(prefix.data(), prefix.size());
    for (it->Seek(p); it->Valid() && it->key().starts_with(p); it->Next()) {
      if (!fn(std::string_view(it->key().data(), it->key().size()),
              std::string_view(it->value().data(), it->value().size()))) {
        break;
      }
    }
    return convert(it->status());
  }

  Status commit(const Transaction& txn, bool sync) override {
    if (read_only_) return Status(Code::kPermission, "metadata opened read-only");
    rocksdb::WriteBatch batch;
    for (const auto& op : txn.ops()) {
      if (op.is_delete) {
        batch.Delete(op.key);
      } else {
        batch.Put(op.key, op.value);
      }
    }
    rocksdb::WriteOptions wo;
    wo.sync = sync;
    if (sync) SFS_RETURN_IF_ERROR(log_->sync());
    return convert(db_->Write(wo, &batch));
  }

  Status sync() override {
    if (read_only_) return Status::OK();
    SFS_RETURN_IF_ERROR(log_->sync());
    return convert(db_->SyncWAL());
  }

  Status append_log(std::span<const std::string_view> pieces) override { return log_->append(pieces); }
  Result<uint64_t> roll_log() override { return log_->roll(); }
  Status drop_log(uint64_t through) override { return log_->drop(through); }
  Status read_log(const std::function<bool(std::string_view)>& fn) override { return log_->read(fn); }

  // The directory's own files, and the room its file system has left.
  Result<Space> space() override {
    struct statvfs st;
    if (statvfs(dir_.c_str(), &st) != 0) {
      return Status::IOError("cannot stat the file system of " + dir_ + ": " + strerror(errno));
    }
    Space space;
    space.free = uint64_t{st.f_bavail} * st.f_frsize;
    space.size = uint64_t{st.f_blocks} * st.f_frsize;
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(dir_, ec)) {
      std::error_code size_ec;
      if (f.is_regular_file(size_ec)) space.used += f.file_size(size_ec);
    }
    return space;
  }

 private:
  static Status convert(const rocksdb::Status& s) {
    if (s.ok()) return Status::OK();
    if (s.IsCorruption()) return Status::Corruption("metadata store: " + s.ToString());
    if (s.IsNoSpace()) return Status::NoSpace("metadata store: " + s.ToString());
    return Status::IOError("metadata store: " + s.ToString());
  }

  const std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
  std::unique_ptr<FileWriteLog> log_;
  bool read_only_;
};

}  // namespace

Result<std::unique_ptr<KvStore>> OpenRocksKvStore(const std::string& dir, OpenMode mode) {
  rocksdb::Options options;
  options.create_if_missing = (mode == OpenMode::kCreate);
  options.error_if_exists = (mode == OpenMode::kCreate);
  options.paranoid_checks = true;
  options.max_background_jobs = 2;
  options.keep_log_file_num = 4;
  // The memtable remembers where the last key of each kind (its first byte:
  // inode, chunk, checksum, entry...) went in. A batch writes several kinds
  // at once, and each kind mostly arrives in order (new inodes, then their
  // chunk records), so an insert starts next to the last of its kind
  // instead of searching the whole memtable from the top.
  options.memtable_insert_with_hint_prefix_extractor.reset(rocksdb::NewFixedPrefixTransform(1));
  // A bloom filter over the memtable's keys: the lookup a new name needs
  // (is it taken?) finds it absent without searching the memtable. Filling
  // it is part of each insert, which the write-back flusher's batches do off
  // the caller's thread.
  options.memtable_whole_key_filtering = true;
  options.memtable_prefix_bloom_size_ratio = 0.02;
  // Chunk and inode lookups are point reads: a bloom filter and a block cache keep them off disk.
  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));

  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = (mode == OpenMode::kReadOnly)
                          ? rocksdb::DB::OpenForReadOnly(options, dir, &raw)
                          : rocksdb::DB::Open(options, dir, &raw);
  if (!s.ok()) {
    std::string why = s.ToString();
    if (s.IsIOError() && why.find("lock") != std::string::npos) {
      return Status(Code::kBusy, "metadata directory " + dir +
                                     " is in use (is the pool mounted?): " + why);
    }
    if (s.IsInvalidArgument() && why.find("does not exist") != std::string::npos) {
      return Status::NotFound(dir + " holds no stripefs pool (no metadata store)");
    }
    if (s.IsCorruption()) return Status::Corruption("metadata directory " + dir + " is damaged: " + why);
    return Status::IOError("cannot open metadata directory " + dir + ": " + why);
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  // The write log's segments live in a directory of their own: RocksDB
  // leaves it alone, and the store's LOCK (held above) covers it too.
  auto log = FileWriteLog::Open(dir + "/write-log", mode == OpenMode::kReadOnly);
  if (!log.ok()) return log.status();
  return std::unique_ptr<KvStore>(new RocksKvStore(dir, std::move(db), std::move(log).value(), mode == OpenMode::kReadOnly));
}

}  // namespace stripefs::meta
