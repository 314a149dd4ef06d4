// SPDX-License-Identifier: Apache-2.0
// The write-behind store in front of an in-memory one that counts what
// reaches it: commits arrive whole, in order and merged; gets are answered
// from memory where the store knows the answer; a failing store behind
// keeps the queued changes, refuses new ones, and takes them again when it
// answers. (The KvStore and Namespace suites also run it over etcd.)
#include "meta/write_behind_kv_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/fault_injection_kv_store.h"

namespace stripefs::meta {
namespace {

// Forwards to a MemKvStore; counts gets, records each commit's size, and
// holds commits while closed.
class CountingKvStore final : public KvStore {
 public:
  Status get(std::string_view key, std::string* value) override {
    gets++;
    return mem_->get(key, value);
  }
  Status scan(std::string_view prefix, const std::function<bool(std::string_view, std::string_view)>& fn) override {
    return mem_->scan(prefix, fn);
  }
  Status commit(const Transaction& txn, bool sync) override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return open_; });
    commit_sizes.push_back(txn.ops().size());
    return mem_->commit(txn, sync);
  }
  Status sync() override { return mem_->sync(); }
  Status append_log(std::span<const std::string_view> pieces) override { return mem_->append_log(pieces); }
  Result<uint64_t> roll_log() override { return mem_->roll_log(); }
  Status drop_log(uint64_t through) override { return mem_->drop_log(through); }
  Status read_log(const std::function<bool(std::string_view)>& fn) override { return mem_->read_log(fn); }
  Result<Space> space() override { return mem_->space(); }

  void set_open(bool open) {
    {
      std::lock_guard lock(mu_);
      open_ = open;
    }
    cv_.notify_all();
  }
  std::vector<size_t> sizes() {
    std::lock_guard lock(mu_);
    return commit_sizes;
  }
  KvStore* mem() { return mem_.get(); }

  std::atomic<int> gets{0};

 private:
  std::unique_ptr<KvStore> mem_ = NewMemKvStore();
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  std::vector<size_t> commit_sizes;  // GUARDED_BY(mu_)
};

Transaction Put(const std::string& k, const std::string& v) {
  Transaction t;
  t.put(k, v);
  return t;
}

std::string Get(KvStore* kv, const std::string& k) {
  std::string v;
  Status s = kv->get(k, &v);
  return s.ok() ? v : "<" + s.message() + ">";
}

class WriteBehindTest : public testing::Test {
 protected:
  void Open(WriteBehindOptions o = {}) {
    auto inner = std::make_unique<CountingKvStore>();
    inner_ = inner.get();
    kv_ = NewWriteBehindKvStore(std::move(inner), o);
  }
  CountingKvStore* inner_ = nullptr;
  std::unique_ptr<KvStore> kv_;
};

TEST_F(WriteBehindTest, ConcurrentCommitsArriveWholeAndInOrder) {
  Open();
  constexpr int kThreads = 4, kCommits = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCommits; ++i) {
        Transaction txn;
        txn.put("t" + std::to_string(t) + "/" + std::to_string(i), std::to_string(i));
        txn.put("last/" + std::to_string(t), std::to_string(i));  // overwritten by every commit of this thread
        ASSERT_TRUE(kv_->commit(txn, false).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(kv_->sync().ok());
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(Get(inner_->mem(), "last/" + std::to_string(t)), std::to_string(kCommits - 1))
        << "a later commit of thread " << t << " was overtaken by an earlier one";
    for (int i = 0; i < kCommits; ++i) {
      ASSERT_EQ(Get(inner_->mem(), "t" + std::to_string(t) + "/" + std::to_string(i)), std::to_string(i));
    }
  }
  size_t ops = 0;
  for (size_t n : inner_->sizes()) {
    EXPECT_EQ(n % 2, 0u) << "a send split a commit of two ops";
    ops += n;
  }
  EXPECT_EQ(ops, 2u * kThreads * kCommits);
}

TEST_F(WriteBehindTest, QueuedCommitsAreMergedIntoFewerSendsAndReadBackAtOnce) {
  WriteBehindOptions o;
  o.max_send_ops = 8;
  Open(o);
  inner_->set_open(false);  // the first send waits, and the rest queue behind it
  Transaction big;
  for (int i = 0; i < 20; ++i) big.put("big/" + std::to_string(i), "v");
  ASSERT_TRUE(kv_->commit(Put("a", "1"), false).ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(kv_->commit(Put("k" + std::to_string(i), std::to_string(i)), false).ok());
  ASSERT_TRUE(kv_->commit(big, false).ok());
  EXPECT_EQ(Get(kv_.get(), "k3"), "3") << "a queued commit must read back before it is sent";
  EXPECT_EQ(Get(kv_.get(), "big/19"), "v");
  EXPECT_EQ(inner_->gets.load(), 0) << "a queued key was looked up behind the cache";
  inner_->set_open(true);
  ASSERT_TRUE(kv_->sync().ok());
  const std::vector<size_t> sizes = inner_->sizes();
  // "a" alone (the send in flight), then the ten one-op commits in sends of
  // at most 8 ops, then the 20-op commit whole in a send of its own.
  ASSERT_GE(sizes.size(), 3u);
  EXPECT_LT(sizes.size(), 12u) << "queued commits were not merged";
  EXPECT_EQ(sizes.back(), 20u) << "a commit larger than a send was split";
  for (size_t i = 0; i + 1 < sizes.size(); ++i) EXPECT_LE(sizes[i], 8u);
  EXPECT_EQ(Get(inner_->mem(), "k9"), "9");
}

TEST_F(WriteBehindTest, GetsAnswerFromMemoryWhatTheStoreKnows) {
  Open();
  ASSERT_TRUE(kv_->commit(Put("x/1", "one"), false).ok());
  ASSERT_TRUE(kv_->sync().ok());
  EXPECT_EQ(Get(kv_.get(), "x/1"), "one");
  EXPECT_EQ(inner_->gets.load(), 0) << "a key this store wrote was asked for behind it";

  ASSERT_TRUE(inner_->mem()->commit(Put("y/1", "stored before"), true).ok());
  EXPECT_EQ(Get(kv_.get(), "y/1"), "stored before");
  EXPECT_EQ(Get(kv_.get(), "y/1"), "stored before");
  EXPECT_EQ(inner_->gets.load(), 1) << "a key read once was asked for again";
  EXPECT_EQ(Get(kv_.get(), "y/2"), "<no such key>");
  EXPECT_EQ(Get(kv_.get(), "y/2"), "<no such key>");
  EXPECT_EQ(inner_->gets.load(), 2) << "a key found absent once was asked for again";

  kv_->known_empty("new/");
  EXPECT_EQ(Get(kv_.get(), "new/a"), "<no such key>");
  ASSERT_TRUE(kv_->commit(Put("new/b", "b"), false).ok());
  EXPECT_EQ(Get(kv_.get(), "new/b"), "b");
  EXPECT_EQ(inner_->gets.load(), 2) << "a key under a prefix known empty was asked for";

  ASSERT_TRUE(inner_->mem()->commit(Put("z/1", "1"), true).ok());
  ASSERT_TRUE(inner_->mem()->commit(Put("z/3", "3"), true).ok());
  std::vector<std::string> seen;
  ASSERT_TRUE(kv_->scan("z/", [&](std::string_view k, std::string_view) {
                   seen.emplace_back(k);
                   return true;
                 }).ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"z/1", "z/3"}));
  EXPECT_EQ(Get(kv_.get(), "z/3"), "3");
  EXPECT_EQ(Get(kv_.get(), "z/2"), "<no such key>");
  EXPECT_EQ(inner_->gets.load(), 2) << "after a scan to its end, a key under the prefix was asked for";
}

TEST_F(WriteBehindTest, ACacheOverItsBudgetDropsCleanKeysAndStaysRight) {
  WriteBehindOptions o;
  o.cache_bytes = 2000;  // about 25 keys
  Open(o);
  kv_->known_empty("n/");
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(kv_->commit(Put("n/" + std::to_string(i), std::to_string(i)), false).ok());
  ASSERT_TRUE(kv_->sync().ok());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(Get(kv_.get(), "n/" + std::to_string(i)), std::to_string(i));
  EXPECT_GT(inner_->gets.load(), 0) << "100 keys cannot all stay in a 2000-byte cache";
  const int before = inner_->gets.load();
  EXPECT_EQ(Get(kv_.get(), "n/absent"), "<no such key>");
  EXPECT_EQ(inner_->gets.load(), before + 1) << "the prefix stayed whole after its keys were dropped";
  std::vector<std::string> seen;
  ASSERT_TRUE(kv_->scan("n/", [&](std::string_view k, std::string_view) {
                   seen.emplace_back(k);
                   return true;
                 }).ok());
  EXPECT_EQ(seen.size(), 100u);
}

TEST_F(WriteBehindTest, ScansSeeQueuedCommitsAndDeletes) {
  Open();
  ASSERT_TRUE(kv_->commit(Put("s/1", "1"), false).ok());
  ASSERT_TRUE(kv_->commit(Put("s/2", "2"), false).ok());
  Transaction del;
  del.del("s/1");
  ASSERT_TRUE(kv_->commit(del, false).ok());
  std::vector<std::string> seen;
  ASSERT_TRUE(kv_->scan("s/", [&](std::string_view k, std::string_view) {
                   seen.emplace_back(k);
                   return true;
                 }).ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"s/2"}));
  EXPECT_EQ(Get(kv_.get(), "s/1"), "<no such key>");
}

TEST(WriteBehindCloseTest, TheStoreBehindHasEveryCommitOnceClosed) {
  // The wrapper owns the store behind, so this one shares a MemKvStore
  // through a forwarding store that outlives it.
  auto mem = NewMemKvStore();
  struct Forward final : KvStore {
    explicit Forward(KvStore* to) : to_(to) {}
    Status get(std::string_view k, std::string* v) override { return to_->get(k, v); }
    Status scan(std::string_view p, const std::function<bool(std::string_view, std::string_view)>& fn) override {
      return to_->scan(p, fn);
    }
    Status commit(const Transaction& t, bool s) override { return to_->commit(t, s); }
    Status sync() override { return to_->sync(); }
    Status append_log(std::span<const std::string_view> p) override { return to_->append_log(p); }
    Result<uint64_t> roll_log() override { return to_->roll_log(); }
    Status drop_log(uint64_t t) override { return to_->drop_log(t); }
    Status read_log(const std::function<bool(std::string_view)>& fn) override { return to_->read_log(fn); }
    Result<Space> space() override { return to_->space(); }
    KvStore* to_;
  };
  {
    auto kv = NewWriteBehindKvStore(std::make_unique<Forward>(mem.get()));
    for (int i = 0; i < 1000; ++i) ASSERT_TRUE(kv->commit(Put("c/" + std::to_string(i), "v"), false).ok());
  }
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(Get(mem.get(), "c/" + std::to_string(i)), "v") << i;
}

TEST(WriteBehindFailureTest, AFailingStoreKeepsTheQueueRefusesNewChangesAndRecovers) {
  auto mem = NewMemKvStore();
  auto faulty = std::make_unique<FaultInjectionKvStore>(mem.get());
  FaultInjectionKvStore* fault = faulty.get();
  WriteBehindOptions o;
  o.retry_interval = std::chrono::milliseconds(10);
  auto kv = NewWriteBehindKvStore(std::move(faulty), o);

  fault->fail_commits(true);
  ASSERT_TRUE(kv->commit(Put("kept", "1"), false).ok()) << "a commit is queued before anything is sent";
  Status s = kv->sync();
  EXPECT_EQ(s.code(), Code::kIOError);
  EXPECT_NE(s.message().find("injected"), std::string::npos) << s.message();
  s = kv->commit(Put("refused", "2"), false);
  EXPECT_EQ(s.code(), Code::kIOError) << "a new change must fail while sends fail";
  EXPECT_EQ(kv->scan("", [](std::string_view, std::string_view) { return true; }).code(), Code::kIOError);
  EXPECT_EQ(Get(kv.get(), "kept"), "1") << "a queued change must stay readable";
  EXPECT_EQ(Get(mem.get(), "kept"), "<no such key>");

  fault->fail_commits(false);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!kv->sync().ok() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(kv->sync().ok()) << "the store did not recover once the store behind answered again";
  EXPECT_EQ(Get(mem.get(), "kept"), "1") << "the queued change was lost";
  EXPECT_EQ(Get(mem.get(), "refused"), "<no such key>") << "a refused change was written";
  ASSERT_TRUE(kv->commit(Put("after", "3"), true).ok());
  EXPECT_EQ(Get(mem.get(), "after"), "3");
}

}  // namespace
}  // namespace stripefs::meta
