// SPDX-License-Identifier: Apache-2.0
// KvStore on etcd (see etcd_kv_store.h). Keys under the pool's prefix P:
//   P 'k' key            the store's keys
//   P 'l' seg:8 seq:8    write-log records, big-endian so they sort in order
//   P 'i' id:8 part:4    an oversized commit's ops, staged (see commit_staged)
//   P 'I' id:8           marks intent id complete: its parts are all there
//   P 'w'                the writer lock, bound to the writer's lease
#include "meta/etcd_kv_store.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "meta/etcd_client.h"
#include "meta/etcd_txn.h"

namespace stripefs::meta {

namespace pb = etcdserverpb;
using Clock = std::chrono::steady_clock;

namespace {

std::string Be(uint64_t v, int bytes) {
  std::string s(bytes, '\0');
  for (int i = bytes - 1; i >= 0; --i, v >>= 8) s[i] = static_cast<char>(v & 0xff);
  return s;
}
uint64_t FromBe(std::string_view s) {
  uint64_t v = 0;
  for (unsigned char c : s) v = (v << 8) | c;
  return v;
}

// The first key after every key that starts with prefix (etcd's range_end).
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
  if (prefix.empty()) return std::string(1, '\0');  // every key
  prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

class EtcdKvStore final : public KvStore {
 public:
  EtcdKvStore(std::unique_ptr<EtcdClient> client, bool read_only, EtcdOptions o)
      : etcd_(std::move(client)), p_(etcd_->target().prefix + "/"), read_only_(read_only), o_(o) {}

  ~EtcdKvStore() override {
    {
      std::lock_guard lock(keeper_mu_);
      stopping_ = true;
    }
    keeper_cv_.notify_all();
    if (keeper_.joinable()) keeper_.join();
    // Gives the pool back at once instead of when the lease runs out.
    if (lease_id_ != 0) (void)etcd_->revoke_lease(lease_id_);
  }

  // Takes the writer lock, finishes a staged commit a killed writer left,
  // and finds where the write log goes on.
  Status open(OpenMode mode) {
    SFS_ASSIGN_OR_RETURN(bool has_keys, any_key(p_ + "k"));
    if (mode == OpenMode::kCreate && has_keys) {
      return Status::Exists(etcd_->target().uri() + " already holds a stripefs pool (keys under its prefix)");
    }
    if (mode != OpenMode::kCreate && !has_keys) {
      return Status::NotFound(etcd_->target().uri() + " holds no stripefs pool (no keys under its prefix)");
    }
    if (read_only_) return Status::OK();
    SFS_RETURN_IF_ERROR(take_lock());
    SFS_RETURN_IF_ERROR(finish_staged());
    SFS_RETURN_IF_ERROR(find_log_end());
    keeper_ = std::thread([this] { keep(); });
    return Status::OK();
  }

  Status get(std::string_view key, std::string* value) override {
    pb::RangeRequest req;
    req.set_key(p_ + "k" + std::string(key));
    pb::RangeResponse resp;
    {
      std::shared_lock lock(staged_mu_);
      SFS_RETURN_IF_ERROR(etcd_->range(req, &resp, "get"));
    }
    if (resp.kvs_size() == 0) return Status::NotFound("no such key");
    *value = resp.kvs(0).value();
    return Status::OK();
  }

  Status scan(std::string_view prefix, const std::function<bool(std::string_view, std::string_view)>& fn) override {
    return scan_raw(p_ + "k" + std::string(prefix), p_.size() + 1, fn);
  }

  Status commit(const Transaction& txn, bool) override {
    if (read_only_) return Status(Code::kPermission, "metadata opened read-only");
    std::vector<Transaction::Op> full;
    for (const Transaction::Op* op : LastOpPerKey(txn)) full.push_back({op->is_delete, p_ + "k" + op->key, op->value});
    OpRefs ops;
    for (const Transaction::Op& op : full) ops.push_back(&op);
    if (ops.empty()) return Status::OK();
    if (FitsOneTxn(ops)) {
      std::shared_lock lock(staged_mu_);
      return apply(ops);
    }
    return commit_staged(ops);
  }

  // etcd answers a change only after a majority of members has it in a
  // synced Raft log, so every commit is already durable.
  Status sync() override { return Status::OK(); }

  Status append_log(std::span<const std::string_view> pieces) override {
    if (read_only_) return Status(Code::kPermission, "metadata opened read-only");
    Transaction::Op op{false, {}, {}};
    for (std::string_view p : pieces) op.value += p;
    {
      std::lock_guard lock(log_mu_);
      op.key = p_ + "l" + Be(log_segment_, 8) + Be(log_seq_++, 8);
    }
    std::shared_lock lock(staged_mu_);
    return apply({&op});
  }

  Result<uint64_t> roll_log() override {
    std::lock_guard lock(log_mu_);
    return log_segment_++;
  }

  Status drop_log(uint64_t through) override {
    if (read_only_) return Status(Code::kPermission, "metadata opened read-only");
    pb::TxnRequest req = locked_txn();
    auto* del = req.add_success()->mutable_request_delete_range();
    del->set_key(p_ + "l");
    del->set_range_end(p_ + "l" + Be(through + 1, 8));
    std::shared_lock lock(staged_mu_);
    return txn(req);
  }

  Status read_log(const std::function<bool(std::string_view)>& fn) override {
    return scan_raw(p_ + "l", 0, [&](std::string_view, std::string_view v) { return fn(v); });
  }

  // The whole cluster's database, which every pool under any prefix shares:
  // etcd refuses writes once its file reaches the quota.
  Result<Space> space() override {
    pb::StatusResponse resp;
    SFS_RETURN_IF_ERROR(etcd_->status(&resp));
    const auto file = static_cast<uint64_t>(std::max<int64_t>(resp.dbsize(), 0));
    Space space;
    space.used = resp.dbsizeinuse() > 0 ? static_cast<uint64_t>(resp.dbsizeinuse()) : file;
    space.size = std::max(o_.quota_bytes, file);
    space.free = space.size - file;
    return space;
  }

 private:
  // A Txn that runs only while this store holds the writer lock.
  pb::TxnRequest locked_txn() const {
    pb::TxnRequest req;
    pb::Compare* c = req.add_compare();
    c->set_key(p_ + "w");
    c->set_target(pb::Compare::LEASE);
    c->set_result(pb::Compare::EQUAL);
    c->set_lease(lease_id_);
    return req;
  }

  Status txn(const pb::TxnRequest& req) {
    pb::TxnResponse resp;
    SFS_RETURN_IF_ERROR(etcd_->txn(req, &resp, "commit"));
    if (!resp.succeeded()) {
      return Status::IOError("etcd " + etcd_->target().uri() +
                             ": this daemon no longer holds the pool's writer lock (its lease ran out); "
                             "nothing more is written");
    }
    last_revision_.store(resp.header().revision(), std::memory_order_relaxed);
    return Status::OK();
  }

  // ops (full etcd keys, each once, as etcd requires) fit one Txn.
  Status apply(const OpRefs& ops) {
    pb::TxnRequest req = locked_txn();
    for (const Transaction::Op* op : ops) {
      pb::RequestOp* r = req.add_success();
      if (op->is_delete) {
        r->mutable_request_delete_range()->set_key(op->key);
      } else {
        auto* put = r->mutable_request_put();
        put->set_key(op->key);
        put->set_value(op->value);
      }
    }
    return txn(req);
  }

  // A commit too large for one Txn. Its ops are first staged whole under
  // P 'i' and marked complete (P 'I'), then applied in Txns that fit, then
  // the stage is deleted. A writer killed half-way leaves a complete
  // intent, which the next open applies again before anything else; ops
  // are puts and deletes of whole keys, so applying twice is applying once.
  // While it runs, this store's other calls wait, so none sees half of it.
  Status commit_staged(const OpRefs& ops) {
    std::unique_lock lock(staged_mu_);
    const std::string id = Be(++staged_id_, 8);
    std::vector<Transaction::Op> stage;
    std::string blob = EncodeOps(ops);
    for (size_t off = 0, part = 0; off < blob.size(); off += kMaxTxnBytes / 2, ++part) {
      stage.push_back({false, p_ + "i" + id + Be(part, 4), blob.substr(off, kMaxTxnBytes / 2)});
    }
    OpRefs stage_refs;
    for (const Transaction::Op& op : stage) stage_refs.push_back(&op);
    for (const OpRefs& group : GroupsThatFit(stage_refs)) SFS_RETURN_IF_ERROR(apply(group));
    Transaction::Op mark{false, p_ + "I" + id, Be(stage.size(), 4)};
    SFS_RETURN_IF_ERROR(apply({&mark}));
    for (const OpRefs& group : GroupsThatFit(ops)) SFS_RETURN_IF_ERROR(apply(group));
    return drop_stage(id);
  }

  Status drop_stage(const std::string& id) {
    pb::TxnRequest req = locked_txn();
    req.add_success()->mutable_request_delete_range()->set_key(p_ + "I" + id);
    auto* parts = req.add_success()->mutable_request_delete_range();
    parts->set_key(p_ + "i" + id);
    parts->set_range_end(PrefixEnd(p_ + "i" + id));
    return txn(req);
  }

  Status finish_staged() {
    std::vector<std::string> ids;
    SFS_RETURN_IF_ERROR(scan_raw(p_ + "I", p_.size() + 1, [&](std::string_view id, std::string_view) {
      ids.emplace_back(id);
      return true;
    }));
    for (const std::string& id : ids) {
      std::string blob;
      SFS_RETURN_IF_ERROR(scan_raw(p_ + "i" + id, 0, [&](std::string_view, std::string_view v) {
        blob += v;
        return true;
      }));
      SFS_ASSIGN_OR_RETURN(std::vector<Transaction::Op> ops, DecodeOps(blob));
      spdlog::info("etcd {}: applying a commit of {} keys that a stopped writer staged", etcd_->target().uri(),
                   ops.size());
      OpRefs refs;
      for (const Transaction::Op& op : ops) refs.push_back(&op);
      for (const OpRefs& group : GroupsThatFit(refs)) SFS_RETURN_IF_ERROR(apply(group));
      SFS_RETURN_IF_ERROR(drop_stage(id));
      staged_id_ = std::max(staged_id_, FromBe(id));
    }
    // Parts without a mark belong to a commit that never began to apply.
    pb::TxnRequest req = locked_txn();
    auto* del = req.add_success()->mutable_request_delete_range();
    del->set_key(p_ + "i");
    del->set_range_end(PrefixEnd(p_ + "i"));
    return txn(req);
  }

  // Calls fn(key without its first strip bytes, value) for every key under
  // prefix, in order, page by page at one revision.
  Status scan_raw(const std::string& prefix, size_t strip,
                  const std::function<bool(std::string_view, std::string_view)>& fn) {
    pb::RangeRequest req;
    req.set_key(prefix);
    req.set_range_end(PrefixEnd(prefix));
    req.set_limit(kScanPage);
    for (;;) {
      pb::RangeResponse resp;
      {
        std::shared_lock lock(staged_mu_);
        SFS_RETURN_IF_ERROR(etcd_->range(req, &resp, "scan"));
      }
      for (const pb::KeyValue& kv : resp.kvs()) {
        if (!fn(std::string_view(kv.key()).substr(strip), kv.value())) return Status::OK();
      }
      if (!resp.more() || resp.kvs_size() == 0) return Status::OK();
      req.set_revision(resp.header().revision());  // the later pages see the same moment
      req.set_key(resp.kvs(resp.kvs_size() - 1).key() + '\0');
    }
  }

  Result<bool> any_key(const std::string& prefix) {
    pb::RangeRequest req;
    req.set_key(prefix);
    req.set_range_end(PrefixEnd(prefix));
    req.set_limit(1);
    req.set_keys_only(true);
    pb::RangeResponse resp;
    SFS_RETURN_IF_ERROR(etcd_->range(req, &resp, "look for the pool"));
    return resp.kvs_size() > 0;
  }

  Status find_log_end() {
    pb::RangeRequest req;
    req.set_key(p_ + "l");
    req.set_range_end(PrefixEnd(p_ + "l"));
    req.set_limit(1);
    req.set_keys_only(true);
    req.set_sort_order(pb::RangeRequest::DESCEND);
    pb::RangeResponse resp;
    SFS_RETURN_IF_ERROR(etcd_->range(req, &resp, "find the write log"));
    // A reopened log appends to a new segment, as the file log does.
    if (resp.kvs_size() > 0) log_segment_ = FromBe(std::string_view(resp.kvs(0).key()).substr(p_.size() + 1, 8)) + 1;
    return Status::OK();
  }

  Status take_lock();
  void keep();

  static constexpr int64_t kScanPage = 1000;

  const std::unique_ptr<EtcdClient> etcd_;
  const std::string p_;
  const bool read_only_;
  const EtcdOptions o_;
  int64_t lease_id_ = 0;  // set by open(), before any other thread runs
  std::atomic<int64_t> last_revision_{0};

  std::shared_mutex staged_mu_;  // exclusive while a staged commit runs
  uint64_t staged_id_ = 0;       // GUARDED_BY(staged_mu_)

  std::mutex log_mu_;
  uint64_t log_segment_ = 1;  // GUARDED_BY(log_mu_)
  uint64_t log_seq_ = 0;      // GUARDED_BY(log_mu_)

  std::mutex keeper_mu_;
  std::condition_variable keeper_cv_;
  bool stopping_ = false;  // GUARDED_BY(keeper_mu_)
  std::thread keeper_;
};

// "HOST pid PID": who holds the writer lock, as its value says.
std::string Holder() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return std::string(host) + " pid " + std::to_string(getpid());
}

std::string HostOf(const std::string& holder) { return holder.substr(0, holder.rfind(" pid ")); }

// Whether a process named by holder may still run: one of another machine
// may, one of this machine only if its pid does.
bool HolderMayRun(const std::string& holder) {
  if (HostOf(holder) != HostOf(Holder())) return true;
  const size_t at = holder.rfind(" pid ");
  const pid_t pid = at == std::string::npos ? 0 : static_cast<pid_t>(std::atoll(holder.c_str() + at + 5));
  return pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH;
}

Status EtcdKvStore::take_lock() {
  SFS_ASSIGN_OR_RETURN(lease_id_, etcd_->grant_lease(o_.lease_ttl.count()));
  const auto give_up = Clock::now() + o_.lock_wait;
  bool told = false;
  for (;;) {
    pb::TxnRequest req;
    pb::Compare* absent = req.add_compare();
    absent->set_key(p_ + "w");
    absent->set_target(pb::Compare::CREATE);
    absent->set_result(pb::Compare::EQUAL);
    absent->set_create_revision(0);
    auto* put = req.add_success()->mutable_request_put();
    put->set_key(p_ + "w");
    put->set_value(Holder());
    put->set_lease(lease_id_);
    req.add_failure()->mutable_request_range()->set_key(p_ + "w");
    pb::TxnResponse resp;
    SFS_RETURN_IF_ERROR(etcd_->txn(req, &resp, "take the writer lock"));
    if (resp.succeeded()) return Status::OK();
    if (resp.responses_size() == 0 || resp.responses(0).response_range().kvs_size() == 0) continue;  // just released
    const pb::KeyValue& held = resp.responses(0).response_range().kvs(0);
    const bool here = HostOf(held.value()) == HostOf(Holder());
    if (!HolderMayRun(held.value())) {
      // Killed without a chance to give the lock back: end its lease now
      // rather than wait for it to run out.
      spdlog::info("etcd {}: the writer lock's holder ({}) has exited; releasing its lease", etcd_->target().uri(),
                   held.value());
      SFS_RETURN_IF_ERROR(etcd_->revoke_lease(held.lease()));
      continue;
    }
    // One of this machine runs, so waiting would not help.
    if (here || Clock::now() >= give_up) {
      return Status(Code::kBusy, "pool " + etcd_->target().uri() + " is mounted read-write by " + held.value() +
                                     ", which holds its writer lock in etcd; a second writer is refused "
                                     "(unmount or stop that one first)");
    }
    if (!told) {
      spdlog::info("etcd {}: waiting up to {} ms for the writer lock held by {} (its lease lasts {} s)",
                   etcd_->target().uri(), o_.lock_wait.count(), held.value(), o_.lease_ttl.count());
      told = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

// Keeps the lease alive, and compacts what etcd keeps of the past: etcd
// holds every revision until told otherwise, and the space it allows is
// bounded. Revisions younger than kHistory stay, so a long scan pinned to
// its first page's revision still finds it.
void EtcdKvStore::keep() {
  constexpr auto kHistory = std::chrono::seconds(60);
  std::deque<std::pair<Clock::time_point, int64_t>> seen;
  int64_t compacted = 0;
  std::unique_lock lock(keeper_mu_);
  while (!keeper_cv_.wait_for(lock, o_.lease_ttl / 3, [&] { return stopping_; })) {
    lock.unlock();
    auto ttl = etcd_->keep_alive(lease_id_);
    if (!ttl.ok()) {
      spdlog::warn("cannot refresh the writer lock: {}", ttl.status().message());
    } else if (ttl.value() <= 0) {
      spdlog::error("etcd {}: the writer lock's lease has run out; every change fails from now on",
                    etcd_->target().uri());
    }
    seen.emplace_back(Clock::now(), last_revision_.load(std::memory_order_relaxed));
    int64_t upto = 0;
    while (seen.size() > 1 && Clock::now() - seen.front().first > kHistory) {
      upto = seen.front().second;
      seen.pop_front();
    }
    if (upto > compacted) {
      if (Status s = etcd_->compact(upto); s.ok()) {
        compacted = upto;
      } else {
        spdlog::debug("etcd compaction to revision {}: {}", upto, s.message());
      }
    }
    lock.lock();
  }
}

}  // namespace

Result<std::unique_ptr<KvStore>> OpenEtcdKvStore(const EtcdTarget& target, OpenMode mode, const EtcdOptions& o) {
  SFS_ASSIGN_OR_RETURN(auto client, EtcdClient::Connect(target, o.request_timeout));
  auto store = std::make_unique<EtcdKvStore>(std::move(client), mode == OpenMode::kReadOnly, o);
  SFS_RETURN_IF_ERROR(store->open(mode));
  return std::unique_ptr<KvStore>(std::move(store));
}

}  // namespace stripefs::meta
