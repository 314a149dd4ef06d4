// SPDX-License-Identifier: Apache-2.0
// Crash consistency of the object store (DESIGN invariants 4-6) with the
// fault-injecting backend and metadata store: after a simulated power cut that
// loses everything unsynced, the file is exactly what it was at the last sync;
// after a process kill (nothing lost), it is exactly the last write; and in
// both cases the recorded extents never overlap.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <set>

#include "tests/support/fault_injection_backend.h"
#include "engine/store/object_store.h"
#include "tests/support/fault_injection_kv_store.h"

namespace stripefs {
namespace {

constexpr int kDrives = 4;
constexpr uint64_t kDriveBytes = 32ull << 20;
constexpr uint64_t kDataOffset = 1 << 20;
constexpr uint32_t kChunk = 1 << 20;

class PowerLossTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("stripefs-powerloss-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    for (int i = 0; i < kDrives; ++i) {
      int fd = open((dir_ / ("d" + std::to_string(i))).c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
      ASSERT_GE(fd, 0);
      ASSERT_EQ(ftruncate(fd, kDriveBytes), 0);
      fds_.push_back(fd);
    }
    uring_ = NewUringBackend(fds_);
    io_ = std::make_unique<FaultInjectionBackend>(uring_.get(), fds_);
    mem_ = meta::NewMemKvStore();
    kv_ = std::make_unique<meta::FaultInjectionKvStore>(mem_.get());
    meta::Transaction txn;
    meta::Namespace::Format(&txn, 0, 0);
    ASSERT_TRUE(kv_->commit(txn, true).ok());
    Remount();
    meta::NewInode n;
    n.mode = S_IFREG | 0644;
    n.chunk_size = kChunk;
    n.strategy = "striped";
    auto r = ns_->create(meta::kRootIno, "f", n);
    ASSERT_TRUE(r.ok());
    ino_ = r->ino;
    ASSERT_TRUE(store_->sync().ok());
  }
  void TearDown() override {
    store_.reset();
    for (int fd : fds_) close(fd);
    std::filesystem::remove_all(dir_);
  }

  // What a mount does: fresh namespace and allocators rebuilt from the chunk records.
  void Remount() {
    store_.reset();
    auto ns = meta::Namespace::Open(kv_.get(), "uuid");
    ASSERT_TRUE(ns.ok());
    ns_ = std::move(ns).value();
    allocators_.clear();
    std::vector<DriveSlot> slots;
    for (int i = 0; i < kDrives; ++i) {
      allocators_.push_back(NewBestFitAllocator(kDriveBytes - kDataOffset, meta::kBlockSize));
      slots.push_back({static_cast<uint32_t>(i), kDataOffset, allocators_.back().get()});
    }
    Status overlap;
    ASSERT_TRUE(kv_->scan(meta::ChunkPrefixAll(), [&](std::string_view, std::string_view v) {
                   auto rec = meta::DecodeChunk(v);
                   EXPECT_TRUE(rec.ok());
                   for (const auto& e : rec->replicas) {
                     for (const auto& x : e.extents) {
                       Status s = allocators_[e.segment]->mark_used(x.offset, x.length);
                       if (!s.ok()) overlap = s;
                     }
                   }
                   return true;
                 }).ok());
    ASSERT_TRUE(overlap.ok()) << overlap.message();
    store_ = std::make_unique<ObjectStore>(kv_.get(), ns_.get(), io_.get(), slots);
    ASSERT_TRUE(store_->replay_deferred().ok());
  }

  std::string ReadAll() {
    auto inode = ns_->get(ino_);
    EXPECT_TRUE(inode.ok());
    auto obj = store_->object(inode.value());
    std::string out(inode->size, '\0');
    Status s = store_->read(*obj.value(), 0, out.size(), out.data());
    EXPECT_TRUE(s.ok()) << s.message();
    return out;
  }

  // A random write or truncate, applied to the store and to model.
  void RandomOp(std::mt19937_64& rng, std::string* model) {
    auto inode = ns_->get(ino_);
    ASSERT_TRUE(inode.ok());
    auto obj = store_->object(inode.value()).value();
    if (rng() % 6 == 0) {
      uint64_t size = rng() % (6 * kChunk);
      ASSERT_TRUE(store_->truncate(*obj, size, 1).ok());
      model->resize(size, '\0');
      return;
    }
    uint64_t off = rng() % (6 * kChunk);
    // Half of the writes small enough to be deferred, half moved out of place when they overwrite.
    size_t len = 1 + rng() % (rng() % 2 ? ObjectStore::kDeferredMax : 300 << 10);
    std::string data(len, '\0');
    for (auto& c : data) c = static_cast<char>('a' + rng() % 26);
    ASSERT_TRUE(store_->write(*obj, off, data.data(), len).ok());
    if (model->size() < off + len) model->resize(off + len, '\0');
    model->replace(off, len, data);
  }

  // Torn power cuts (see the test of that name below) after rounds of random writes.
  void TornPowerCuts(uint64_t seed, int rounds);

  // Fills the drives with 16 KiB files, then deletes every other one in
  // drive-offset order and syncs: free space is left in 16 KiB runs.
  void Splinter() {
    std::vector<std::pair<std::pair<uint32_t, uint64_t>, uint64_t>> placed;  // (segment, offset) -> ino
    const std::string data(16 << 10, 's');
    for (int i = 0;; ++i) {
      meta::NewInode n;
      n.mode = S_IFREG | 0644;
      n.chunk_size = kChunk;
      n.strategy = "striped";
      auto r = ns_->create(meta::kRootIno, "s" + std::to_string(i), n);
      ASSERT_TRUE(r.ok());
      auto obj = store_->object(r.value()).value();
      auto w = store_->write(*obj, 0, data.data(), data.size());
      if (!w.ok()) {
        ASSERT_EQ(w.status().code(), Code::kNoSpace) << w.status().message();
        break;
      }
      ASSERT_TRUE(store_->trim(*obj).ok());
      const meta::Replica rep = store_->load_chunks(r->ino).value().at(0).replicas.at(0);
      placed.push_back({{rep.segment, rep.extents.at(0).offset}, r->ino});
    }
    std::sort(placed.begin(), placed.end());
    for (size_t k = 0; k < placed.size(); k += 2) {
      auto inode = ns_->get(placed[k].second);
      ASSERT_TRUE(inode.ok());
      auto obj = store_->object(inode.value()).value();
      ASSERT_TRUE(store_->truncate(*obj, 0, 1).ok());
    }
    ASSERT_TRUE(store_->sync().ok());
  }

  std::filesystem::path dir_;
  std::vector<int> fds_;
  std::unique_ptr<IoBackend> uring_;
  std::unique_ptr<FaultInjectionBackend> io_;
  std::unique_ptr<meta::KvStore> mem_;
  std::unique_ptr<meta::FaultInjectionKvStore> kv_;
  std::unique_ptr<meta::Namespace> ns_;
  std::vector<std::unique_ptr<SegmentAllocator>> allocators_;
  std::unique_ptr<ObjectStore> store_;
  uint64_t ino_ = 0;
};

TEST_F(PowerLossTest, PowerCutLeavesExactlyTheSyncedState) {
  std::mt19937_64 rng(7);
  std::string model, synced;
  for (int round = 0; round < 40; ++round) {
    for (int i = 0; i < 8; ++i) {
      std::string before = model;
      const uint64_t syncs = store_->syncs();
      RandomOp(rng, &model);
      if (store_->syncs() != syncs) synced = before;  // it settled deferred writes first: a sync
    }
    if (rng() % 2) {
      ASSERT_TRUE(store_->sync().ok());
      synced = model;
    }
    if (round % 4 == 3) {  // power cut
      ASSERT_TRUE(io_->drop_unsynced().ok());
      ASSERT_TRUE(kv_->drop_unsynced().ok());
      Remount();
      model = synced;
      ASSERT_EQ(ReadAll(), synced) << "round " << round;
    }
  }
}

// Torn power cut: any 4 KiB block of an unflushed write may have reached the
// drive, and no unsynced commit survives. Writes since the sync overwrite
// blocks in place (small ones deferred, larger ones moved out of place), and
// deferred writes are sometimes copied to the drives before the cut. After
// every cut the file is exactly as synced: no block reads as EIO, and none
// holds bytes of a write whose commit was lost.
void PowerLossTest::TornPowerCuts(uint64_t seed, int rounds) {
  constexpr size_t kB = meta::kBlockSize;
  std::mt19937_64 rng(seed);
  std::string model, synced;
  int cuts = 0;
  uint64_t overwritten = 0;  // blocks of the synced file written since the sync, at the cuts
  std::set<size_t> touched;  // blocks written since the sync
  for (int round = 0; round < rounds; ++round) {
    for (int i = 0; i < 6; ++i) {
      std::string before = model;
      const uint64_t syncs = store_->syncs();
      RandomOp(rng, &model);
      // A write or truncate that settles deferred writes (or finds the pool
      // full) syncs first: everything before it is durable.
      if (store_->syncs() != syncs) {
        synced = before;
        touched.clear();
      }
      for (size_t b = 0; b * kB < std::max(before.size(), model.size()); ++b) {
        if (before.compare(std::min(before.size(), b * kB), kB, model, std::min(model.size(), b * kB), kB) != 0) {
          touched.insert(b);
        }
      }
    }
    if (rng() % 4 == 0 && store_->deferred_bytes() > 0) {  // copies them to the drives (a sync of its own)
      ASSERT_TRUE(store_->apply_deferred().ok());
      EXPECT_EQ(store_->deferred_bytes(), 0u);
      synced = model;
      touched.clear();
    } else if (rng() % 3 == 0) {
      ASSERT_TRUE(store_->sync().ok());
      synced = model;
      touched.clear();
    }
    if (round % 3 != 2) continue;
    for (size_t b : touched) overwritten += b * kB < synced.size();
    touched.clear();
    ASSERT_TRUE(io_->drop_unsynced(rng() | 1).ok());
    ASSERT_TRUE(kv_->drop_unsynced().ok());
    Remount();
    ++cuts;
    auto inode = ns_->get(ino_);
    ASSERT_TRUE(inode.ok());
    ASSERT_EQ(inode->size, synced.size()) << "round " << round;
    auto obj = store_->object(inode.value()).value();
    for (size_t b = 0; b * kB < synced.size(); ++b) {
      const size_t n = std::min(kB, synced.size() - b * kB);
      std::string have(n, '\0');
      Status s = store_->read(*obj, b * kB, n, have.data());
      ASSERT_TRUE(s.ok()) << "round " << round << ": block " << b << " fails: " << s.message();
      ASSERT_TRUE(have == synced.substr(b * kB, n)) << "round " << round << ": block " << b
                                                    << " is not as synced";
    }
    model = synced;
  }
  // The cuts met many blocks overwritten since their sync (checked so the
  // test keeps meaning something).
  EXPECT_GE(cuts, 100);
  EXPECT_GT(overwritten, 1000u);
  std::printf("torn power cuts: %d, blocks overwritten since the sync before them: %llu\n", cuts,
              static_cast<unsigned long long>(overwritten));
}

TEST_F(PowerLossTest, TornPowerCutLeavesEveryBlockAsSynced) { TornPowerCuts(19, 300); }

// The same with free space in runs of 16 KiB only: every chunk of the file
// lies in many extents, so a torn cut tears writes that span them.
TEST_F(PowerLossTest, TornPowerCutOfChunksInManyExtents) {
  Splinter();
  TornPowerCuts(23, 300);
  auto chunks = store_->load_chunks(ino_);
  ASSERT_TRUE(chunks.ok());
  size_t most = 0;
  for (const auto& [index, rec] : chunks.value()) most = std::max(most, rec.replicas.at(0).extents.size());
  EXPECT_GT(most, 8u) << "the file's chunks did not lie in many extents";
}

// A drive that starts failing reads at run time: chunks with another replica
// read from it, a chunk whose only copy is there fails with an I/O error,
// the rest of the file and other files read on, and scrub names what it could
// not read.
TEST_F(PowerLossTest, ReadErrorsFromOneDriveAreServedByOtherReplicas) {
  meta::NewInode n;
  n.mode = S_IFREG | 0644;
  n.chunk_size = kChunk;
  n.strategy = "striped";
  n.replicas = 2;
  auto two = ns_->create(meta::kRootIno, "two", n);
  ASSERT_TRUE(two.ok());
  auto obj2 = store_->object(two.value()).value();
  auto obj1 = store_->object(ns_->get(ino_).value()).value();
  std::string d2(4 * kChunk, '\0'), d1(4 * kChunk, '\0');
  std::mt19937_64 rng(23);
  for (auto& c : d2) c = static_cast<char>(rng());
  for (auto& c : d1) c = static_cast<char>(rng());
  ASSERT_TRUE(store_->write(*obj2, 0, d2.data(), d2.size()).ok());
  ASSERT_TRUE(store_->write(*obj1, 0, d1.data(), d1.size()).ok());
  auto chunks1 = store_->load_chunks(ino_).value();
  const uint32_t dying = chunks1.at(2).replicas[0].segment;  // where chunk 2 of the 1-replica file lives
  io_->fail_reads(dying, true);

  std::string got(d2.size(), '\0');
  ASSERT_TRUE(store_->read(*obj2, 0, got.size(), got.data()).ok());
  EXPECT_EQ(got, d2) << "every chunk of the 2-replica file reads from its other replica";
  Status s = store_->read(*obj1, 2 * kChunk, kChunk, got.data());
  EXPECT_EQ(s.code(), Code::kIOError) << s.message();
  EXPECT_NE(s.message().find("injected read error on segment " + std::to_string(dying)), std::string::npos) << s.message();
  for (const auto& [index, rec] : chunks1) {
    if (rec.replicas[0].segment == dying) continue;
    ASSERT_TRUE(store_->read(*obj1, index * kChunk, kChunk, got.data()).ok()) << "chunk " << index;
    EXPECT_EQ(got.substr(0, kChunk), d1.substr(index * kChunk, kChunk)) << "chunk " << index;
  }
  auto report = store_->scrub(*obj1);
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->unrepairable.size(), 1u);
  EXPECT_NE(report->unrepairable[0].find("injected read error"), std::string::npos) << report->unrepairable[0];
  io_->fail_reads(dying, false);
  ASSERT_TRUE(store_->read(*obj1, 0, d1.size(), got.data()).ok());
  EXPECT_EQ(got, d1) << "all of it reads again once the drive answers";
}

TEST_F(PowerLossTest, ProcessKillKeepsEveryCompletedWrite) {
  std::mt19937_64 rng(11);
  std::string model;
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 8; ++i) RandomOp(rng, &model);
    Remount();  // a kill loses nothing the kernel already has
    ASSERT_EQ(ReadAll(), model) << "round " << round;
  }
}

// A small overwrite is one record in the write log: the drive keeps the old
// bytes until it is settled (after a log sync), reads see the new bytes
// meanwhile, and a kill before that loses nothing.
TEST_F(PowerLossTest, SmallOverwriteIsDeferredUntilApplied) {
  auto obj = store_->object(ns_->get(ino_).value()).value();
  std::string model(2 * kChunk, 'a');
  ASSERT_TRUE(store_->write(*obj, 0, model.data(), model.size()).ok());
  ASSERT_TRUE(store_->sync().ok());
  auto where = [&](uint64_t offset) {  // the drive and byte holding file offset `offset`
    const auto chunks = store_->load_chunks(ino_).value();
    const meta::Replica& r = chunks.at(offset / kChunk).replicas.at(0);
    uint64_t at = 0;
    r.map(offset % kChunk, 1, [&](uint64_t seg_offset, uint64_t, uint64_t) { at = seg_offset; });
    return std::make_pair(fds_[r.segment], kDataOffset + at);
  };
  auto on_drive = [&](uint64_t offset) {
    auto [fd, at] = where(offset);
    char c = 0;
    EXPECT_EQ(pread(fd, &c, 1, static_cast<off_t>(at)), 1);
    return c;
  };
  std::string data(10000, 'b');
  ASSERT_TRUE(store_->write(*obj, 5000, data.data(), data.size()).ok());
  model.replace(5000, data.size(), data);
  EXPECT_EQ(on_drive(8192), 'a') << "a deferred block is not on the drive before its record is durable";
  EXPECT_EQ(store_->deferred_bytes(), 3u * meta::kBlockSize);  // blocks 1-3
  EXPECT_EQ(ReadAll(), model);

  Remount();  // a process kill: the record is replayed
  EXPECT_EQ(on_drive(8192), 'b');
  EXPECT_EQ(ReadAll(), model);
  int records = 0;
  ASSERT_TRUE(kv_->read_log([&](std::string_view) {
                   ++records;
                   return true;
                 }).ok());
  EXPECT_EQ(records, 0) << "the mount drops the log it replayed";

  obj = store_->object(ns_->get(ino_).value()).value();
  ASSERT_TRUE(store_->write(*obj, kChunk + 100, data.data(), 3000).ok());
  model.replace(kChunk + 100, 3000, data.substr(0, 3000));
  ASSERT_TRUE(store_->apply_deferred().ok());
  EXPECT_EQ(store_->deferred_bytes(), 0u);
  EXPECT_EQ(on_drive(kChunk + 100), 'b');
  EXPECT_EQ(ReadAll(), model);
}

// A deferred block rewritten by a larger write (moved out of place) or cut
// off by a truncate must never be replayed over what replaced it.
TEST_F(PowerLossTest, ReplayedRecordsNeverOverwriteNewerData) {
  auto obj = store_->object(ns_->get(ino_).value()).value();
  std::string model(kChunk, 'a');
  ASSERT_TRUE(store_->write(*obj, 0, model.data(), model.size()).ok());
  ASSERT_TRUE(store_->sync().ok());
  const std::string small(4096, 's'), large(256 << 10, 'L');
  ASSERT_TRUE(store_->write(*obj, 0, small.data(), small.size()).ok());        // deferred
  ASSERT_TRUE(store_->write(*obj, 0, large.data(), large.size()).ok());        // moved out of place
  ASSERT_TRUE(store_->write(*obj, 512 << 10, small.data(), small.size()).ok());  // deferred
  ASSERT_TRUE(store_->truncate(*obj, 300 << 10, 1).ok());                     // cuts it off
  ASSERT_TRUE(store_->write(*obj, 300 << 10, large.data(), 200 << 10).ok());     // fresh blocks there
  model.replace(0, large.size(), large);
  model.resize(300 << 10);
  model.append(large.substr(0, 200 << 10));
  ASSERT_TRUE(store_->sync().ok());
  Remount();  // replays whatever the log still holds
  EXPECT_EQ(ReadAll(), model);
}

// A pool written before the write log may hold 'W' records: the mount copies
// a block only where its chunk's committed checksum is the record's (here
// block 0, whose drive bytes were damaged), skips the others (block 1's
// record has other bytes), and deletes them all.
TEST_F(PowerLossTest, ReplaysDeferredRecordsOfPoolsWrittenBeforeTheLog) {
  constexpr size_t kB = meta::kBlockSize;
  auto obj = store_->object(ns_->get(ino_).value()).value();
  const std::string model(2 * kB, 'a');
  ASSERT_TRUE(store_->write(*obj, 0, model.data(), model.size()).ok());
  ASSERT_TRUE(store_->sync().ok());
  const auto chunk = store_->load_chunks(ino_).value().at(0);
  uint64_t at = 0;
  chunk.replicas.at(0).map(0, 1, [&](uint64_t seg_offset, uint64_t, uint64_t) { at = seg_offset; });
  const int fd = fds_[chunk.replicas.at(0).segment];
  ASSERT_EQ(pwrite(fd, "x", 1, static_cast<off_t>(kDataOffset + at)), 1);
  meta::Transaction txn;
  meta::DeferredWrite same{ino_, 0, 0, std::string(kB, 'a')}, other{ino_, 0, 1, std::string(kB, 'z')};
  txn.put(meta::DeferredKey(1), meta::EncodeDeferred(same));
  txn.put(meta::DeferredKey(2), meta::EncodeDeferred(other));
  ASSERT_TRUE(kv_->commit(txn, true).ok());
  Remount();
  char c = 0;
  ASSERT_EQ(pread(fd, &c, 1, static_cast<off_t>(kDataOffset + at)), 1);
  EXPECT_EQ(c, 'a') << "the matching record was copied to the drive";
  EXPECT_EQ(ReadAll(), model);
  int records = 0;
  ASSERT_TRUE(kv_->scan(meta::DeferredPrefixAll(), [&](std::string_view, std::string_view) {
                   ++records;
                   return true;
                 }).ok());
  EXPECT_EQ(records, 0) << "the mount deletes the records it replayed";
}

TEST_F(PowerLossTest, FailedWriteKeepsOldContentsAndSpace) {
  std::mt19937_64 rng(3);
  std::string model;
  for (int i = 0; i < 10; ++i) RandomOp(rng, &model);
  ASSERT_TRUE(store_->sync().ok());
  uint64_t free_before = 0;
  for (auto& a : allocators_) free_before += a->free_bytes();
  auto obj = store_->object(ns_->get(ino_).value()).value();
  std::string data(3 * kChunk, 'z');
  io_->fail_nth_write(2);  // the second piece of this multi-chunk write fails
  Status s = store_->write(*obj, kChunk / 2, data.data(), data.size()).status();
  EXPECT_EQ(s.code(), Code::kIOError);
  uint64_t free_after = 0;
  for (auto& a : allocators_) free_after += a->free_bytes();
  EXPECT_EQ(free_after, free_before);
  EXPECT_EQ(ReadAll(), model);
}

// Space given up by an unsynced commit must not be reused before the WAL is
// synced: if the commit were lost, the old record would point at new data.
TEST_F(PowerLossTest, FreedSpaceIsNotReusedBeforeSync) {
  auto a = store_->object(ns_->get(ino_).value()).value();
  std::string data(4 * kChunk, 'a');
  ASSERT_TRUE(store_->write(*a, 0, data.data(), data.size()).ok());
  ASSERT_TRUE(store_->sync().ok());
  auto old_chunks = store_->load_chunks(ino_).value();
  ASSERT_TRUE(store_->truncate(*a, 0, 1).ok());  // not synced

  meta::NewInode n;
  n.mode = S_IFREG | 0644;
  n.chunk_size = kChunk;
  n.strategy = "striped";
  auto b_inode = ns_->create(meta::kRootIno, "g", n).value();
  auto b = store_->object(b_inode).value();
  std::string other(4 * kChunk, 'b');
  ASSERT_TRUE(store_->write(*b, 0, other.data(), other.size()).ok());
  auto new_chunks = store_->load_chunks(b_inode.ino).value();
  ASSERT_EQ(new_chunks.size(), 4u);
  for (const auto& [bi, brec] : new_chunks) {
    for (const auto& [ai, arec] : old_chunks) {
      for (const auto& be : brec.replicas) {
        for (const auto& ae : arec.replicas) {
          for (const auto& bx : be.extents) {
            for (const auto& ax : ae.extents) {
              bool overlap = be.segment == ae.segment && bx.offset < ax.offset + ax.length &&
                             ax.offset < bx.offset + bx.length;
              EXPECT_FALSE(overlap) << "chunk " << bi << " of the new file reuses space of chunk " << ai;
            }
          }
        }
      }
    }
  }
  // After a sync the space is free again.
  uint64_t free_before = 0, free_after = 0;
  for (auto& al : allocators_) free_before += al->free_bytes();
  ASSERT_TRUE(store_->sync().ok());
  for (auto& al : allocators_) free_after += al->free_bytes();
  EXPECT_EQ(free_after - free_before, 4ull * kChunk);
}

}  // namespace
}  // namespace stripefs
