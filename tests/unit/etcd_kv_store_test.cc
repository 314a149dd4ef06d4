// SPDX-License-Identifier: Apache-2.0
// What the etcd store adds to the KvStore contract (kv_store_test.cc runs
// that contract on it): etcd's limits, the writer lock, staged commits
// finished after a crash, and member failures, on a real 3-member cluster.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "etcd_test_cluster.h"
#include "meta/etcd_client.h"
#include "meta/etcd_kv_store.h"
#include "meta/etcd_txn.h"

namespace stripefs::meta {
namespace {

using testing_etcd::TestEtcdCluster;

std::unique_ptr<KvStore> Open(const EtcdTarget& t, OpenMode mode, EtcdOptions o = {}) {
  auto kv = OpenEtcdKvStore(t, mode, o);
  EXPECT_TRUE(kv.ok()) << kv.status().message();
  return kv.ok() ? std::move(kv).value() : nullptr;
}

std::string Get(KvStore* kv, const std::string& key) {
  std::string v;
  Status s = kv->get(key, &v);
  return s.ok() ? v : "<" + s.message() + ">";
}

TEST(EtcdUriTest, ParsesEndpointsAndPrefix) {
  auto t = ParseEtcdUri("etcd://10.0.0.1:2379,node2:2380/pools/a");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t.value().endpoints, (std::vector<std::string>{"10.0.0.1:2379", "node2:2380"}));
  EXPECT_EQ(t.value().prefix, "pools/a");
  EXPECT_EQ(t.value().uri(), "etcd://10.0.0.1:2379,node2:2380/pools/a");
  for (const char* bad : {"etcd://h:1", "etcd://h:1/", "etcd:///p", "etcd://h/p", "etcd://h:x/p", "etcd://:1/p",
                          "http://h:1/p", "etcd://h:1,/p"}) {
    auto r = ParseEtcdUri(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("etcd://HOST:PORT"), std::string::npos) << r.status().message();
    }
  }
}

TEST(EtcdTxnTest, KeepsTheLastOpOfEachKeyAndSplitsWithinTheLimits) {
  Transaction t;
  t.put("a", "1");
  t.put("b", "1");
  t.del("a");
  t.put("b", "2");
  OpRefs last = LastOpPerKey(t);
  ASSERT_EQ(last.size(), 2u);
  EXPECT_TRUE(last[0]->is_delete);
  EXPECT_EQ(last[0]->key, "a");
  EXPECT_EQ(last[1]->value, "2");

  Transaction big;
  for (int i = 0; i < 300; ++i) big.put("k" + std::to_string(i), std::string(10000, 'v'));
  OpRefs ops = LastOpPerKey(big);
  EXPECT_FALSE(FitsOneTxn(ops));
  size_t total = 0;
  for (const OpRefs& g : GroupsThatFit(ops)) {
    EXPECT_TRUE(FitsOneTxn(g));
    total += g.size();
  }
  EXPECT_EQ(total, 300u);

  auto back = DecodeOps(EncodeOps(last));
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back.value().size(), 2u);
  EXPECT_TRUE(back.value()[0].is_delete);
  EXPECT_EQ(back.value()[1].key, "b");
  EXPECT_EQ(back.value()[1].value, "2");
  EXPECT_FALSE(DecodeOps(EncodeOps(last).substr(0, 7)).ok());
}

TEST(EtcdKvStoreTest, ACommitPastEtcdsLimitsAppliesWhole) {
  auto t = TestEtcdCluster::Get().FreshTarget();
  auto kv = Open(t, OpenMode::kCreate);
  ASSERT_NE(kv, nullptr);
  Transaction txn;
  for (int i = 0; i < 1000; ++i) txn.put("n" + std::to_string(i), std::string(3000, static_cast<char>('a' + i % 26)));
  txn.put("gone", "x");
  txn.del("gone");  // the same key twice in one batch: etcd refuses that in one Txn
  ASSERT_TRUE(kv->commit(txn, true).ok());
  int n = 0;
  ASSERT_TRUE(kv->scan("n", [&](std::string_view, std::string_view v) { return v.size() == 3000 && ++n; }).ok());
  EXPECT_EQ(n, 1000);
  EXPECT_EQ(Get(kv.get(), "n999"), std::string(3000, static_cast<char>('a' + 999 % 26)));
  EXPECT_EQ(Get(kv.get(), "gone"), "<no such key>");
}

TEST(EtcdKvStoreTest, OneWriterAtATime) {
  auto t = TestEtcdCluster::Get().FreshTarget();
  auto writer = Open(t, OpenMode::kCreate);
  ASSERT_NE(writer, nullptr);
  Transaction txn;
  txn.put("k", "v1");
  ASSERT_TRUE(writer->commit(txn, false).ok());

  auto second = OpenEtcdKvStore(t, OpenMode::kReadWrite);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kBusy);
  EXPECT_NE(second.status().message().find("pid " + std::to_string(getpid())), std::string::npos)
      << second.status().message();

  auto reader = Open(t, OpenMode::kReadOnly);
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(Get(reader.get(), "k"), "v1");
  EXPECT_EQ(reader->commit(txn, false).code(), Code::kPermission);

  writer.reset();  // gives the lock back
  auto next = Open(t, OpenMode::kReadWrite);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(Get(next.get(), "k"), "v1");
}

TEST(EtcdKvStoreTest, RefusesAMissingPoolAndFormattingOverOne) {
  auto t = TestEtcdCluster::Get().FreshTarget();
  auto missing = OpenEtcdKvStore(t, OpenMode::kReadWrite);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("holds no stripefs pool"), std::string::npos);
  {
    auto kv = Open(t, OpenMode::kCreate);
    ASSERT_NE(kv, nullptr);
    Transaction txn;
    txn.put("k", "v");
    ASSERT_TRUE(kv->commit(txn, true).ok());
  }
  auto again = OpenEtcdKvStore(t, OpenMode::kCreate);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Code::kExists);
}

TEST(EtcdKvStoreTest, AnUnreachableClusterIsAClearError) {
  auto t = ParseEtcdUri("etcd://127.0.0.1:1/nothing-listens");
  ASSERT_TRUE(t.ok());
  EtcdOptions o;
  o.request_timeout = std::chrono::milliseconds(500);
  auto kv = OpenEtcdKvStore(t.value(), OpenMode::kReadWrite, o);
  ASSERT_FALSE(kv.ok());
  EXPECT_EQ(kv.status().code(), Code::kIOError);
  EXPECT_NE(kv.status().message().find("etcd etcd://127.0.0.1:1/nothing-listens"), std::string::npos)
      << kv.status().message();
  EXPECT_NE(kv.status().message().find("no answer within 500 ms"), std::string::npos) << kv.status().message();
}

// A writer killed between staging a large commit and applying it: the next
// open applies it before anything else.
TEST(EtcdKvStoreTest, TheNextOpenFinishesAStagedCommit) {
  auto t = TestEtcdCluster::Get().FreshTarget();
  {
    auto kv = Open(t, OpenMode::kCreate);
    ASSERT_NE(kv, nullptr);
    Transaction format;
    format.put("superblock", "v");
    ASSERT_TRUE(kv->commit(format, true).ok());
  }
  Transaction want;
  for (int i = 0; i < 200; ++i) want.put(t.prefix + "/kstaged" + std::to_string(i), "v");
  const std::string id(8, '\0');
  auto client = EtcdClient::Connect(t, std::chrono::milliseconds(5000));
  ASSERT_TRUE(client.ok());
  etcdserverpb::TxnRequest req;
  auto* part = req.add_success()->mutable_request_put();
  part->set_key(t.prefix + "/i" + id + std::string("\0\0\0\0", 4));
  part->set_value(EncodeOps(LastOpPerKey(want)));
  auto* mark = req.add_success()->mutable_request_put();
  mark->set_key(t.prefix + "/I" + id);
  mark->set_value(std::string("\0\0\0\1", 4));
  etcdserverpb::TxnResponse resp;
  ASSERT_TRUE(client.value()->txn(req, &resp, "stage").ok());

  auto kv = Open(t, OpenMode::kReadWrite);
  ASSERT_NE(kv, nullptr);
  int n = 0;
  ASSERT_TRUE(kv->scan("staged", [&](std::string_view, std::string_view) { return ++n; }).ok());
  EXPECT_EQ(n, 200);
  etcdserverpb::RangeRequest left;
  left.set_key(t.prefix + "/I");
  left.set_range_end(t.prefix + "/J");
  etcdserverpb::RangeResponse lr;
  ASSERT_TRUE(client.value()->range(left, &lr, "look").ok());
  EXPECT_EQ(lr.kvs_size(), 0) << "the stage was not cleared";
}

TEST(EtcdKvStoreTest, ALogReopenedAppendsAfterItsRecords) {
  auto t = TestEtcdCluster::Get().FreshTarget();
  auto append = [](KvStore* kv, std::string_view r) { return kv->append_log(std::span(&r, 1)); };
  {
    auto kv = Open(t, OpenMode::kCreate);
    ASSERT_NE(kv, nullptr);
    Transaction format;
    format.put("superblock", "v");
    ASSERT_TRUE(kv->commit(format, true).ok());
    ASSERT_TRUE(append(kv.get(), "one").ok());
    ASSERT_TRUE(kv->roll_log().ok());
    ASSERT_TRUE(append(kv.get(), "two").ok());
  }
  auto kv = Open(t, OpenMode::kReadWrite);
  ASSERT_NE(kv, nullptr);
  ASSERT_TRUE(append(kv.get(), "three").ok());
  std::vector<std::string> got;
  ASSERT_TRUE(kv->read_log([&](std::string_view r) { return got.emplace_back(r), true; }).ok());
  EXPECT_EQ(got, (std::vector<std::string>{"one", "two", "three"}));
}

// The index in the test cluster of the member that leads, or -1.
int LeaderIndex(TestEtcdCluster& cluster) {
  const std::string& all = cluster.endpoints();
  int i = 0;
  for (size_t from = 0; from <= all.size(); ++i) {
    size_t comma = std::min(all.find(',', from), all.size());
    auto t = ParseEtcdUri("etcd://" + all.substr(from, comma - from) + "/leader");
    from = comma + 1;
    if (!t.ok()) continue;
    auto client = EtcdClient::Connect(t.value(), std::chrono::milliseconds(2000));
    etcdserverpb::StatusResponse status;
    if (client.ok() && client.value()->status(&status).ok() && status.leader() == status.header().member_id()) return i;
  }
  return -1;
}

// One member down, the leader: nothing fails, within the default request
// timeout. (A request forwarded to the killed leader is lost unanswered;
// the client asks again rather than wait out the timeout.) Two down: a
// change fails with EIO (after the request timeout) and nothing stored is
// lost; the store recovers by itself once a member returns.
TEST(EtcdKvStoreTest, SurvivesTheLeadersDeathAndRecoversFromTwoDown) {
  TestEtcdCluster& cluster = TestEtcdCluster::Get();
  auto t = cluster.FreshTarget();
  auto kv = Open(t, OpenMode::kCreate);
  ASSERT_NE(kv, nullptr);
  auto put = [&](const std::string& k) {
    Transaction txn;
    txn.put(k, "v-" + k);
    return kv->commit(txn, true);
  };
  ASSERT_TRUE(put("before").ok());
  const int leader = LeaderIndex(cluster);
  ASSERT_GE(leader, 0) << "no member says it leads";
  const int other = (leader + 1) % 3;
  // Later tests share the cluster: the killed members come back even when
  // an assertion ends this test early.
  struct RestartAtEnd {
    TestEtcdCluster& cluster;
    std::vector<int> killed;
    ~RestartAtEnd() {
      for (int m : killed) (void)cluster.Restart(m);
    }
  } restart{cluster, {}};
  ASSERT_TRUE(cluster.Kill(leader));
  restart.killed.push_back(leader);
  for (int i = 0; i < 20; ++i) {
    Status s = put("one-down" + std::to_string(i));
    ASSERT_TRUE(s.ok()) << i << ": " << s.message();
  }
  EXPECT_EQ(Get(kv.get(), "one-down19"), "v-one-down19");
  ASSERT_TRUE(cluster.Kill(other));
  restart.killed.push_back(other);
  Status lost = put("two-down");
  EXPECT_EQ(lost.code(), Code::kIOError) << lost.message();
  ASSERT_TRUE(cluster.Restart(leader));
  ASSERT_TRUE(cluster.Restart(other));
  restart.killed.clear();
  Status back = put("after");
  EXPECT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(Get(kv.get(), "before"), "v-before");
  EXPECT_EQ(Get(kv.get(), "one-down7"), "v-one-down7");
  EXPECT_EQ(Get(kv.get(), "after"), "v-after");
}

}  // namespace
}  // namespace stripefs::meta
