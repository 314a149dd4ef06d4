// SPDX-License-Identifier: Apache-2.0
// Cache mode's evictor over a real, full pool (drive files, RocksDB, io_uring).
#include "fs/evictor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>
#include <thread>

#include "engine/pool/pool.h"
#include "meta/namespace.h"
#include "stripefs/objects.h"
#include "tests/unit/test_pool.h"

namespace stripefs::fs {
namespace {

constexpr uint64_t kMiB = 1 << 20;

class EvictorTest : public testing::Test {
 protected:
  // A pool of 2 x 16 MiB drives filled with 1 MiB files f000, f001, ...
  // (oldest first), then mounted with an evictor that is not started.
  void SetUp() override {
    dir_ = testing_support::FreshTestDir("evictor");
    FormatOptions o = testing_support::TestPoolOptions(dir_, 2, 16 * kMiB);
    o.chunk_size = kMiB;
    ASSERT_TRUE(FormatPool(o, 0, 0).ok());
    {
      api::Error err;
      auto objects = api::ObjectPool::Open(o.meta_dir, {}, &err);
      ASSERT_TRUE(objects) << err.message;
      const std::string data(kMiB, 'x');
      while (!objects->put(Name(files_), data)) files_++;
      ASSERT_GT(files_, 20);
      ASSERT_FALSE(objects->remove(Name(files_)));  // the put that failed may have left an empty object
      ASSERT_FALSE(objects->sync());
    }
    auto pool = Pool::Open(o.meta_dir, Pool::Mode::kMount);
    ASSERT_TRUE(pool.ok()) << pool.status().message();
    pool_ = std::move(pool.value());
    Evictor::Hooks hooks{
        .is_open = [](uint64_t) { return false; },
        .reclaim = [this](const meta::InodeRecord& r) { ASSERT_TRUE(pool_->store().reclaim(r.ino).ok()); },
        .forget_name = [](uint64_t, const std::string&) {},
    };
    evictor_ = std::make_unique<Evictor>(pool_.get(), EvictorOptions{}, std::move(hooks));
    ASSERT_TRUE(evictor_->load().ok());
  }
  void TearDown() override {
    evictor_.reset();
    pool_.reset();
    std::filesystem::remove_all(dir_);
  }
  static std::string Name(int i) { return fmt::format("f{:03}", i); }
  bool Exists(int i) { return pool_->ns().lookup(meta::kRootIno, Name(i)).ok(); }

  std::filesystem::path dir_;
  int files_ = 0;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Evictor> evictor_;
};

TEST_F(EvictorTest, MakeRoomEvictsTheOldestFilesUntilTheBytesAreFree) {
  ASSERT_LT(pool_->drive_free(), 2 * kMiB);
  ASSERT_TRUE(evictor_->make_room(3 * kMiB));
  EXPECT_GE(pool_->drive_free(), 3 * kMiB);
  EXPECT_FALSE(Exists(0));
  EXPECT_FALSE(Exists(1));
  EXPECT_TRUE(Exists(files_ - 1));
  EXPECT_GE(evictor_->stats().objects, 2u);
}

TEST_F(EvictorTest, MakeRoomEvictsAtLeastOneFileEvenWhenTheFreeBytesLookEnough) {
  // A write that failed for want of room is evidence enough: the free total
  // can look sufficient while no drive can place the chunk.
  ASSERT_TRUE(evictor_->make_room(0));
  EXPECT_FALSE(Exists(0));
  EXPECT_TRUE(Exists(1));
  EXPECT_EQ(evictor_->stats().objects, 1u);
}

TEST_F(EvictorTest, WritesThatWaitedForAnotherPassAreToldToRetry) {
  // Writers that find the pool full at once queue for the one eviction pass;
  // every one of them must be told to retry, not only the one whose pass ran.
  constexpr int kWriters = 4;
  std::vector<std::thread> writers;
  std::vector<int> retry(kWriters, 0);
  for (int w = 0; w < kWriters; ++w) writers.emplace_back([&, w] { retry[w] = evictor_->make_room(2 * kMiB); });
  for (auto& t : writers) t.join();
  for (int w = 0; w < kWriters; ++w) EXPECT_TRUE(retry[w]) << "writer " << w;
  EXPECT_FALSE(Exists(0));
  EXPECT_TRUE(Exists(files_ - 1));
}

TEST_F(EvictorTest, PinnedFilesStay) {
  auto f0 = pool_->ns().lookup(meta::kRootIno, Name(0));
  ASSERT_TRUE(f0.ok());
  ASSERT_TRUE(pool_->ns().setxattr(f0->ino, kPinXattr, "1", 0).ok());
  ASSERT_TRUE(evictor_->make_room(2 * kMiB));
  EXPECT_TRUE(Exists(0));
  EXPECT_FALSE(Exists(1));
}

}  // namespace
}  // namespace stripefs::fs
