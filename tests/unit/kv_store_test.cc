// SPDX-License-Identifier: Apache-2.0
// KvStore::scan, the same contract for the in-memory store, RocksDB and etcd.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>

#include "meta/kv_store.h"
#include "etcd_test_cluster.h"

namespace stripefs::meta {
namespace {

// kEtcdWriteBehind: etcd behind the write-behind cache, as a mount opens it.
enum class Store { kMemory, kRocksDB, kEtcd, kEtcdWriteBehind };

class KvStoreTest : public testing::TestWithParam<Store> {
 protected:
  void SetUp() override {
    if (GetParam() == Store::kEtcd || GetParam() == Store::kEtcdWriteBehind) {
      const EtcdTarget target = testing_etcd::TestEtcdCluster::Get().FreshTarget();
      auto kv = GetParam() == Store::kEtcd ? OpenEtcdKvStore(target, OpenMode::kCreate)
                                           : OpenKvStore(target.uri(), OpenMode::kCreate);
      ASSERT_TRUE(kv.ok()) << kv.status().message();
      kv_ = std::move(kv).value();
    } else if (GetParam() == Store::kRocksDB) {
      dir_ = std::filesystem::temp_directory_path() / ("stripefs-kv-" + std::to_string(getpid()));
      std::filesystem::remove_all(dir_);
      auto kv = OpenRocksKvStore(dir_.string(), OpenMode::kCreate);
      ASSERT_TRUE(kv.ok()) << kv.status().message();
      kv_ = std::move(kv).value();
    } else {
      kv_ = NewMemKvStore();
    }
  }
  void TearDown() override {
    kv_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::vector<std::string> Scan(std::string_view prefix) {
    std::vector<std::string> keys;
    Status s = kv_->scan(prefix, [&](std::string_view k, std::string_view) {
      keys.emplace_back(k);
      return true;
    });
    EXPECT_TRUE(s.ok()) << s.message();
    return keys;
  }

  std::filesystem::path dir_;
  std::unique_ptr<KvStore> kv_;
};

TEST_P(KvStoreTest, ScanSeesExactlyThePrefix) {
  const std::string ff(2, '\xff');
  Transaction t;
  for (const std::string& k : std::vector<std::string>{"a", "ab", "abc", "ac", "b", "a\xff", "a\xff\x01", "b" + ff, "b" + ff + "x", "c"}) {
    t.put(k, "v");
  }
  ASSERT_TRUE(kv_->commit(t, false).ok());
  EXPECT_EQ(Scan("a"), (std::vector<std::string>{"a", "ab", "abc", "ac", "a\xff", "a\xff\x01"}));
  EXPECT_EQ(Scan("ab"), (std::vector<std::string>{"ab", "abc"}));
  EXPECT_EQ(Scan("a\xff"), (std::vector<std::string>{"a\xff", "a\xff\x01"}));
  EXPECT_EQ(Scan("b" + ff), (std::vector<std::string>{"b" + ff, "b" + ff + "x"}));
  EXPECT_EQ(Scan(ff), std::vector<std::string>{});
  EXPECT_EQ(Scan("zz"), std::vector<std::string>{});
  EXPECT_EQ(Scan("").size(), 10u);
}

TEST_P(KvStoreTest, ScanSkipsDeletedKeysAndStopsEarly) {
  Transaction put, del;
  for (int i = 0; i < 1000; ++i) {
    put.put("d" + std::to_string(i), "v");
    del.del("d" + std::to_string(i));
  }
  put.put("e1", "v");
  put.put("e2", "v");
  ASSERT_TRUE(kv_->commit(put, false).ok());
  ASSERT_TRUE(kv_->commit(del, false).ok());
  EXPECT_EQ(Scan("d"), std::vector<std::string>{});
  EXPECT_EQ(Scan("e"), (std::vector<std::string>{"e1", "e2"}));
  int seen = 0;
  ASSERT_TRUE(kv_->scan("e", [&](std::string_view, std::string_view) { return ++seen < 1; }).ok());
  EXPECT_EQ(seen, 1);
}

// A scan ends at the end of its prefix; it does not walk the deleted keys
// that follow it (an unlink scans an empty file's chunk prefix, and every
// deletion before it used to make that scan longer).
TEST(RocksKvStoreTest, ScanDoesNotWalkDeletedKeysPastThePrefix) {
  auto dir = std::filesystem::temp_directory_path() / ("stripefs-kv-bound-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  {
    auto kv = OpenRocksKvStore(dir.string(), OpenMode::kCreate);
    ASSERT_TRUE(kv.ok());
    Transaction put, del;
    put.put("a", "v");
    put.put("c", "v");
    for (int i = 0; i < 1000; ++i) {
      put.put("b" + std::to_string(i), "v");
      del.del("b" + std::to_string(i));
    }
    ASSERT_TRUE(kv.value()->commit(put, false).ok());
    ASSERT_TRUE(kv.value()->commit(del, false).ok());
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
    rocksdb::get_perf_context()->Reset();
    int seen = 0;
    ASSERT_TRUE(kv.value()->scan("a", [&](std::string_view, std::string_view) { return ++seen > 0; }).ok());
    const uint64_t skipped = rocksdb::get_perf_context()->internal_delete_skipped_count;
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
    EXPECT_EQ(seen, 1);
    EXPECT_LT(skipped, 10u) << "the scan of 'a' stepped over the deleted 'b' keys";
  }
  std::filesystem::remove_all(dir);
}

// df's metadata figures: a store holding 1 MiB of values says it uses at
// least that, and its room is never less than what it has free.
TEST_P(KvStoreTest, SpaceCountsWhatItHolds) {
  Transaction t;
  for (int i = 0; i < 64; ++i) t.put("big" + std::to_string(i), std::string(16 << 10, static_cast<char>('a' + i % 26)));
  ASSERT_TRUE(kv_->commit(t, true).ok());
  // etcd's member writes its database file in batches (every 100 ms by
  // default) and counts its size from that file, so its answer may lag the
  // commit; the loop's bound only guards against a hang.
  auto space = kv_->space();
  for (int i = 0; i < 100 && space.ok() && space->used < (1u << 20); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    space = kv_->space();
  }
  ASSERT_TRUE(space.ok()) << space.status().message();
  EXPECT_GE(space->used, 1u << 20);
  EXPECT_GT(space->free, 0u);
  EXPECT_GE(space->size, space->free);
}

INSTANTIATE_TEST_SUITE_P(Stores, KvStoreTest, testing::Values(Store::kMemory, Store::kRocksDB, Store::kEtcd, Store::kEtcdWriteBehind),
                         [](const testing::TestParamInfo<Store>& info) {
                           switch (info.param) {
                             case Store::kMemory: return "Memory";
                             case Store::kRocksDB: return "RocksDB";
                             case Store::kEtcd: return "Etcd";
                             case Store::kEtcdWriteBehind: return "EtcdWriteBehind";
                           }
                           return "";
                         });

}  // namespace
}  // namespace stripefs::meta
