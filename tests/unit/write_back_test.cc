// SPDX-License-Identifier: Apache-2.0
// The write-back buffer over a real pool (drive files, RocksDB, io_uring).
#include "api/write_back.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "engine/pool/pool.h"
#include "tests/unit/test_pool.h"

namespace stripefs {
namespace {

class WriteBackTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing_support::FreshTestDir("wb");
    FormatOptions o = testing_support::TestPoolOptions(dir_, 2, 256ull << 20);
    o.chunk_size = 1 << 20;
    ASSERT_TRUE(FormatPool(o, 0, 0).ok());
    auto pool = Pool::Open(o.meta_dir, Pool::Mode::kMount);
    ASSERT_TRUE(pool.ok()) << pool.status().message();
    pool_ = std::move(pool).value();
    WriteBackOptions w;
    w.interval_ms = 60'000;  // only explicit flushes here
    buffer_ = std::make_unique<WriteBackBuffer>(&pool_->store(), [this] { return pool_->drive_free(); }, w);
  }
  void TearDown() override {
    buffer_.reset();
    pool_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::shared_ptr<ObjectStore::Object> NewObject(const std::string& name) {
    meta::NewInode n;
    n.mode = S_IFREG | 0644;
    n.chunk_size = 1 << 20;
    n.strategy = "striped";
    auto r = pool_->ns().create(meta::kRootIno, name, n);
    EXPECT_TRUE(r.ok()) << r.status().message();
    auto obj = pool_->store().object(r.value(), /*just_created=*/true);
    EXPECT_TRUE(obj.ok());
    return obj.value();
  }
  std::string Stored(const std::shared_ptr<ObjectStore::Object>& obj) {
    auto r = pool_->ns().get(obj->ino);
    EXPECT_TRUE(r.ok());
    std::string out(r->size, '\0');
    EXPECT_TRUE(pool_->store().read(*obj, 0, out.size(), out.data()).ok());
    return out;
  }

  std::filesystem::path dir_;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<WriteBackBuffer> buffer_;
};

TEST_F(WriteBackTest, HoldsTheLatestPutUntilAFlushStoresIt) {
  auto obj = NewObject("a");
  ASSERT_TRUE(buffer_->take(obj, "first"));
  ASSERT_TRUE(buffer_->take(obj, "second, longer"));
  std::string out;
  auto into_out = [&](uint64_t n) { return out.resize(n), out.data(); };
  ASSERT_EQ(buffer_->read(obj->ino, 8, 100, into_out), 6u);
  EXPECT_EQ(out, "longer");
  EXPECT_EQ(buffer_->size(obj->ino), 14u);
  EXPECT_EQ(Stored(obj), "") << "nothing on the drives before a flush";
  EXPECT_EQ(buffer_->stats().dirty_bytes, 14u);
  ASSERT_TRUE(buffer_->flush_all().ok());
  EXPECT_EQ(Stored(obj), "second, longer");
  EXPECT_FALSE(buffer_->read(obj->ino, 0, 100, into_out)) << "clean once stored";
  EXPECT_FALSE(buffer_->size(obj->ino)) << "clean once stored";
  EXPECT_EQ(buffer_->stats().dirty_objects, 0u);
}

TEST_F(WriteBackTest, RefusesLargeObjectsAndWhatTheDrivesCouldNotHold) {
  auto obj = NewObject("big");
  EXPECT_FALSE(buffer_->take(obj, std::string((256 << 10) + 1, 'x'))) << "over max_object: written through";
  EXPECT_FALSE(buffer_->take(obj, "")) << "an empty put is a truncate: written through";
  WriteBackOptions w;
  w.interval_ms = 60'000;
  WriteBackBuffer tight(&pool_->store(), [] { return uint64_t{64} << 20; }, w);  // free space just at the slack
  EXPECT_FALSE(tight.take(obj, "x")) << "the drives must cover what is buffered plus the slack";
}

TEST_F(WriteBackTest, AnObjectRemovedAfterItsPutIsDroppedNotRetriedForever) {
  auto obj = NewObject("gone");
  ASSERT_TRUE(buffer_->take(obj, "put, then removed before the flush"));
  auto r = pool_->ns().unlink(meta::kRootIno, "gone");
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(pool_->store().reclaim(obj->ino).ok());
  EXPECT_TRUE(buffer_->flush_all().ok());
  EXPECT_EQ(buffer_->stats().dirty_objects, 0u);
}

TEST_F(WriteBackTest, DiscardDropsWithoutStoring) {
  auto obj = NewObject("d");
  ASSERT_TRUE(buffer_->take(obj, "not wanted"));
  buffer_->discard(obj->ino);
  ASSERT_TRUE(buffer_->flush_all().ok());
  EXPECT_EQ(Stored(obj), "");
}

}  // namespace
}  // namespace stripefs
