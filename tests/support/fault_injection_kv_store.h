// SPDX-License-Identifier: Apache-2.0
// A KvStore wrapper for tests that simulates power loss: commits not yet made
// durable (by a sync commit or sync()) are rolled back by drop_unsynced(),
// as RocksDB reopened after a power cut keeps only its synced WAL; so are the
// write log's records appended since the last sync.
#pragma once

#include <mutex>
#include <optional>

#include "meta/kv_store.h"
#include "meta/write_log.h"

namespace stripefs::meta {

class FaultInjectionKvStore final : public KvStore {
 public:
  explicit FaultInjectionKvStore(KvStore* inner) : inner_(inner) {}

  Status get(std::string_view key, std::string* value) override { return inner_->get(key, value); }
  Status scan(std::string_view prefix,
              const std::function<bool(std::string_view, std::string_view)>& fn) override {
    return inner_->scan(prefix, fn);
  }
  Status commit(const Transaction& txn, bool sync) override {
    std::lock_guard lock(mu_);
    if (fail_commits_) return Status::IOError("injected metadata commit error");
    if (!sync) {
      for (const auto& op : txn.ops()) {
        std::string old;
        Status s = inner_->get(op.key, &old);
        undo_.push_back({op.key, s.ok() ? std::optional<std::string>(old) : std::nullopt});
      }
    }
    SFS_RETURN_IF_ERROR(inner_->commit(txn, sync));
    if (sync) {
      undo_.clear();
      log_.mark_synced();
    }
    return Status::OK();
  }
  Status sync() override {
    std::lock_guard lock(mu_);
    SFS_RETURN_IF_ERROR(inner_->sync());
    undo_.clear();
    log_.mark_synced();
    return Status::OK();
  }
  Status append_log(std::span<const std::string_view> pieces) override {
    {
      std::lock_guard lock(mu_);
      if (fail_commits_) return Status::IOError("injected write log error");
    }
    return log_.append(pieces);
  }
  Result<uint64_t> roll_log() override { return log_.roll(); }
  Status drop_log(uint64_t through) override { return log_.drop(through); }
  Status read_log(const std::function<bool(std::string_view)>& fn) override { return log_.read(fn); }
  Result<Space> space() override { return inner_->space(); }
  // Every commit from now fails with an I/O error while set.
  void fail_commits(bool on) {
    std::lock_guard lock(mu_);
    fail_commits_ = on;
  }
  // Power cut: rolls back every commit since the last sync, newest first.
  Status drop_unsynced() {
    std::lock_guard lock(mu_);
    Transaction rollback;
    for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) {
      if (it->old) {
        rollback.put(it->key, *it->old);
      } else {
        rollback.del(it->key);
      }
    }
    undo_.clear();
    log_.drop_unsynced();
    return inner_->commit(rollback, true);
  }

 private:
  struct Undo {
    std::string key;
    std::optional<std::string> old;
  };
  KvStore* inner_;
  MemWriteLog log_;
  std::mutex mu_;
  std::vector<Undo> undo_;  // GUARDED_BY(mu_)
  bool fail_commits_ = false;  // GUARDED_BY(mu_)
};

}  // namespace stripefs::meta
