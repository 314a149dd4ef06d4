// SPDX-License-Identifier: Apache-2.0
// WriteBehindKvStore (see write_behind_kv_store.h).
//
// Every key this store wrote or read sits in one of two maps: dirty_ while a
// change to it is queued and not yet sent (its newest value, and the commit
// that set it), clean_ once the store behind holds the same. A value of
// nullopt means the key is known to be absent. whole_ lists prefixes under
// which every existing key is in one of the maps; whole_ and clean_ are
// dropped together when the cache outgrows its budget.
#include "meta/write_behind_kv_store.h"

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace stripefs::meta {
namespace {

template <typename V>
using StringMap = std::map<std::string, V, std::less<>>;

using Clock = std::chrono::steady_clock;
using Value = std::optional<std::string>;  // nullopt: the key is absent

// What a cached key costs, with the maps' own overhead roughly counted.
size_t Cost(std::string_view key, size_t value_bytes) { return key.size() + value_bytes + 64; }
size_t Cost(std::string_view key, const Value& v) { return Cost(key, v ? v->size() : 0); }

size_t OpBytes(const Transaction& txn) {
  size_t bytes = 0;
  for (const Transaction::Op& op : txn.ops()) bytes += op.key.size() + op.value.size();
  return bytes;
}

class WriteBehindKvStore final : public KvStore {
 public:
  WriteBehindKvStore(std::unique_ptr<KvStore> inner, const WriteBehindOptions& o) : inner_(std::move(inner)), o_(o) {
    sender_ = std::thread([this] { send(); });
  }

  // Sends what is queued before the store behind goes away.
  ~WriteBehindKvStore() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    sender_.join();
  }

  Status get(std::string_view key, std::string* value) override {
    std::unique_lock lock(mu_);
    if (const Value* held = find_held(key)) return Answer(*held, value);
    if (under_whole(key)) return Status::NotFound("no such key");
    const uint64_t epoch = epoch_;
    lock.unlock();
    Status s = inner_->get(key, value);
    if (!s.ok() && s.code() != Code::kNotFound) return s;
    lock.lock();
    remember(key, s.ok() ? Value(*value) : std::nullopt, epoch);
    return s;
  }

  // Scans the store behind once every earlier commit is sent. A scan that
  // runs to the end leaves its prefix whole in the cache, when it fits.
  Status scan(std::string_view prefix,
              const std::function<bool(std::string_view, std::string_view)>& fn) override {
    std::unique_lock lock(mu_);
    if (under_whole(prefix)) {
      const std::vector<std::pair<std::string, std::string>> rows = held_under(prefix);
      lock.unlock();
      for (const auto& [k, v] : rows) {
        if (!fn(k, v)) break;
      }
      return Status::OK();
    }
    SFS_RETURN_IF_ERROR(wait_sent(lock, last_seq_));
    const uint64_t epoch = epoch_;
    lock.unlock();
    std::vector<std::pair<std::string, std::string>> rows;
    size_t bytes = 0;
    bool to_end = true;
    SFS_RETURN_IF_ERROR(inner_->scan(prefix, [&](std::string_view k, std::string_view v) {
      if (bytes <= o_.cache_bytes / 8) {
        rows.emplace_back(k, v);
        bytes += Cost(k, v.size());
      }
      to_end = fn(k, v);
      return to_end;
    }));
    if (!to_end || bytes > o_.cache_bytes / 8) return Status::OK();
    lock.lock();
    if (epoch != epoch_) return Status::OK();
    for (auto& [k, v] : rows) remember(k, std::move(v), epoch);
    if (epoch != epoch_) return Status::OK();  // the cache was dropped while the rows went in
    mark_whole(prefix);
    return Status::OK();
  }

  Status commit(const Transaction& txn, bool sync) override {
    if (txn.empty()) return sync ? this->sync() : Status::OK();
    std::unique_lock lock(mu_);
    room_cv_.wait(lock, [&] { return queued_ops_ < o_.max_queued_ops || !failure_.ok(); });
    SFS_RETURN_IF_ERROR(failure_);
    const uint64_t seq = ++last_seq_;
    for (const Transaction::Op& op : txn.ops()) {
      if (auto it = clean_.find(op.key); it != clean_.end()) {
        clean_bytes_ -= Cost(it->first, it->second);
        clean_.erase(it);
      }
      dirty_.insert_or_assign(op.key, Dirty{op.is_delete ? std::nullopt : Value(op.value), seq});
    }
    queue_.push_back({seq, txn, OpBytes(txn)});
    queued_ops_ += txn.ops().size();
    work_cv_.notify_one();
    if (!sync) return Status::OK();
    SFS_RETURN_IF_ERROR(wait_sent(lock, seq));
    lock.unlock();
    return inner_->sync();
  }

  Status sync() override {
    {
      std::unique_lock lock(mu_);
      SFS_RETURN_IF_ERROR(wait_sent(lock, last_seq_));
    }
    return inner_->sync();
  }

  // The write log goes straight to the store behind, after every earlier
  // commit, so its records keep their order against the commits.
  Status append_log(std::span<const std::string_view> pieces) override {
    SFS_RETURN_IF_ERROR(all_sent());
    return inner_->append_log(pieces);
  }
  Result<uint64_t> roll_log() override { return inner_->roll_log(); }
  Status drop_log(uint64_t through) override {
    SFS_RETURN_IF_ERROR(all_sent());
    return inner_->drop_log(through);
  }
  Status read_log(const std::function<bool(std::string_view)>& fn) override {
    SFS_RETURN_IF_ERROR(all_sent());
    return inner_->read_log(fn);
  }
  Result<Space> space() override { return inner_->space(); }

  void known_empty(std::string_view prefix) override {
    std::lock_guard lock(mu_);
    mark_whole(prefix);
  }

 private:
  struct Dirty {
    Value value;
    uint64_t seq;  // the commit that set it
  };
  struct Queued {
    uint64_t seq;
    Transaction txn;
    size_t bytes;
  };

  static Status Answer(const Value& held, std::string* value) {
    if (!held) return Status::NotFound("no such key");
    *value = *held;
    return Status::OK();
  }

  const Value* find_held(std::string_view key) const {
    if (auto it = dirty_.find(key); it != dirty_.end()) return &it->second.value;
    if (auto it = clean_.find(key); it != clean_.end()) return &it->second;
    return nullptr;
  }

  // Every key held under prefix with a value, in order: the two maps never
  // hold the same key, so this merges their ranges.
  std::vector<std::pair<std::string, std::string>> held_under(std::string_view prefix) const {
    std::vector<std::pair<std::string, std::string>> rows;
    auto d = dirty_.lower_bound(prefix);
    auto c = clean_.lower_bound(prefix);
    auto in = [&](const std::string& k) { return std::string_view(k).starts_with(prefix); };
    for (;;) {
      const bool more_d = d != dirty_.end() && in(d->first), more_c = c != clean_.end() && in(c->first);
      if (!more_d && !more_c) return rows;
      if (more_d && (!more_c || d->first < c->first)) {
        if (d->second.value) rows.emplace_back(d->first, *d->second.value);
        ++d;
      } else {
        if (c->second) rows.emplace_back(c->first, *c->second);
        ++c;
      }
    }
  }

  bool under_whole(std::string_view key) const {
    auto it = whole_.upper_bound(key);
    return it != whole_.begin() && key.starts_with(*std::prev(it));
  }

  // Caches what the store behind answered for key, unless a commit (or an
  // earlier read) has put something newer in the maps since, or the cache
  // was dropped while the answer travelled.
  void remember(std::string_view key, Value v, uint64_t epoch) {
    if (epoch != epoch_ || find_held(key) != nullptr) return;
    clean_bytes_ += Cost(key, v);
    clean_.emplace(std::string(key), std::move(v));
    trim();
  }

  void mark_whole(std::string_view prefix) {
    if (whole_.emplace(prefix).second) clean_bytes_ += Cost(prefix, std::nullopt);
    trim();
  }

  void trim() {
    if (clean_bytes_ <= o_.cache_bytes) return;
    spdlog::debug("metadata cache: dropping {} clean keys ({} bytes) to stay within {} bytes", clean_.size(),
                  clean_bytes_, o_.cache_bytes);
    clean_.clear();
    whole_.clear();
    clean_bytes_ = 0;
    ++epoch_;
  }

  // Waits until commit seq is sent, or a send fails.
  Status wait_sent(std::unique_lock<std::mutex>& lock, uint64_t seq) {
    sent_cv_.wait(lock, [&] { return sent_seq_ >= seq || !failure_.ok(); });
    return sent_seq_ >= seq ? Status::OK() : failure_;
  }
  Status all_sent() {
    std::unique_lock lock(mu_);
    return wait_sent(lock, last_seq_);
  }

  // The sender: takes the oldest queued commits that fit one send, sends
  // them as one commit, and only then drops them from the queue.
  void send() {
    std::unique_lock lock(mu_);
    for (;;) {
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      Transaction merged;
      size_t n = 0, ops = 0, bytes = 0;
      for (; n < queue_.size(); ++n) {
        const Queued& q = queue_[n];
        if (n > 0 && (ops + q.txn.ops().size() > o_.max_send_ops || bytes + q.bytes > o_.max_send_bytes)) break;
        for (const Transaction::Op& op : q.txn.ops()) {
          if (op.is_delete) {
            merged.del(op.key);
          } else {
            merged.put(op.key, op.value);
          }
        }
        ops += q.txn.ops().size();
        bytes += q.bytes;
      }
      lock.unlock();
      Status s = inner_->commit(merged, false);
      lock.lock();
      if (!s.ok()) {
        if (failure_.ok()) {
          failed_since_ = Clock::now();
          spdlog::error("metadata store: cannot write {} queued changes: {}. They stay queued and are sent again "
                        "every {} ms; until one send succeeds, every change, sync and uncached directory read "
                        "fails with this error",
                        queued_ops_, s.message(), o_.retry_interval.count());
        }
        failure_ = s;
        sent_cv_.notify_all();
        room_cv_.notify_all();
        work_cv_.wait_for(lock, o_.retry_interval, [&] { return stopping_; });
        if (stopping_) {
          spdlog::error("metadata store: closing with {} changes it could not write; they are lost", queued_ops_);
          return;
        }
        continue;
      }
      if (!failure_.ok()) {
        // A warning, as the failure was, so that both are in the log at once.
        spdlog::warn("metadata store: writing again after {} s; the queued changes are sent",
                     std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - failed_since_).count());
        failure_ = Status::OK();
      }
      for (size_t i = 0; i < n; ++i) {
        const Queued& q = queue_.front();
        for (const Transaction::Op& op : q.txn.ops()) {
          auto it = dirty_.find(op.key);
          if (it == dirty_.end() || it->second.seq != q.seq) continue;  // a later commit changed it again
          clean_bytes_ += Cost(it->first, it->second.value);
          clean_.insert_or_assign(it->first, std::move(it->second.value));
          dirty_.erase(it);
        }
        queued_ops_ -= q.txn.ops().size();
        sent_seq_ = q.seq;
        queue_.pop_front();
      }
      trim();
      sent_cv_.notify_all();
      room_cv_.notify_all();
    }
  }

  const std::unique_ptr<KvStore> inner_;
  const WriteBehindOptions o_;

  std::mutex mu_;
  std::condition_variable work_cv_;  // the sender waits for work
  std::condition_variable sent_cv_;  // callers wait for their commits to be sent
  std::condition_variable room_cv_;  // commits wait for room in the queue
  StringMap<Dirty> dirty_;                         // GUARDED_BY(mu_)
  StringMap<Value> clean_;                         // GUARDED_BY(mu_)
  std::set<std::string, std::less<>> whole_;       // GUARDED_BY(mu_)
  size_t clean_bytes_ = 0;                         // GUARDED_BY(mu_): clean_ and whole_
  uint64_t epoch_ = 0;                             // GUARDED_BY(mu_): how many times they were dropped
  std::deque<Queued> queue_;                       // GUARDED_BY(mu_)
  size_t queued_ops_ = 0;                          // GUARDED_BY(mu_)
  uint64_t last_seq_ = 0;                          // GUARDED_BY(mu_): the newest commit
  uint64_t sent_seq_ = 0;                          // GUARDED_BY(mu_): every commit up to it is sent
  Status failure_;                                 // GUARDED_BY(mu_): the last send's error, while sends fail
  Clock::time_point failed_since_;                 // GUARDED_BY(mu_): when sends began to fail
  bool stopping_ = false;                          // GUARDED_BY(mu_)
  std::thread sender_;
};

}  // namespace

std::unique_ptr<KvStore> NewWriteBehindKvStore(std::unique_ptr<KvStore> inner, const WriteBehindOptions& options) {
  return std::make_unique<WriteBehindKvStore>(std::move(inner), options);
}

}  // namespace stripefs::meta
