// SPDX-License-Identifier: Apache-2.0
// In-memory KvStore: an ordered map under a mutex.
#include <cstdint>
#include <map>
#include <mutex>

#include "meta/kv_store.h"
#include "meta/write_log.h"

namespace stripefs::meta {
namespace {

class MemKvStore final : public KvStore {
 public:
  Status get(std::string_view key, std::string* value) override {
    std::lock_guard lock(mu_);
    auto it = map_.find(std::string(key));
    if (it == map_.end()) return Status::NotFound("no such key");
    *value = it->second;
    return Status::OK();
  }
  Status scan(std::string_view prefix,
              const std::function<bool(std::string_view, std::string_view)>& fn) override {
    std::vector<std::pair<std::string, std::string>> rows;
    {
      std::lock_guard lock(mu_);
      for (auto it = map_.lower_bound(std::string(prefix));
           it != map_.end() && it->first.starts_with(prefix); ++it) {
        rows.emplace_back(*it);
      }
    }
    for (auto& [k, v] : rows) {
      if (!fn(k, v)) break;
    }
    return Status::OK();
  }
  Status commit(const Transaction& txn, bool) override {
    std::lock_guard lock(mu_);
    for (const auto& op : txn.ops()) {
      if (op.is_delete) {
        map_.erase(op.key);
      } else {
        map_[op.key] = op.value;
      }
    }
    return Status::OK();
  }
  Status sync() override { return Status::OK(); }
  Status append_log(std::span<const std::string_view> pieces) override { return log_.append(pieces); }
  Result<uint64_t> roll_log() override { return log_.roll(); }
  Status drop_log(uint64_t through) override { return log_.drop(through); }
  Status read_log(const std::function<bool(std::string_view)>& fn) override { return log_.read(fn); }
  // The bytes of its keys and values; room is whatever memory the process gets.
  Result<Space> space() override {
    std::lock_guard lock(mu_);
    Space space;
    for (const auto& [k, v] : map_) space.used += k.size() + v.size();
    space.free = UINT64_MAX / 2;
    space.size = space.used + space.free;
    return space;
  }

 private:
  MemWriteLog log_;
  std::mutex mu_;
  std::map<std::string, std::string, std::less<>> map_;
};

}  // namespace

std::unique_ptr<KvStore> NewMemKvStore() { return std::make_unique<MemKvStore>(); }

}  // namespace stripefs::meta
