// SPDX-License-Identifier: Apache-2.0
// Growing a pool while it is in use: a drive added while writers, readers
// and df callers run.
//
// ObjectStoreGrowTest.Concurrent* and PlacerGrowTest.Concurrent* run under
// ThreadSanitizer in the Makefile's sanitize step (its `Concurrent` filter):
// they drive the lock-free tables of the data path (the placer's segments,
// the object store's drive slots, the io_uring backend's descriptors) over an
// in-memory metadata store. OnlineGrowTest runs the same scenario through
// Pool::add_drive on RocksDB; it is left out of the TSan step because RocksDB
// is not built with TSan, so its lock-free memtable reads show as races.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/placement/allocator.h"
#include "engine/io/io_backend.h"
#include "engine/store/object_store.h"
#include "engine/placement/placement.h"
#include "engine/pool/pool.h"
#include "meta/kv_store.h"
#include "meta/namespace.h"
#include "tests/unit/test_namespace.h"

namespace stripefs {
namespace {

constexpr uint32_t kChunk = 1u << 20;
constexpr uint64_t kDataStart = 1u << 20;  // the superblock area, as in a pool

std::string Pattern(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(1 + rng() % 255);
  return s;
}

meta::NewInode FileInode() {
  meta::NewInode n;
  n.mode = S_IFREG | 0644;
  n.chunk_size = kChunk;
  n.strategy = "striped";
  return n;
}

// The scenario, over any store: an old file is written; writers fill the
// pool until each meets ENOSPC, then keep retrying; `add` adds a drive while
// they retry and readers verify the old file (and `poll` looks at whatever
// else may race with the add). Every retried write must then succeed, on the
// new drive, and every byte must read back.
struct GrowScenario {
  ObjectStore* store;
  std::function<std::shared_ptr<ObjectStore::Object>(const std::string&)> new_file;
  std::function<uint32_t()> add;  // adds the drive, returns its id
  std::function<void()> poll = [] {};

  static constexpr int kWriters = 2, kReaders = 2, kAfter = 6;  // chunks each writer stores after the add

  void run() {
    const std::string old_data = Pattern(4 * kChunk, 99);
    auto old = new_file("old");
    ASSERT_TRUE(store->write(*old, 0, old_data.data(), old_data.size()).ok());

    std::atomic<bool> added{false}, stop{false};
    std::atomic<int> full{0};  // writers that met ENOSPC
    std::atomic<int> errors{0};
    std::vector<std::shared_ptr<ObjectStore::Object>> files;
    std::vector<uint64_t> written(kWriters, 0), first_after(kWriters, 0);  // each owned by its writer until joined
    std::string probe(kChunk, '\0');
    for (int w = 0; w < kWriters; ++w) {
      files.push_back(new_file("w" + std::to_string(w)));
      ASSERT_TRUE(store->read(*files.back(), 0, kChunk, probe.data()).ok());  // loads its (empty) chunk map
    }

    std::vector<std::thread> threads;
    for (int w = 0; w < kWriters; ++w) {
      threads.emplace_back([&, w] {
        bool was_full = false;
        uint64_t after = 0;
        while (after < kAfter) {
          const std::string chunk = Pattern(kChunk, static_cast<uint32_t>(w * 1000 + written[w]));
          auto r = store->write(*files[w], written[w] * kChunk, chunk.data(), chunk.size());
          if (r.ok()) {
            ++written[w];
            if (was_full) ++after;
            continue;
          }
          if (r.status().code() != Code::kNoSpace) {
            ADD_FAILURE() << "writer " << w << ": " << r.status().message();
            errors++;
            return;
          }
          if (was_full && added.load()) {
            ADD_FAILURE() << "writer " << w << " got ENOSPC after the drive was added";
            errors++;
            return;
          }
          if (!was_full) {
            was_full = true;
            first_after[w] = written[w];
            full++;
          }
          std::this_thread::yield();  // retry until the drive is added (polling, no timing)
        }
      });
    }
    for (int r = 0; r < kReaders; ++r) {
      threads.emplace_back([&] {
        std::string buf(old_data.size(), '\0');
        while (!stop.load()) {
          Status s = store->read(*old, 0, buf.size(), buf.data());
          if (!s.ok() || buf != old_data) {
            ADD_FAILURE() << "reading the old file: " << (s.ok() ? "wrong bytes" : s.message());
            errors++;
            return;
          }
        }
      });
    }
    threads.emplace_back([&] {
      while (!stop.load()) poll();
    });

    while (full.load() < kWriters && errors.load() == 0) std::this_thread::yield();
    const uint32_t id = add();
    added = true;
    for (int w = 0; w < kWriters; ++w) threads[w].join();
    stop = true;
    for (size_t t = kWriters; t < threads.size(); ++t) threads[t].join();
    ASSERT_EQ(errors.load(), 0);

    for (int w = 0; w < kWriters; ++w) {
      std::string got(written[w] * kChunk, '\0');
      ASSERT_TRUE(store->read(*files[w], 0, got.size(), got.data()).ok());
      for (uint64_t i = 0; i < written[w]; ++i) {
        ASSERT_TRUE(got.compare(i * kChunk, kChunk, Pattern(kChunk, static_cast<uint32_t>(w * 1000 + i))) == 0)
            << "writer " << w << " chunk " << i;
      }
      auto chunks = store->load_chunks(files[w]->ino);
      ASSERT_TRUE(chunks.ok());
      ASSERT_EQ(chunks->size(), written[w]);
      for (const auto& [index, rec] : chunks.value()) {
        if (index >= first_after[w]) {
          EXPECT_EQ(rec.replicas.at(0).segment, id) << "writer " << w << " chunk " << index;
        }
      }
    }
  }
};

// The data path alone: ObjectStore over io_uring and best-fit allocators, an
// in-memory metadata store; the drive is added the way Pool::add_drive does
// (the backend takes the descriptor, then the store takes the slot).
class ObjectStoreGrowTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stripefs_grow_store.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::vector<DriveSlot> slots;
    for (int i = 0; i < 3; ++i) {  // drive 2 is added later
      const std::string path = dir_ + "/d" + std::to_string(i);
      int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      ASSERT_GE(fd, 0);
      const uint64_t capacity = (i < 2 ? 8 : 16) * uint64_t{kChunk};
      ASSERT_EQ(ftruncate(fd, static_cast<off_t>(kDataStart + capacity)), 0);
      fds_.push_back(fd);
      allocators_.push_back(NewBestFitAllocator(capacity, meta::kBlockSize));
      if (i < 2) slots.push_back({static_cast<uint32_t>(i), kDataStart, allocators_.back().get()});
    }
    io_ = NewUringBackend({fds_[0], fds_[1]});
    kv_ = meta::NewMemKvStore();
    ns_ = testing_support::FormatAndOpenNamespace(kv_.get());
    ASSERT_TRUE(ns_);
    store_ = std::make_unique<ObjectStore>(kv_.get(), ns_.get(), io_.get(), slots);
  }
  void TearDown() override {
    store_.reset();
    io_.reset();
    for (int fd : fds_) close(fd);
    std::filesystem::remove_all(dir_);
  }

  std::string dir_;
  std::vector<int> fds_;
  std::vector<std::unique_ptr<SegmentAllocator>> allocators_;
  std::unique_ptr<IoBackend> io_;
  std::unique_ptr<meta::KvStore> kv_;
  std::unique_ptr<meta::Namespace> ns_;
  std::unique_ptr<ObjectStore> store_;
};

TEST_F(ObjectStoreGrowTest, ConcurrentWritersAndReadersWhileADriveIsAdded) {
  GrowScenario s;
  s.store = store_.get();
  s.new_file = [&](const std::string& name) {
    auto r = ns_->create(meta::kRootIno, name, FileInode());
    EXPECT_TRUE(r.ok()) << r.status().message();
    auto obj = store_->object(r.value());
    EXPECT_TRUE(obj.ok()) << obj.status().message();
    return obj.value();
  };
  s.add = [&]() -> uint32_t {
    Status st = io_->add_segment(2, fds_[2]);
    EXPECT_TRUE(st.ok()) << st.message();
    st = store_->add_drive({2, kDataStart, allocators_[2].get(), true});
    EXPECT_TRUE(st.ok()) << st.message();
    return 2;
  };
  s.poll = [&] { (void)store_->pending_free_bytes(); };
  s.run();
  // Taken slots and ids past the table are refused; the store goes on as it was.
  EXPECT_EQ(io_->add_segment(2, fds_[2]).code(), Code::kInvalidArgument);
  EXPECT_EQ(io_->add_segment(kMaxSegments, fds_[2]).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->add_drive({2, kDataStart, allocators_[2].get(), true}).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->add_drive({0, kDataStart, allocators_[0].get(), true}).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->add_drive({kMaxSegments, kDataStart, allocators_[2].get(), true}).code(), Code::kInvalidArgument);
  EXPECT_EQ(allocators_[2]->free_bytes(), 16ull * kChunk - GrowScenario::kWriters * GrowScenario::kAfter * kChunk);
  EXPECT_TRUE(store_->sync().ok());
}

// The placer takes a segment while other threads place and release.
TEST(PlacerGrowTest, ConcurrentPlaceWhileASegmentIsAdded) {
  auto a0 = NewBestFitAllocator(64 << 20, 4096), a1 = NewBestFitAllocator(64 << 20, 4096);
  auto a2 = NewBestFitAllocator(64 << 20, 4096);
  Placer placer({{0, a0.get()}, {1, a1.get()}});
  auto strategy = MakeStrategy("striped");
  ASSERT_TRUE(strategy.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < 2000; ++i) {
        auto ext = placer.place(**strategy, {static_cast<uint64_t>(t), i, 4096}, 1, 1);
        ASSERT_TRUE(ext.ok());
        ASSERT_LE(ext->at(0).segment, 2u);
        placer.release(ext.value());
      }
    });
  }
  ASSERT_TRUE(placer.add({2, a2.get()}).ok());
  for (auto& t : threads) t.join();
  EXPECT_EQ(placer.size(), 3u);
  EXPECT_FALSE(placer.add({2, a2.get()}).ok());
  EXPECT_FALSE(placer.add({kMaxSegments, a2.get()}).ok());
  // A place() after add() returned sees the segment: under striped, hash 0
  // and chunk 2 prefer position 2 of 3, the new segment.
  auto ext = placer.place(**strategy, {0, 2, 4096}, 1, 1);
  ASSERT_TRUE(ext.ok());
  EXPECT_EQ(ext->at(0).segment, 2u);
  EXPECT_EQ(a0->free_bytes() + a1->free_bytes() + a2->free_bytes(), 3 * (64u << 20) - 4096);
}

// The whole of it through Pool::add_drive, on RocksDB: also df, statfs and
// the configuration read while the drive is added, and the drive recorded.
class OnlineGrowTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stripefs_grow_pool.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    FormatOptions o;
    o.meta_dir = dir_ + "/meta";
    o.drives = {{dir_ + "/d0", kDataStart + 8 * kChunk}, {dir_ + "/d1", kDataStart + 8 * kChunk}};
    o.chunk_size = kChunk;
    Status s = FormatPool(o, 0, 0);
    ASSERT_TRUE(s.ok()) << s.message();
    auto pool = Pool::Open(o.meta_dir, Pool::Mode::kMount);
    ASSERT_TRUE(pool.ok()) << pool.status().message();
    pool_ = std::move(pool).value();
  }
  void TearDown() override {
    pool_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string dir_;
  std::unique_ptr<Pool> pool_;
};

TEST_F(OnlineGrowTest, WritersReadersAndDfWhileADriveIsAdded) {
  const std::string new_path = dir_ + "/d2";
  GrowScenario s;
  s.store = &pool_->store();
  s.new_file = [&](const std::string& name) {
    auto r = pool_->ns().create(meta::kRootIno, name, FileInode());
    EXPECT_TRUE(r.ok()) << r.status().message();
    auto obj = pool_->store().object(r.value());
    EXPECT_TRUE(obj.ok()) << obj.status().message();
    return obj.value();
  };
  s.add = [&]() -> uint32_t {
    auto id = pool_->add_drive({new_path, kDataStart + 16 * kChunk}, false);
    EXPECT_TRUE(id.ok()) << id.status().message();
    return id.ok() ? id.value() : ~0u;
  };
  s.poll = [&] {  // df, statfs, the configuration
    auto usage = pool_->usage();
    EXPECT_TRUE(usage.ok());
    EXPECT_GE(pool_->drive_capacity(), pool_->drive_free());
    EXPECT_GE(pool_->config().drive_count(), 2u);
  };
  s.run();

  auto usage = pool_->usage();
  ASSERT_TRUE(usage.ok());
  ASSERT_EQ(usage->size(), 3u);
  EXPECT_EQ(usage->back().path, new_path);
  EXPECT_EQ(usage->back().capacity, 16ull * kChunk);
  EXPECT_EQ(usage->back().used, uint64_t{GrowScenario::kWriters} * GrowScenario::kAfter * kChunk);
  EXPECT_EQ(pool_->drive_capacity(), 32ull * kChunk);

  // Refusals change nothing; a reopened pool has the drive and is clean.
  EXPECT_EQ(pool_->add_drive({new_path, 0}, false).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(pool_->add_drive({dir_ + "/tiny", 1u << 20}, false).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(pool_->add_drive({dir_ + "/absent", 0}, false).status().code(), Code::kNotFound);
  EXPECT_EQ(pool_->config().segments.size(), 3u);
  pool_.reset();
  auto reopened = Pool::Open(dir_ + "/meta", Pool::Mode::kCheck);
  ASSERT_TRUE(reopened.ok()) << reopened.status().message();
  std::vector<std::string> notes;
  auto problems = reopened.value()->fsck(false, &notes);
  ASSERT_TRUE(problems.ok()) << problems.status().message();
  EXPECT_TRUE(problems->empty()) << problems->front();
  ASSERT_EQ(reopened.value()->config().segments.size(), 3u);
  EXPECT_EQ(reopened.value()->config().segments[2].path, new_path);
}

}  // namespace
}  // namespace stripefs
