// SPDX-License-Identifier: Apache-2.0
// The KvStore's write log: records read back in order, rolled segments
// dropped, and (on files) a torn last record not read, a reopened log
// appending after what it found.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "meta/kv_store.h"
#include "meta/write_log.h"
#include "etcd_test_cluster.h"

namespace stripefs::meta {
namespace {

Status Append(KvStore* kv, const std::string& a, const std::string& b = "") {
  const std::string_view pieces[] = {a, b};
  return kv->append_log(pieces);
}

std::vector<std::string> ReadAll(KvStore* kv) {
  std::vector<std::string> out;
  Status s = kv->read_log([&](std::string_view r) {
    out.emplace_back(r);
    return true;
  });
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

enum class Store { kMemory, kFiles, kEtcd };

class WriteLogTest : public testing::TestWithParam<Store> {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("stripefs-log-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    if (GetParam() == Store::kFiles) {
      Open(OpenMode::kCreate);
    } else if (GetParam() == Store::kEtcd) {
      auto kv = OpenEtcdKvStore(testing_etcd::TestEtcdCluster::Get().FreshTarget(), OpenMode::kCreate);
      ASSERT_TRUE(kv.ok()) << kv.status().message();
      kv_ = std::move(kv).value();
    } else {
      kv_ = NewMemKvStore();
    }
  }
  void TearDown() override {
    kv_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Open(OpenMode mode) {
    kv_.reset();
    auto kv = OpenRocksKvStore(dir_.string(), mode);
    ASSERT_TRUE(kv.ok()) << kv.status().message();
    kv_ = std::move(kv).value();
  }
  std::filesystem::path dir_;
  std::unique_ptr<KvStore> kv_;
};

TEST_P(WriteLogTest, RecordsComeBackInOrderWhole) {
  ASSERT_TRUE(Append(kv_.get(), "one", "+two").ok());
  ASSERT_TRUE(Append(kv_.get(), std::string(10000, 'x')).ok());
  ASSERT_TRUE(Append(kv_.get(), "", "").ok());  // an empty record is a record
  EXPECT_EQ(ReadAll(kv_.get()), (std::vector<std::string>{"one+two", std::string(10000, 'x'), ""}));
}

TEST_P(WriteLogTest, DropDeletesOnlyRolledSegments) {
  ASSERT_TRUE(Append(kv_.get(), "a").ok());
  auto first = kv_->roll_log();
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(Append(kv_.get(), "b").ok());
  auto second = kv_->roll_log();
  ASSERT_TRUE(second.ok());
  EXPECT_GT(second.value(), first.value());
  ASSERT_TRUE(Append(kv_.get(), "c").ok());
  ASSERT_TRUE(kv_->drop_log(first.value()).ok());
  EXPECT_EQ(ReadAll(kv_.get()), (std::vector<std::string>{"b", "c"}));
  ASSERT_TRUE(kv_->drop_log(second.value()).ok());
  EXPECT_EQ(ReadAll(kv_.get()), (std::vector<std::string>{"c"}));
  ASSERT_TRUE(Append(kv_.get(), "d").ok());
  EXPECT_EQ(ReadAll(kv_.get()), (std::vector<std::string>{"c", "d"}));
}

TEST_P(WriteLogTest, ReadStopsWhenAsked) {
  for (const char* r : {"1", "2", "3"}) ASSERT_TRUE(Append(kv_.get(), r).ok());
  int seen = 0;
  ASSERT_TRUE(kv_->read_log([&](std::string_view) { return ++seen < 2; }).ok());
  EXPECT_EQ(seen, 2);
}

INSTANTIATE_TEST_SUITE_P(Stores, WriteLogTest, testing::Values(Store::kMemory, Store::kFiles, Store::kEtcd),
                         [](const testing::TestParamInfo<Store>& i) {
                           return i.param == Store::kMemory ? "Memory" : i.param == Store::kFiles ? "RocksDB" : "Etcd";
                         });

class FileWriteLogTest : public WriteLogTest {};

std::vector<std::filesystem::path> Segments(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir / "write-log")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_P(FileWriteLogTest, ReopenedLogKeepsRecordsAndAppendsAfterThem) {
  ASSERT_TRUE(Append(kv_.get(), "before").ok());
  ASSERT_TRUE(kv_->sync().ok());
  Open(OpenMode::kReadWrite);
  ASSERT_TRUE(Append(kv_.get(), "after").ok());
  EXPECT_EQ(ReadAll(kv_.get()), (std::vector<std::string>{"before", "after"}));
  EXPECT_EQ(Segments(dir_).size(), 2u);  // never appended behind what a crash may have torn
  auto rolled = kv_->roll_log();
  ASSERT_TRUE(rolled.ok());
  ASSERT_TRUE(kv_->drop_log(rolled.value()).ok());
  EXPECT_TRUE(Segments(dir_).empty());
}

TEST_P(FileWriteLogTest, TornOrDamagedRecordEndsItsSegment) {
  ASSERT_TRUE(Append(kv_.get(), "kept").ok());
  ASSERT_TRUE(Append(kv_.get(), std::string(5000, 't')).ok());
  ASSERT_TRUE(kv_->sync().ok());
  kv_.reset();
  const auto seg = Segments(dir_).at(0);
  const auto full = std::filesystem::file_size(seg);
  std::filesystem::resize_file(seg, full - 100);  // the second record torn
  Open(OpenMode::kReadWrite);
  EXPECT_EQ(ReadAll(kv_.get()), (std::vector<std::string>{"kept"}));
  ASSERT_TRUE(Append(kv_.get(), "next").ok());  // into a segment of its own: still read
  EXPECT_EQ(ReadAll(kv_.get()), (std::vector<std::string>{"kept", "next"}));
  // A flipped byte fails the frame's checksum: that record and the rest of its segment are not read.
  kv_.reset();
  int fd = ::open(seg.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "X", 1, 9), 1);  // inside "kept"
  ::close(fd);
  Open(OpenMode::kReadOnly);
  EXPECT_EQ(ReadAll(kv_.get()), (std::vector<std::string>{"next"}));
  EXPECT_FALSE(Append(kv_.get(), "x").ok());  // read-only
}

INSTANTIATE_TEST_SUITE_P(Files, FileWriteLogTest, testing::Values(Store::kFiles));

TEST(MemWriteLogTest, PowerCutLosesWhatWasNotSynced) {
  MemWriteLog log;
  const std::string_view a[] = {"a"}, b[] = {"b"}, c[] = {"c"};
  ASSERT_TRUE(log.append(a).ok());
  log.mark_synced();
  ASSERT_TRUE(log.append(b).ok());
  ASSERT_TRUE(log.roll().ok());  // a roll syncs what it closes
  ASSERT_TRUE(log.append(c).ok());
  log.drop_unsynced();
  std::vector<std::string> got;
  ASSERT_TRUE(log.read([&](std::string_view r) {
                   got.emplace_back(r);
                   return true;
                 }).ok());
  EXPECT_EQ(got, (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace stripefs::meta
