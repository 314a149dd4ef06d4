// SPDX-License-Identifier: Apache-2.0
// ObjectStore over real drive files, io_uring, best-fit allocators and an
// in-memory metadata store.
#include "engine/store/object_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <tuple>

#include <thread>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/placement/allocator.h"
#include "engine/io/io_backend.h"
#include "engine/placement/placement.h"
#include "meta/kv_store.h"
#include "meta/namespace.h"
#include "tests/unit/test_namespace.h"

namespace stripefs {
namespace {

using meta::ChunkRecord;
using meta::InodeRecord;

constexpr int kDrives = 4;
constexpr uint64_t kDriveSize = 64ull << 20;
constexpr uint64_t kDataOffset = 1ull << 20;
constexpr uint64_t kCapacity = kDriveSize - kDataOffset;
constexpr uint32_t kChunk = 1u << 20;
constexpr uint64_t kBlock = 4096;

// Passes everything to another backend, except that it can fail the Nth write
// request (counted from arming) with an IOError without performing it, and
// can perform a batch's requests one by one, last first (a batch's writes may
// land in any order).
class FaultyBackend final : public IoBackend {
 public:
  explicit FaultyBackend(IoBackend* inner) : inner_(inner) {}

  void RunBatchesLastFirst(bool on) { last_first_ = on; }

  // Fails the nth write request from now on (1 = the next one); 0 disarms.
  void FailNthWrite(int n) {
    writes_seen_ = 0;
    fail_at_ = n;
    failures_ = 0;
  }
  int failures() const { return failures_; }
  int reads() const { return reads_; }  // read requests run so far

  Status run(std::span<IoRequest> requests) override {
    std::vector<IoRequest> pass;
    bool failed = false;
    for (IoRequest& r : requests) {
      if (r.op == IoRequest::Op::kRead) ++reads_;
      if (r.op == IoRequest::Op::kWrite && fail_at_ > 0 && ++writes_seen_ == fail_at_) {
        failed = true;
        ++failures_;
        continue;
      }
      pass.push_back(r);
    }
    Status s;
    if (last_first_) {
      for (auto r = pass.rbegin(); r != pass.rend() && s.ok(); ++r) s = inner_->run(std::span(&*r, 1));
    } else {
      s = inner_->run(pass);
    }
    if (failed) return Status::IOError("injected write fault");
    return s;
  }
  Status flush(uint32_t segment) override { return inner_->flush(segment); }

 private:
  IoBackend* inner_;
  std::atomic<int> fail_at_{0};
  std::atomic<int> writes_seen_{0};
  std::atomic<int> failures_{0};
  std::atomic<int> reads_{0};
  std::atomic<bool> last_first_{false};
};

// Deterministic pseudo-random bytes, with no zero bytes (so holes are visible).
std::string Pattern(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(1 + rng() % 255);
  return s;
}

// Names the first differing byte instead of dumping megabytes.
testing::AssertionResult SameBytes(const std::string& got, const std::string& want) {
  if (got.size() != want.size()) {
    return testing::AssertionFailure() << "size " << got.size() << ", want " << want.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      return testing::AssertionFailure() << "first difference at byte " << i << ": got "
                                         << int(static_cast<uint8_t>(got[i])) << ", want "
                                         << int(static_cast<uint8_t>(want[i]));
    }
  }
  return testing::AssertionSuccess();
}

class ObjectStoreTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/stripefs_os_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    for (int i = 0; i < kDrives; ++i) {
      std::string path = dir_ + "/drive" + std::to_string(i);
      int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      ASSERT_GE(fd, 0) << path;
      ASSERT_EQ(ftruncate(fd, kDriveSize), 0);
      fds_.push_back(fd);
    }
    uring_ = NewUringBackend(fds_);
    faulty_ = std::make_unique<FaultyBackend>(uring_.get());
    for (int i = 0; i < kDrives; ++i) {
      allocators_.push_back(NewBestFitAllocator(kCapacity, kBlock));
      slots_.push_back({static_cast<uint32_t>(i), kDataOffset, allocators_.back().get()});
    }
    kv_ = meta::NewMemKvStore();
    ns_ = testing_support::FormatAndOpenNamespace(kv_.get());
    ASSERT_TRUE(ns_);
    NewStore();
  }

  void TearDown() override {
    store_.reset();
    for (int fd : fds_) close(fd);
    std::filesystem::remove_all(dir_);
  }

  // A new ObjectStore instance over the same metadata, drives and allocators.
  // The old one is synced first, so the space it gave up is not lost with it;
  // its deferred writes are replayed.
  void NewStore() {
    if (store_) {
      Status s = store_->sync();
      ASSERT_TRUE(s.ok()) << s.message();
    }
    store_ = std::make_unique<ObjectStore>(kv_.get(), ns_.get(), faulty_.get(), slots_);
    Status replayed = store_->replay_deferred();  // as a mount does
    ASSERT_TRUE(replayed.ok()) << replayed.message();
  }

  InodeRecord NewFile(const std::string& name, const std::string& strategy = "striped", uint32_t replicas = 1) {
    meta::NewInode n;
    n.mode = S_IFREG | 0644;
    n.chunk_size = kChunk;
    n.strategy = strategy;
    n.replicas = replicas;
    auto r = ns_->create(meta::kRootIno, name, n);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r.value() : InodeRecord{};
  }

  std::shared_ptr<ObjectStore::Object> Obj(const InodeRecord& inode) {
    auto o = store_->object(inode);
    EXPECT_TRUE(o.ok()) << o.status().message();
    return o.ok() ? o.value() : nullptr;
  }

  Status Write(ObjectStore::Object& obj, uint64_t off, const std::string& data) {
    return store_->write(obj, off, data.data(), data.size()).status();
  }

  // Reads [off, off+len); on error returns the status through *st.
  std::string Read(ObjectStore::Object& obj, uint64_t off, size_t len, Status* st = nullptr) {
    std::string out(len, '\x55');
    Status s = store_->read(obj, off, len, out.data());
    if (st) {
      *st = s;
    } else {
      EXPECT_TRUE(s.ok()) << s.message();
    }
    return out;
  }

  uint64_t Size(uint64_t ino) {
    auto r = ns_->get(ino);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->size : ~0ull;
  }

  uint64_t TotalFree() const {
    uint64_t f = 0;
    for (const auto& a : allocators_) f += a->free_bytes();
    return f;
  }

  std::map<uint64_t, ChunkRecord> Chunks(uint64_t ino) {
    auto c = store_->load_chunks(ino);
    EXPECT_TRUE(c.ok()) << c.status().message();
    return c.ok() ? c.value() : std::map<uint64_t, ChunkRecord>{};
  }

  // Flips one byte of a replica on its drive file, behind the store's back.
  void CorruptByte(const meta::Replica& e, uint64_t offset_in_chunk) {
    off_t pos = -1;
    e.map(offset_in_chunk, 1, [&](uint64_t at, uint64_t, uint64_t) { pos = static_cast<off_t>(slots_[e.segment].data_offset + at); });
    ASSERT_GE(pos, 0) << "offset " << offset_in_chunk << " is past the replica";
    char c;
    ASSERT_EQ(pread(fds_[e.segment], &c, 1, pos), 1);
    c = static_cast<char>(c ^ 0x5a);
    ASSERT_EQ(pwrite(fds_[e.segment], &c, 1, pos), 1);
  }

  // Readers and writers on one shared object and their own objects at once.
  void RunConcurrentReadersAndWriters();

  // The first len bytes of a replica as they are on its drive.
  std::string RawReplica(const meta::Replica& e, size_t len) {
    std::string out(len, '\0');
    e.map(0, len, [&](uint64_t at, uint64_t from, uint64_t n) {
      EXPECT_EQ(pread(fds_[e.segment], out.data() + from, n, static_cast<off_t>(slots_[e.segment].data_offset + at)),
                static_cast<ssize_t>(n));
    });
    return out;
  }

  std::string dir_;
  std::vector<int> fds_;
  std::unique_ptr<IoBackend> uring_;
  std::unique_ptr<FaultyBackend> faulty_;
  std::vector<std::unique_ptr<SegmentAllocator>> allocators_;
  std::vector<DriveSlot> slots_;
  std::unique_ptr<meta::KvStore> kv_;
  std::unique_ptr<meta::Namespace> ns_;
  std::unique_ptr<ObjectStore> store_;
};

// The expected contents of a file.
struct Model {
  std::string bytes;
  void write(uint64_t off, const std::string& data) {
    if (bytes.size() < off + data.size()) bytes.resize(off + data.size(), '\0');
    bytes.replace(off, data.size(), data);
  }
  void truncate(uint64_t size) { bytes.resize(size, '\0'); }
};

TEST_F(ObjectStoreTest, UnalignedWritesAndReadsAcrossChunks) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  Model m;
  struct W {
    uint64_t off;
    size_t len;
  };
  const std::vector<W> writes = {
      {0, 1},                          // one byte
      {1, 4094},                       // up to a block end minus one
      {4095, 2},                       // across a block boundary
      {kChunk - 3, 10},                // across a chunk boundary
      {12345, 2 * kChunk + 17},        // across several chunks, unaligned at both ends
      {3 * kChunk + 100, 5000},        // extends the file
      {kChunk, kChunk},                // exactly one chunk, aligned
      {777, 3},                        // small overwrite inside the first block
      {2 * kChunk - 1, 2},             // last byte of chunk 1, first of chunk 2
  };
  uint32_t seed = 1;
  for (const W& w : writes) {
    SCOPED_TRACE(testing::Message() << "write at " << w.off << " of " << w.len);
    std::string data = Pattern(w.len, seed++);
    ASSERT_TRUE(Write(*obj, w.off, data).ok());
    m.write(w.off, data);
    EXPECT_EQ(Size(f.ino), m.bytes.size());
    EXPECT_TRUE(SameBytes(Read(*obj, 0, m.bytes.size()), m.bytes));
  }
  // Unaligned partial reads.
  std::mt19937_64 rng(9);
  for (int i = 0; i < 100; ++i) {
    uint64_t off = rng() % m.bytes.size();
    size_t len = 1 + rng() % std::min<uint64_t>(m.bytes.size() - off, 3 * kChunk);
    ASSERT_TRUE(SameBytes(Read(*obj, off, len), m.bytes.substr(off, len))) << "read at " << off << " of " << len;
  }
}

TEST_F(ObjectStoreTest, StripedChunksLandOnHashPlusIndex) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  ASSERT_TRUE(Write(*obj, 0, Pattern(6 * kChunk, 3)).ok());
  uint64_t h = ObjectHash(f.uri);
  auto chunks = Chunks(f.ino);
  ASSERT_EQ(chunks.size(), 6u);
  for (const auto& [index, rec] : chunks) {
    ASSERT_EQ(rec.replicas.size(), 1u);
    EXPECT_EQ(rec.replicas[0].segment, (h % kDrives + index % kDrives) % kDrives) << "chunk " << index;
    EXPECT_EQ(rec.length, kChunk);
    EXPECT_EQ(rec.crcs.size(), kChunk / kBlock);
  }
}

TEST_F(ObjectStoreTest, HolesReadAsZeros) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  Model m;
  // A hole inside chunk 0 and a hole of whole chunks.
  for (auto [off, seed] : std::vector<std::pair<uint64_t, uint32_t>>{{0, 1}, {500000, 2}, {3 * kChunk + 5, 3}}) {
    std::string d = Pattern(3000, seed);
    ASSERT_TRUE(Write(*obj, off, d).ok());
    m.write(off, d);
  }
  std::string all = Read(*obj, 0, m.bytes.size());
  EXPECT_TRUE(SameBytes(all, m.bytes));
  EXPECT_EQ(all.substr(3000, 500000 - 3000), std::string(500000 - 3000, '\0'));
  EXPECT_EQ(all.substr(503000, 3 * kChunk + 5 - 503000), std::string(3 * kChunk + 5 - 503000, '\0'));
  // Only the written chunks exist.
  auto chunks = Chunks(f.ino);
  std::set<uint64_t> idx;
  for (const auto& [i, r] : chunks) idx.insert(i);
  EXPECT_EQ(idx, (std::set<uint64_t>{0, 3}));
  // Reading past the written data of a chunk (but within the read) gives zeros.
  std::string tail = Read(*obj, 3 * kChunk + 5 + 3000 - 10, 10 + 4096);
  EXPECT_EQ(tail.substr(0, 10), m.bytes.substr(3 * kChunk + 5 + 3000 - 10, 10));
  EXPECT_EQ(tail.substr(10), std::string(4096, '\0'));
}

// sqlite's WAL writes a frame as a 24-byte header and then its page, each
// a partial block beside the last write: the second's old block is the
// first's deferred block, taken from memory rather than read from a drive.
TEST_F(ObjectStoreTest, SmallOverwriteBesideADeferredOneReadsNoDrive) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  Model m;
  std::string d = Pattern(64 * 1024, 1);
  ASSERT_TRUE(Write(*obj, 0, d).ok());
  m.write(0, d);
  std::string header = Pattern(24, 2), page = Pattern(4096, 3);
  ASSERT_TRUE(Write(*obj, 8192 + 100, header).ok());  // block 2, deferred
  m.write(8192 + 100, header);
  const int reads_before = faulty_->reads();
  ASSERT_TRUE(Write(*obj, 8192 + 124, page).ok());  // blocks 2 and 3: block 2 is in memory
  m.write(8192 + 124, page);
  const int reads_for_page = faulty_->reads() - reads_before;
  EXPECT_TRUE(SameBytes(Read(*obj, 0, m.bytes.size()), m.bytes));
  // Block 3's old bytes (the tail) still come from a drive; block 2's do not.
  EXPECT_EQ(reads_for_page, 1);
  NewStore();  // settled at close or replayed: the same bytes from the records
  auto obj2 = Obj(f);
  ASSERT_NE(obj2, nullptr);
  EXPECT_TRUE(SameBytes(Read(*obj2, 0, m.bytes.size()), m.bytes));
}

TEST_F(ObjectStoreTest, OverwriteInPlace) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  Model m;
  std::string d = Pattern(2 * kChunk, 1);
  ASSERT_TRUE(Write(*obj, 0, d).ok());
  m.write(0, d);
  auto before = Chunks(f.ino);
  uint64_t free_before = TotalFree();
  uint32_t seed = 10;
  for (auto [off, len] : std::vector<std::pair<uint64_t, size_t>>{
           {10, 20}, {4090, 10}, {8192, 4096}, {kChunk - 100, 200}, {2 * kChunk - 5000, 5000}}) {
    std::string o = Pattern(len, seed++);
    ASSERT_TRUE(Write(*obj, off, o).ok());
    m.write(off, o);
    EXPECT_TRUE(SameBytes(Read(*obj, 0, m.bytes.size()), m.bytes)) << "after overwrite at " << off;
  }
  EXPECT_EQ(Size(f.ino), 2 * kChunk);
  auto after = Chunks(f.ino);
  ASSERT_EQ(after.size(), before.size());
  for (const auto& [i, rec] : after) {
    EXPECT_EQ(rec.replicas, before[i].replicas) << "chunk " << i << " moved";
    EXPECT_TRUE(rec.pending.empty()) << "chunk " << i << " kept pending checksums after a completed write";
  }
  EXPECT_EQ(TotalFree(), free_before);
  // A fresh store (reading records from the kv) agrees.
  NewStore();
  auto obj2 = Obj(f);
  ASSERT_NE(obj2, nullptr);
  EXPECT_TRUE(SameBytes(Read(*obj2, 0, m.bytes.size()), m.bytes));
}

// A block overwritten twice and never settled is replayed with its newer
// bytes, whatever order the drives perform the replay's writes in.
TEST_F(ObjectStoreTest, ReplayWritesABlockLoggedTwiceWithItsNewestBytes) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  Model m;
  std::string d = Pattern(kChunk, 1);
  ASSERT_TRUE(Write(*obj, 0, d).ok());
  m.write(0, d);
  uint32_t seed = 2;
  for (auto [off, len] : std::vector<std::pair<uint64_t, size_t>>{{10, 20}, {0, 4096}, {100, 8000}, {20, 30}}) {
    std::string o = Pattern(len, seed++);
    ASSERT_TRUE(Write(*obj, off, o).ok());
    m.write(off, o);
  }
  ASSERT_GT(store_->deferred_bytes(), 0u) << "the overwrites were meant to be logged";
  obj.reset();
  faulty_->RunBatchesLastFirst(true);
  NewStore();  // replays the log
  faulty_->RunBatchesLastFirst(false);
  NewStore();  // reads only what the replay stored
  auto again = Obj(f);
  ASSERT_NE(again, nullptr);
  EXPECT_TRUE(SameBytes(Read(*again, 0, m.bytes.size()), m.bytes));
}

// SEEK_DATA and SEEK_HOLE agree with reads at block granularity: a range
// punched inside a chunk (it stores zeros) is a hole, as is a dropped chunk,
// and so is a range written with zeros; the answers come from the records, so
// a fresh store gives the same ones.
TEST_F(ObjectStoreTest, SeekFindsHolesPunchedInsideAChunk) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  const uint64_t size = 4 * kChunk;
  ASSERT_TRUE(Write(*obj, 0, Pattern(size, 3)).ok());
  const uint64_t punched = kChunk / 2, punched_end = punched + 16 * kBlock;
  ASSERT_TRUE(store_->punch_hole(*obj, punched, punched_end - punched).ok());
  ASSERT_TRUE(store_->punch_hole(*obj, kChunk, kChunk).ok());  // chunk 1 whole
  const uint64_t zeroed = 2 * kChunk + 5 * kBlock, zeroed_end = zeroed + 3 * kBlock;
  ASSERT_TRUE(Write(*obj, zeroed, std::string(zeroed_end - zeroed, '\0')).ok());
  auto expect = [&](ObjectStore& store, ObjectStore::Object& o) {
    auto hole = [&](uint64_t at) { return store.seek(o, at, false, size); };
    auto data = [&](uint64_t at) { return store.seek(o, at, true, size); };
    EXPECT_EQ(hole(0).value(), punched);
    EXPECT_EQ(data(0).value(), 0u);
    EXPECT_EQ(data(punched).value(), punched_end);
    EXPECT_EQ(data(punched + 100).value(), punched_end);
    EXPECT_EQ(hole(punched + 100).value(), punched + 100);
    EXPECT_EQ(hole(punched_end).value(), kChunk);
    EXPECT_EQ(data(kChunk).value(), 2 * kChunk);
    EXPECT_EQ(hole(2 * kChunk).value(), zeroed);
    EXPECT_EQ(data(zeroed).value(), zeroed_end);
    EXPECT_EQ(hole(zeroed_end).value(), size);
    EXPECT_EQ(data(size - 1).value(), size - 1);
    EXPECT_EQ(hole(size).status().code(), Code::kPastEnd);
  };
  expect(*store_, *obj);
  obj.reset();
  NewStore();
  auto again = Obj(f);
  ASSERT_NE(again, nullptr);
  expect(*store_, *again);
}

// Pools written before checksum pages hold one checksum record per chunk:
// such a file reads back, takes an overwrite and a truncate, and every chunk
// it stores again is stored in pages; the others stay as they were.
TEST_F(ObjectStoreTest, ChunksWithWholeChecksumRecordsReadAndMoveToPages) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  Model m;
  std::string d = Pattern(3 * kChunk, 4);
  ASSERT_TRUE(Write(*obj, 0, d).ok());
  m.write(0, d);
  meta::Transaction old_format;
  for (const auto& [index, rec] : Chunks(f.ino)) {
    for (uint32_t page = 0; page < rec.checksum_pages(); ++page) old_format.del(meta::ChecksumPageKey(f.ino, index, page));
    old_format.put(meta::ChecksumKey(f.ino, index), meta::EncodeChecksums(rec));
  }
  ASSERT_TRUE(kv_->commit(old_format, false).ok());
  auto checksum_keys = [&] {
    std::vector<std::string> keys;
    EXPECT_TRUE(kv_->scan(meta::ChecksumPrefix(f.ino), [&](std::string_view k, std::string_view) {
                      keys.emplace_back(k);
                      return true;
                    }).ok());
    return keys;
  };
  ASSERT_EQ(checksum_keys().size(), 3u);
  NewStore();
  obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  EXPECT_TRUE(SameBytes(Read(*obj, 0, m.bytes.size()), m.bytes));
  std::string o = Pattern(kBlock, 5);
  ASSERT_TRUE(Write(*obj, kChunk + 8 * kBlock, o).ok());  // in place, in chunk 1
  m.write(kChunk + 8 * kBlock, o);
  ASSERT_TRUE(store_->truncate(*obj, 2 * kChunk + 100 * kBlock, meta::NowNs()).ok());  // cuts chunk 2
  m.bytes.resize(2 * kChunk + 100 * kBlock);
  const uint32_t pages = kChunk / kBlock / meta::kChecksumPageBlocks;
  std::vector<std::string> want = {meta::ChecksumKey(f.ino, 0)};  // untouched
  for (uint32_t page = 0; page < pages; ++page) want.push_back(meta::ChecksumPageKey(f.ino, 1, page));
  for (uint32_t page = 0; page < 100 / meta::kChecksumPageBlocks + 1; ++page) {
    want.push_back(meta::ChecksumPageKey(f.ino, 2, page));
  }
  EXPECT_EQ(checksum_keys(), want);
  NewStore();
  obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  EXPECT_TRUE(SameBytes(Read(*obj, 0, m.bytes.size()), m.bytes));
  ASSERT_TRUE(store_->truncate(*obj, 0, meta::NowNs()).ok());
  EXPECT_TRUE(checksum_keys().empty());
}

TEST_F(ObjectStoreTest, SparseWriteFarOut) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  const uint64_t off = 40ull * kChunk + 123;
  std::string d = Pattern(9000, 4);
  ASSERT_TRUE(Write(*obj, off, d).ok());
  EXPECT_EQ(Size(f.ino), off + d.size());
  std::string all = Read(*obj, 0, off + d.size());
  EXPECT_TRUE(SameBytes(all.substr(0, off), std::string(off, '\0')));
  EXPECT_TRUE(SameBytes(all.substr(off), d));
  auto chunks = Chunks(f.ino);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks.begin()->first, 40u);
  // Then fill in something at the start.
  ASSERT_TRUE(Write(*obj, 0, "head").ok());
  EXPECT_EQ(Read(*obj, 0, 4), "head");
  EXPECT_EQ(Size(f.ino), off + d.size());
}

TEST_F(ObjectStoreTest, TruncateDownThenUp) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  Model m;
  std::string d = Pattern(3 * kChunk + 777, 5);
  ASSERT_TRUE(Write(*obj, 0, d).ok());
  m.write(0, d);

  const uint64_t cut = kChunk + kChunk / 2 + 100;  // inside chunk 1, mid-block
  auto t = store_->truncate(*obj, cut, meta::NowNs());
  ASSERT_TRUE(t.ok()) << t.status().message();
  m.truncate(cut);
  EXPECT_EQ(t->size, cut);
  EXPECT_EQ(Size(f.ino), cut);
  EXPECT_TRUE(SameBytes(Read(*obj, 0, cut), m.bytes));
  auto chunks = Chunks(f.ino);
  EXPECT_EQ(chunks.size(), 2u) << "chunks past the cut must be dropped";
  ASSERT_TRUE(store_->sync().ok());
  const uint64_t cut_capacity = (cut - kChunk + kBlock - 1) / kBlock * kBlock;
  EXPECT_EQ(chunks[1].capacity, cut_capacity);
  EXPECT_EQ(TotalFree(), kDrives * kCapacity - kChunk - cut_capacity) << "space past the cut was not given back";

  // Growing leaves zeros beyond the cut, not the old data.
  const uint64_t grown = 3 * kChunk;
  ASSERT_TRUE(store_->truncate(*obj, grown, meta::NowNs()).ok());
  m.truncate(grown);
  EXPECT_EQ(Size(f.ino), grown);
  std::string all = Read(*obj, 0, grown);
  EXPECT_TRUE(SameBytes(all, m.bytes));
  EXPECT_EQ(all.substr(cut, 4096), std::string(4096, '\0'));

  // A write a little past the cut must not resurrect the old bytes in between.
  std::string w = Pattern(50, 6);
  ASSERT_TRUE(Write(*obj, cut + 200, w).ok());
  m.write(cut + 200, w);
  EXPECT_TRUE(SameBytes(Read(*obj, 0, m.bytes.size()), m.bytes));
  ASSERT_TRUE(store_->sync().ok());
  EXPECT_EQ(TotalFree(), kDrives * kCapacity - kChunk - cut_capacity);
  // Same in a fresh store.
  NewStore();
  auto obj2 = Obj(f);
  ASSERT_NE(obj2, nullptr);
  EXPECT_TRUE(SameBytes(Read(*obj2, 0, m.bytes.size()), m.bytes));

  // Truncate to zero gives everything back.
  ASSERT_TRUE(store_->truncate(*obj2, 0, meta::NowNs()).ok());
  EXPECT_EQ(Size(f.ino), 0u);
  EXPECT_TRUE(Chunks(f.ino).empty());
  ASSERT_TRUE(store_->sync().ok());
  EXPECT_EQ(TotalFree(), kDrives * kCapacity);
}

TEST_F(ObjectStoreTest, TruncateAtBlockBoundaryThenExtendByWrite) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  Model m;
  std::string d = Pattern(10 * kBlock, 7);
  ASSERT_TRUE(Write(*obj, 0, d).ok());
  m.write(0, d);
  ASSERT_TRUE(store_->truncate(*obj, 3 * kBlock + 1, meta::NowNs()).ok());
  m.truncate(3 * kBlock + 1);
  ASSERT_TRUE(store_->sync().ok());
  // Append after the cut: the chunk has to grow again.
  std::string a = Pattern(5 * kBlock, 8);
  ASSERT_TRUE(Write(*obj, 6 * kBlock + 3, a).ok());
  m.write(6 * kBlock + 3, a);
  EXPECT_TRUE(SameBytes(Read(*obj, 0, m.bytes.size()), m.bytes));
}

// A chunk whose next bytes on its drive are taken grows where it lies, with
// a further extent elsewhere on the same drive: no data moves.
TEST_F(ObjectStoreTest, GrowingAChunkBlockedByANeighbourAddsAnExtent) {
  const uint64_t all = TotalFree();
  InodeRecord a = NewFile("a");
  auto ao = Obj(a);
  ASSERT_NE(ao, nullptr);
  Model m;
  std::string d = Pattern(10000, 50);
  ASSERT_TRUE(Write(*ao, 0, d).ok());
  m.write(0, d);
  ASSERT_TRUE(store_->trim(*ao).ok());
  ASSERT_TRUE(store_->sync().ok());
  const auto before = Chunks(a.ino);
  ASSERT_EQ(before.at(0).capacity, 3 * kBlock);

  // Another file takes a chunk on every drive, right after a's 3 blocks on a's drive.
  InodeRecord b = NewFile("b");
  auto bo = Obj(b);
  ASSERT_NE(bo, nullptr);
  std::string bd = Pattern(4 * kChunk, 51);
  ASSERT_TRUE(Write(*bo, 0, bd).ok());

  std::string g = Pattern(200000, 52);
  ASSERT_TRUE(Write(*ao, 5000, g).ok());
  m.write(5000, g);
  const auto after = Chunks(a.ino);
  ASSERT_EQ(after.at(0).replicas.size(), 1u);
  const meta::Replica& grown = after.at(0).replicas[0];
  EXPECT_EQ(grown.segment, before.at(0).replicas[0].segment) << "the chunk stays on its drive";
  // Block 0 stays where it was; blocks 1-2, overwritten, moved out of place;
  // the first extent could not grow, so another one holds the rest.
  ASSERT_EQ(grown.extents.size(), 3u);
  EXPECT_EQ(grown.extents[0], (meta::Extent{before.at(0).replicas[0].extents[0].offset, kBlock}))
      << "the block not written again stays where it is";
  EXPECT_EQ(grown.extents[1].length, 2 * kBlock);
  EXPECT_EQ(grown.bytes(), after.at(0).capacity);
  EXPECT_TRUE(SameBytes(Read(*ao, 0, m.bytes.size()), m.bytes));
  EXPECT_TRUE(SameBytes(Read(*bo, 0, bd.size()), bd));
  ASSERT_TRUE(store_->sync().ok());
  EXPECT_EQ(TotalFree(), all - 4 * kChunk - after.at(0).capacity) << "space is counted twice or lost";
  NewStore();
  auto ao2 = Obj(a);
  ASSERT_NE(ao2, nullptr);
  EXPECT_TRUE(SameBytes(Read(*ao2, 0, m.bytes.size()), m.bytes));
}

// Free space left in small scattered runs by deletes is writable: a file
// written afterwards takes all of it but less than a chunk per drive (a
// chunk's replica stays on one drive), its chunks spread over many extents,
// and it reads back, also from a new store over the records.
TEST_F(ObjectStoreTest, FreeSpaceSplinteredByDeletesIsWritable) {
  const std::string small = Pattern(64 << 10, 60);
  std::vector<std::shared_ptr<ObjectStore::Object>> files;
  for (int i = 0;; ++i) {
    auto o = Obj(NewFile("s" + std::to_string(i)));
    ASSERT_NE(o, nullptr);
    Status s = Write(*o, 0, small);
    if (!s.ok()) {
      ASSERT_EQ(s.code(), Code::kNoSpace) << s.message();
      break;
    }
    ASSERT_TRUE(store_->trim(*o).ok());
    files.push_back(o);
  }
  ASSERT_TRUE(store_->sync().ok());
  ASSERT_LT(TotalFree(), kDrives * (64u << 10)) << "the small files did not fill the drives";
  // Every other file in drive-offset order goes.
  std::vector<std::tuple<uint32_t, uint64_t, size_t>> by_offset;
  for (size_t i = 0; i < files.size(); ++i) {
    const meta::Replica r = Chunks(files[i]->ino).at(0).replicas.at(0);
    by_offset.emplace_back(r.segment, r.extents.at(0).offset, i);
  }
  std::sort(by_offset.begin(), by_offset.end());
  std::vector<std::shared_ptr<ObjectStore::Object>> kept;
  for (size_t k = 0; k < by_offset.size(); ++k) {
    auto& o = files[std::get<2>(by_offset[k])];
    if (k % 2 == 0) {
      ASSERT_TRUE(store_->truncate(*o, 0, meta::NowNs()).ok());
    } else {
      kept.push_back(o);
    }
  }
  files = std::move(kept);
  ASSERT_TRUE(store_->sync().ok());
  const uint64_t free = TotalFree();
  for (const auto& a : allocators_) EXPECT_LE(a->largest_free_run(), 64u << 10) << "no long run is left";

  InodeRecord big = NewFile("big");
  auto bo = Obj(big);
  ASSERT_NE(bo, nullptr);
  Model m;
  for (uint32_t seed = 0;; ++seed) {
    std::string piece = Pattern(64 << 10, 1000 + seed);
    Status s = Write(*bo, m.bytes.size(), piece);
    if (!s.ok()) {
      ASSERT_EQ(s.code(), Code::kNoSpace) << s.message();
      break;
    }
    m.write(m.bytes.size(), piece);
  }
  EXPECT_GE(m.bytes.size(), free - kDrives * uint64_t{kChunk}) << "free space stayed out of reach";
  size_t max_extents = 0;
  for (const auto& [index, rec] : Chunks(big.ino)) max_extents = std::max(max_extents, rec.replicas[0].extents.size());
  EXPECT_GT(max_extents, 1u) << "no chunk needed more than one extent";
  EXPECT_TRUE(SameBytes(Read(*bo, 0, m.bytes.size()), m.bytes));
  for (const auto& o : files) EXPECT_TRUE(SameBytes(Read(*o, 0, small.size()), small));
  // The records alone rebuild the same picture: every extent inside its drive, none overlapping.
  std::vector<std::unique_ptr<SegmentAllocator>> rebuilt;
  for (int i = 0; i < kDrives; ++i) rebuilt.push_back(NewBestFitAllocator(kCapacity, kBlock));
  ASSERT_TRUE(kv_->scan(meta::ChunkPrefixAll(), [&](std::string_view, std::string_view v) {
                   auto rec = meta::DecodeChunk(v);
                   EXPECT_TRUE(rec.ok());
                   for (const auto& r : rec->replicas) {
                     for (const auto& e : r.extents) EXPECT_TRUE(rebuilt[r.segment]->mark_used(e.offset, e.length).ok());
                   }
                   return true;
                 }).ok());
  ASSERT_TRUE(store_->sync().ok());
  for (int i = 0; i < kDrives; ++i) EXPECT_EQ(rebuilt[i]->free_bytes(), allocators_[i]->free_bytes()) << "drive " << i;
  files.clear();
  bo.reset();
  NewStore();
  auto again = Obj(big);
  ASSERT_NE(again, nullptr);
  EXPECT_TRUE(SameBytes(Read(*again, 0, m.bytes.size()), m.bytes));
}

TEST_F(ObjectStoreTest, TrimGivesSpaceBack) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  const uint64_t before = TotalFree();
  std::string d = Pattern(10000, 9);  // 3 blocks of a 1 MiB reservation
  ASSERT_TRUE(Write(*obj, 0, d).ok());
  const uint64_t after_write = TotalFree();
  EXPECT_EQ(before - after_write, kChunk) << "a first write reserves a whole chunk";
  auto ino = ns_->get(f.ino);
  ASSERT_TRUE(ino.ok());
  EXPECT_EQ(ino->allocated, kChunk);

  ASSERT_TRUE(store_->trim(*obj).ok());
  EXPECT_EQ(TotalFree(), after_write) << "trimmed space is reusable only after sync";
  EXPECT_EQ(store_->pending_free_bytes(), kChunk - 3 * kBlock);
  ASSERT_TRUE(store_->sync().ok());
  EXPECT_EQ(store_->pending_free_bytes(), 0u);
  EXPECT_EQ(TotalFree(), before - 3 * kBlock);
  auto chunks = Chunks(f.ino);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].capacity, 3 * kBlock);
  ino = ns_->get(f.ino);
  ASSERT_TRUE(ino.ok());
  EXPECT_EQ(ino->allocated, 3 * kBlock);
  EXPECT_EQ(Read(*obj, 0, d.size()), d);
  // Trimming again changes nothing.
  ASSERT_TRUE(store_->trim(*obj).ok());
  ASSERT_TRUE(store_->sync().ok());
  EXPECT_EQ(TotalFree(), before - 3 * kBlock);
}

TEST_F(ObjectStoreTest, ReclaimOfUnlinkedFileReturnsAllSpace) {
  const uint64_t before = TotalFree();
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  ASSERT_TRUE(Write(*obj, 0, Pattern(3 * kChunk + 5, 10)).ok());
  ASSERT_TRUE(Write(*obj, 10 * kChunk, Pattern(100, 11)).ok());
  ASSERT_TRUE(store_->trim(*obj).ok());
  EXPECT_LT(TotalFree(), before);
  obj.reset();

  auto u = ns_->unlink(meta::kRootIno, "f");
  ASSERT_TRUE(u.ok());
  ASSERT_EQ(u->nlink, 0u);
  ASSERT_TRUE(store_->reclaim(f.ino).ok());
  ASSERT_TRUE(store_->sync().ok());
  EXPECT_EQ(TotalFree(), before);
  EXPECT_TRUE(Chunks(f.ino).empty());
  EXPECT_EQ(ns_->get(f.ino).status().code(), Code::kNotFound);
  auto orphans = ns_->orphans();
  ASSERT_TRUE(orphans.ok());
  EXPECT_TRUE(orphans->empty());
}

// The last close and the unlink can both find an orphan: reclaiming it twice,
// one after the other or at once, frees its space exactly once.
TEST_F(ObjectStoreTest, ReclaimTwiceFreesSpaceOnce) {
  const uint64_t before = TotalFree();
  for (int concurrent = 0; concurrent < 2; ++concurrent) {
    const std::string name = "twice" + std::to_string(concurrent);
    InodeRecord f = NewFile(name);
    auto obj = Obj(f);
    ASSERT_NE(obj, nullptr);
    ASSERT_TRUE(Write(*obj, 0, Pattern(3 * kChunk + 5, 20 + concurrent)).ok());
    obj.reset();
    ASSERT_TRUE(ns_->unlink(meta::kRootIno, name).ok());
    if (concurrent) {
      Status a, b;
      std::thread t1([&] { a = store_->reclaim(f.ino); });
      std::thread t2([&] { b = store_->reclaim(f.ino); });
      t1.join();
      t2.join();
      ASSERT_TRUE(a.ok()) << a.message();
      ASSERT_TRUE(b.ok()) << b.message();
    } else {
      ASSERT_TRUE(store_->reclaim(f.ino).ok());
      ASSERT_TRUE(store_->reclaim(f.ino).ok());
    }
    ASSERT_TRUE(store_->sync().ok());
    EXPECT_EQ(TotalFree(), before) << (concurrent ? "concurrent" : "sequential");
  }
  // The space is whole: a write of everything that was used still fits and reads back.
  InodeRecord g = NewFile("after");
  auto obj = Obj(g);
  std::string d = Pattern(4 * kChunk, 30);
  ASSERT_TRUE(Write(*obj, 0, d).ok());
  EXPECT_EQ(Read(*obj, 0, d.size()), d);
}

// Writers and readers on one object and on their own objects at once. Every
// write sets whole 4 KiB blocks to one byte value, so a reader that ever sees
// two values inside one block saw a half-applied write. Each thread's own
// object must read back exactly what it wrote. (Also the ThreadSanitizer run's
// main subject: see the Makefile's sanitize target.)
// The same with the RAM tier on: whole-file reads fill the cache while
// writers invalidate it.
class ConcurrentWithCacheTest : public ObjectStoreTest {
 protected:
  void SetUp() override {
    ObjectStoreTest::SetUp();
    store_->set_cache(16 << 20, "s3fifo");
  }
};

TEST_F(ObjectStoreTest, ConcurrentReadersAndWritersSeeWholeBlocks) { RunConcurrentReadersAndWriters(); }
TEST_F(ConcurrentWithCacheTest, ConcurrentReadersAndWritersSeeWholeBlocks) {
  RunConcurrentReadersAndWriters();
  EXPECT_GT(store_->cache_stats().insertions, 0u) << "the readers filled the cache while writers emptied it";
}

void ObjectStoreTest::RunConcurrentReadersAndWriters() {
  constexpr uint64_t kShared = 2 * kChunk + 8 * kBlock;  // spans three chunks
  InodeRecord shared = NewFile("shared");
  auto obj = Obj(shared);
  ASSERT_NE(obj, nullptr);
  ASSERT_TRUE(Write(*obj, 0, std::string(kShared, 'a')).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0}, failed{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {  // overwrite runs of blocks of the shared object
    threads.emplace_back([&, w] {
      std::mt19937 rng(w);
      for (int i = 0; i < 150; ++i) {
        const uint64_t first = rng() % (kShared / kBlock), count = 1 + rng() % 24;
        const uint64_t len = std::min(count, kShared / kBlock - first) * kBlock;
        if (!Write(*obj, first * kBlock, std::string(len, static_cast<char>('b' + (i + w) % 20))).ok()) ++failed;
      }
    });
  }
  for (int r = 0; r < 2; ++r) {  // read ranges of the shared object, check every block is uniform
    threads.emplace_back([&, r] {
      std::mt19937 rng(100 + r);
      while (!stop.load()) {
        const bool whole = rng() % 8 == 0;  // whole chunks: what the RAM tier admits
        const uint64_t first = whole ? 0 : rng() % (kShared / kBlock), count = whole ? kShared / kBlock : 1 + rng() % 40;
        const uint64_t len = std::min(count, kShared / kBlock - first) * kBlock;
        std::string got(len, '\0');
        if (!store_->read(*obj, first * kBlock, len, got.data()).ok()) ++failed;
        for (uint64_t b = 0; b < len; b += kBlock) {
          if (got.find_first_not_of(got[b], b) < b + kBlock) ++torn;
        }
      }
    });
  }
  for (int t = 0; t < 2; ++t) {  // each its own object: write, then read back
    threads.emplace_back([&, t] {
      InodeRecord own = NewFile("own" + std::to_string(t));
      auto o = Obj(own);
      std::string model;
      std::mt19937 rng(200 + t);
      for (int i = 0; i < 60; ++i) {
        const uint64_t off = rng() % (3 * kChunk), len = 1 + rng() % (kChunk + 100);
        const std::string d = Pattern(len, rng());
        if (!Write(*o, off, d).ok()) ++failed;
        if (model.size() < off + len) model.resize(off + len, '\0');
        model.replace(off, len, d);
      }
      std::string got(model.size(), '\x55');
      if (!store_->read(*o, 0, model.size(), got.data()).ok() || got != model) ++failed;
    });
  }
  for (int i = 0; i < 2; ++i) threads[i].join();  // the writers of the shared object
  stop = true;
  for (size_t i = 2; i < threads.size(); ++i) threads[i].join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(torn.load(), 0) << "a reader saw a block with two values";
}

TEST_F(ObjectStoreTest, CorruptedByteFailsRead) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  std::string d = Pattern(3 * kBlock, 12);
  ASSERT_TRUE(Write(*obj, 0, d).ok());
  auto chunks = Chunks(f.ino);
  ASSERT_EQ(chunks.size(), 1u);
  ASSERT_EQ(chunks[0].replicas.size(), 1u);
  CorruptByte(chunks[0].replicas[0], kBlock + 17);  // inside block 1

  Status s;
  Read(*obj, 0, d.size(), &s);
  EXPECT_EQ(s.code(), Code::kCorruption) << s.message();
  Read(*obj, kBlock + 10, 20, &s);
  EXPECT_EQ(s.code(), Code::kCorruption) << s.message();
  // Blocks that were not touched still read.
  EXPECT_EQ(Read(*obj, 0, kBlock), d.substr(0, kBlock));
  EXPECT_EQ(Read(*obj, 2 * kBlock, kBlock), d.substr(2 * kBlock, kBlock));
  // A fresh store notices as well.
  NewStore();
  auto obj2 = Obj(f);
  ASSERT_NE(obj2, nullptr);
  Read(*obj2, 0, d.size(), &s);
  EXPECT_EQ(s.code(), Code::kCorruption) << s.message();
}

TEST_F(ObjectStoreTest, NewStoreInstanceReadsSameBytesWhateverTheStrategy) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  Model m;
  std::string d = Pattern(3 * kChunk + 4321, 13);
  ASSERT_TRUE(Write(*obj, 999, d).ok());
  m.write(999, d);
  auto records = Chunks(f.ino);
  obj.reset();

  // A new ObjectStore, and the inode presented with another strategy: the
  // chunk records, not the strategy, say where the data is.
  NewStore();
  auto inode = ns_->get(f.ino);
  ASSERT_TRUE(inode.ok());
  InodeRecord changed = inode.value();
  changed.strategy = "random";
  auto obj2 = Obj(changed);
  ASSERT_NE(obj2, nullptr);
  EXPECT_TRUE(SameBytes(Read(*obj2, 0, m.bytes.size()), m.bytes));
  // Overwriting existing chunks keeps them where they are.
  std::string o = Pattern(100, 14);
  ASSERT_TRUE(Write(*obj2, kChunk + 50, o).ok());
  m.write(kChunk + 50, o);
  EXPECT_TRUE(SameBytes(Read(*obj2, 0, m.bytes.size()), m.bytes));
  auto after = Chunks(f.ino);
  for (const auto& [i, rec] : records) EXPECT_EQ(after[i].replicas, rec.replicas) << "chunk " << i;
}

TEST_F(ObjectStoreTest, RandomStrategyFileReadsBack) {
  InodeRecord striped = NewFile("s");
  InodeRecord random = NewFile("r", "random");
  auto so = Obj(striped);
  auto ro = Obj(random);
  ASSERT_NE(so, nullptr);
  ASSERT_NE(ro, nullptr);
  Model ms, mr;
  std::string a = Pattern(2 * kChunk + 11, 15), b = Pattern(5 * kChunk + 3, 16);
  ASSERT_TRUE(Write(*so, 0, a).ok());
  ms.write(0, a);
  ASSERT_TRUE(Write(*ro, 7, b).ok());
  mr.write(7, b);
  std::string c = Pattern(5000, 17);
  ASSERT_TRUE(Write(*ro, 2 * kChunk - 2500, c).ok());
  mr.write(2 * kChunk - 2500, c);
  EXPECT_TRUE(SameBytes(Read(*so, 0, ms.bytes.size()), ms.bytes));
  EXPECT_TRUE(SameBytes(Read(*ro, 0, mr.bytes.size()), mr.bytes));
  NewStore();
  auto ro2 = Obj(random);
  ASSERT_NE(ro2, nullptr);
  EXPECT_TRUE(SameBytes(Read(*ro2, 0, mr.bytes.size()), mr.bytes));
}

TEST_F(ObjectStoreTest, FailedNewChunkWriteLeavesContentsAndSpace) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  Model m;
  std::string d = Pattern(2 * kChunk + 500, 18);
  ASSERT_TRUE(Write(*obj, 0, d).ok());
  m.write(0, d);
  const uint64_t free_before = TotalFree();
  const auto records_before = Chunks(f.ino);

  faulty_->FailNthWrite(1);
  Status s = Write(*obj, 5 * kChunk, Pattern(3000, 19));  // a new chunk
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(faulty_->failures(), 1);
  faulty_->FailNthWrite(0);
  EXPECT_EQ(TotalFree(), free_before) << "the failed write's reservation was not given back";
  EXPECT_EQ(Size(f.ino), m.bytes.size());
  EXPECT_EQ(Chunks(f.ino).size(), records_before.size());
  EXPECT_TRUE(SameBytes(Read(*obj, 0, m.bytes.size()), m.bytes));

  // Two new chunks, the second one failing.
  faulty_->FailNthWrite(2);
  s = Write(*obj, 6 * kChunk - 10, Pattern(100, 20));
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(faulty_->failures(), 1);
  faulty_->FailNthWrite(0);
  EXPECT_EQ(TotalFree(), free_before);
  EXPECT_EQ(Size(f.ino), m.bytes.size());
  EXPECT_TRUE(SameBytes(Read(*obj, 0, m.bytes.size()), m.bytes));

  // The store still works afterwards.
  std::string e = Pattern(4000, 21);
  ASSERT_TRUE(Write(*obj, 5 * kChunk, e).ok());
  m.write(5 * kChunk, e);
  EXPECT_TRUE(SameBytes(Read(*obj, 0, m.bytes.size()), m.bytes));
}

TEST_F(ObjectStoreTest, FailedOverwriteLeavesContentsAndSpace) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  Model m;
  std::string d = Pattern(kChunk / 2, 22);
  ASSERT_TRUE(Write(*obj, 0, d).ok());
  m.write(0, d);
  const uint64_t free_before = TotalFree();

  faulty_->FailNthWrite(1);
  Status s = Write(*obj, 5000, Pattern(100000, 23));  // overwrite inside one chunk, too large to be deferred
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(faulty_->failures(), 1);
  faulty_->FailNthWrite(0);
  EXPECT_EQ(TotalFree(), free_before);
  EXPECT_EQ(Size(f.ino), m.bytes.size());
  EXPECT_TRUE(SameBytes(Read(*obj, 0, m.bytes.size()), m.bytes));
  NewStore();
  auto obj2 = Obj(f);
  ASSERT_NE(obj2, nullptr);
  EXPECT_TRUE(SameBytes(Read(*obj2, 0, m.bytes.size()), m.bytes));
}

TEST_F(ObjectStoreTest, FailedGrowingWriteGivesExtensionBack) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  Model m;
  std::string d = Pattern(10000, 24);
  ASSERT_TRUE(Write(*obj, 0, d).ok());
  m.write(0, d);
  ASSERT_TRUE(store_->trim(*obj).ok());  // capacity down to 3 blocks
  ASSERT_TRUE(store_->sync().ok());
  const uint64_t free_before = TotalFree();

  faulty_->FailNthWrite(1);
  Status s = Write(*obj, 9000, Pattern(100000, 25));  // must grow the chunk
  EXPECT_FALSE(s.ok());
  faulty_->FailNthWrite(0);
  EXPECT_EQ(TotalFree(), free_before) << "the extension of the failed write was not given back";
  EXPECT_EQ(Size(f.ino), m.bytes.size());
  EXPECT_TRUE(SameBytes(Read(*obj, 0, m.bytes.size()), m.bytes));
  auto chunks = Chunks(f.ino);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].capacity, 3 * kBlock);
}

// An overwrite of two chunks where the second chunk's write fails: the first
// chunk's blocks now hold the new data. Per the write protocol their new
// checksums were recorded as pending before the data went out, so every block
// must read back as either the old or the new contents, never as a checksum error.
class PartialOverwriteTest : public ObjectStoreTest {
 protected:
  void SetUp() override {
    ObjectStoreTest::SetUp();
    if (HasFatalFailure()) return;
    file_ = NewFile("f");
    obj_ = Obj(file_);
    ASSERT_NE(obj_, nullptr);
    old_data_ = Pattern(2 * kChunk, 26);
    new_data_ = Pattern(2 * kChunk, 27);
    ASSERT_TRUE(Write(*obj_, 0, old_data_).ok());
    faulty_->FailNthWrite(2);  // chunk 0 is written, chunk 1 is not
    Status s = Write(*obj_, 0, new_data_);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(faulty_->failures(), 1);
    faulty_->FailNthWrite(0);
  }

  void ExpectOldOrNew(ObjectStore& store, ObjectStore::Object& o) {
    std::string got(old_data_.size(), '\0');
    Status rs = store.read(o, 0, got.size(), got.data());
    ASSERT_TRUE(rs.ok()) << rs.message();
    for (size_t b = 0; b < got.size() / kBlock; ++b) {
      std::string blk = got.substr(b * kBlock, kBlock);
      EXPECT_TRUE(blk == old_data_.substr(b * kBlock, kBlock) || blk == new_data_.substr(b * kBlock, kBlock))
          << "block " << b << " is neither old nor new";
    }
  }

  InodeRecord file_;
  std::shared_ptr<ObjectStore::Object> obj_;
  std::string old_data_, new_data_;
};

// A store that loads the chunk records afresh (as after a remount) sees the pending checksums.
TEST_F(PartialOverwriteTest, FreshStoreReadsOldOrNew) {
  ObjectStore fresh(kv_.get(), ns_.get(), faulty_.get(), slots_);
  auto fo = fresh.object(file_);
  ASSERT_TRUE(fo.ok());
  ExpectOldOrNew(fresh, *fo.value());
}

// The store that ran the failed write must agree with what it committed.
TEST_F(PartialOverwriteTest, SameStoreReadsOldOrNew) { ExpectOldOrNew(*store_, *obj_); }

TEST_F(ObjectStoreTest, TwoReplicasOnDistinctSegmentsSurviveOneCorruption) {
  InodeRecord f = NewFile("f", "striped", 2);
  EXPECT_EQ(f.replicas, 2u);
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  const uint64_t before = TotalFree();
  std::string d = Pattern(3 * kChunk + 1234, 28);
  ASSERT_TRUE(Write(*obj, 0, d).ok());
  EXPECT_EQ(before - TotalFree(), 2ull * 4 * kChunk) << "each of 4 chunks is reserved twice";
  auto chunks = Chunks(f.ino);
  ASSERT_EQ(chunks.size(), 4u);
  for (const auto& [i, rec] : chunks) {
    ASSERT_EQ(rec.replicas.size(), 2u) << "chunk " << i;
    EXPECT_NE(rec.replicas[0].segment, rec.replicas[1].segment) << "chunk " << i;
  }
  EXPECT_EQ(Read(*obj, 0, d.size()), d);

  // One replica of chunk 1 and the other replica of chunk 2 go bad.
  CorruptByte(chunks[1].replicas[0], 5000);
  CorruptByte(chunks[2].replicas[1], 0);
  CorruptByte(chunks[0].replicas[0], kChunk - 1);
  EXPECT_TRUE(SameBytes(Read(*obj, 0, d.size()), d));
  NewStore();
  auto obj2 = Obj(f);
  ASSERT_NE(obj2, nullptr);
  EXPECT_TRUE(SameBytes(Read(*obj2, 0, d.size()), d));

  // The reads rewrote the bad copies they met; with both copies of a block bad, the read fails.
  EXPECT_EQ(RawReplica(chunks[1].replicas[0], kChunk), RawReplica(chunks[1].replicas[1], kChunk));
  CorruptByte(chunks[1].replicas[0], 5001);
  CorruptByte(chunks[1].replicas[1], 5001);
  Status s;
  Read(*obj2, kChunk, 8192, &s);
  EXPECT_EQ(s.code(), Code::kCorruption) << s.message();
}

TEST_F(ObjectStoreTest, ReadRewritesTheReplicaThatFailedItsChecksum) {
  InodeRecord f = NewFile("f", "striped", 2);
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  std::string d = Pattern(kChunk, 41);
  ASSERT_TRUE(Write(*obj, 0, d).ok());
  const meta::ChunkRecord rec = Chunks(f.ino).at(0);
  const std::string good = RawReplica(rec.replicas[0], kChunk);
  CorruptByte(rec.replicas[0], 3 * kBlock + 7);  // the replica reads go to first
  ASSERT_NE(RawReplica(rec.replicas[0], kChunk), good);

  EXPECT_TRUE(SameBytes(Read(*obj, 0, d.size()), d));
  EXPECT_EQ(store_->repaired_blocks(), 1u) << "the read verifies 256 blocks and rewrites only the bad one";
  EXPECT_TRUE(SameBytes(RawReplica(rec.replicas[0], kChunk), good)) << "the bad copy was rewritten";
  EXPECT_TRUE(SameBytes(Read(*obj, 0, d.size()), d));
  EXPECT_EQ(store_->repaired_blocks(), 1u) << "nothing left to repair";
}

TEST_F(ObjectStoreTest, ScrubRepairsFromIntactReplicasAndReportsWhatItCannot) {
  InodeRecord two = NewFile("two", "striped", 2), one = NewFile("one", "striped", 1);
  auto obj2 = Obj(two), obj1 = Obj(one);
  ASSERT_TRUE(obj2 && obj1);
  std::string d2 = Pattern(3 * kChunk + 5000, 42), d1 = Pattern(2 * kChunk, 43);
  ASSERT_TRUE(Write(*obj2, 0, d2).ok());
  ASSERT_TRUE(Write(*obj1, 0, d1).ok());
  auto c2 = Chunks(two.ino), c1 = Chunks(one.ino);
  const std::string good_tail = RawReplica(c2[3].replicas[0], kBlock * 2);
  // Copies a read would never look at (the second replica), and the last, partial block.
  CorruptByte(c2[1].replicas[1], 100);
  CorruptByte(c2[1].replicas[1], kChunk - 1);
  CorruptByte(c2[3].replicas[1], kBlock + 10);
  CorruptByte(c1[1].replicas[0], 9);

  auto r2 = store_->scrub(*obj2);
  ASSERT_TRUE(r2.ok()) << r2.status().message();
  EXPECT_EQ(r2->chunks, 4u);
  EXPECT_EQ(r2->bytes, 2 * (3 * kChunk + 2 * kBlock)) << "every replica of every written block is read";
  EXPECT_EQ(r2->repaired_blocks, 3u);
  EXPECT_TRUE(r2->unrepairable.empty());
  EXPECT_EQ(RawReplica(c2[1].replicas[1], kChunk), RawReplica(c2[1].replicas[0], kChunk));
  EXPECT_EQ(RawReplica(c2[3].replicas[1], 2 * kBlock), good_tail);

  auto r1 = store_->scrub(*obj1);
  ASSERT_TRUE(r1.ok()) << r1.status().message();
  EXPECT_EQ(r1->repaired_blocks, 0u);
  ASSERT_EQ(r1->unrepairable.size(), 1u);
  EXPECT_NE(r1->unrepairable[0].find("chunk 1: 1 of 256 blocks have no intact replica"), std::string::npos)
      << r1->unrepairable[0];

  auto again = store_->scrub(*obj2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->repaired_blocks, 0u) << "a second scrub finds nothing to repair";
  EXPECT_TRUE(store_->sync().ok());
  NewStore();
  auto fresh = Obj(two);
  ASSERT_NE(fresh, nullptr);
  EXPECT_TRUE(SameBytes(Read(*fresh, 0, d2.size()), d2));
  EXPECT_EQ(store_->repaired_blocks(), 0u);
}

TEST_F(ObjectStoreTest, TwoReplicasOverwriteAndGrow) {
  InodeRecord f = NewFile("f", "random", 2);
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  Model m;
  uint32_t seed = 30;
  for (auto [off, len] : std::vector<std::pair<uint64_t, size_t>>{
           {0, 5000}, {4000, 3 * kChunk}, {100, 10}, {2 * kChunk + 7, 9000}}) {
    std::string d = Pattern(len, seed++);
    ASSERT_TRUE(Write(*obj, off, d).ok());
    m.write(off, d);
  }
  EXPECT_TRUE(SameBytes(Read(*obj, 0, m.bytes.size()), m.bytes));
  for (const auto& [i, rec] : Chunks(f.ino)) {
    ASSERT_EQ(rec.replicas.size(), 2u);
    EXPECT_NE(rec.replicas[0].segment, rec.replicas[1].segment) << "chunk " << i;
  }
}

TEST_F(ObjectStoreTest, FullPoolGivesNoSpaceAndStoresNothing) {
  InodeRecord f = NewFile("f");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  // 63 chunks per drive, 252 in all: fill all but 2.
  const uint64_t total_chunks = kDrives * (kCapacity / kChunk);
  std::string chunk = Pattern(kChunk, 40);
  for (uint64_t i = 0; i + 2 < total_chunks; ++i) {
    ASSERT_TRUE(Write(*obj, i * kChunk, chunk).ok()) << "chunk " << i;
  }
  const uint64_t size_before = Size(f.ino);
  const uint64_t free_before = TotalFree();
  EXPECT_EQ(free_before, 2 * kChunk);
  Status s = Write(*obj, size_before, Pattern(3 * kChunk, 41));
  EXPECT_EQ(s.code(), Code::kNoSpace) << s.message();
  EXPECT_EQ(TotalFree(), free_before);
  EXPECT_EQ(Size(f.ino), size_before);
  EXPECT_EQ(Chunks(f.ino).size(), total_chunks - 2);
  // What fits still goes in.
  ASSERT_TRUE(Write(*obj, size_before, Pattern(2 * kChunk, 42)).ok());
  EXPECT_EQ(TotalFree(), 0u);
}

}  // namespace
}  // namespace stripefs

namespace stripefs {
namespace {

TEST_F(ObjectStoreTest, RamCacheServesRepeatReadsAndChangesInvalidateIt) {
  store_->set_cache(16 << 20, "s3fifo");
  InodeRecord f = NewFile("cached");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  std::string d = Pattern(kChunk + 3000, 51);
  ASSERT_TRUE(Write(*obj, 0, d).ok());
  EXPECT_EQ(Read(*obj, 0, d.size()), d);  // misses, then both chunks go in
  EXPECT_EQ(store_->cache_stats().insertions, 2u);
  auto chunks = Chunks(f.ino);
  CorruptByte(chunks[0].replicas[0], 10);  // behind the store's back: only a drive read would see it
  EXPECT_EQ(Read(*obj, 0, d.size()), d) << "served from RAM";
  EXPECT_EQ(Read(*obj, 5, 100), d.substr(5, 100));
  EXPECT_GE(store_->cache_stats().hits, 3u);

  std::string patch = Pattern(5000, 52);
  ASSERT_TRUE(Write(*obj, 8, patch).ok());  // rewrites block 0 and 1 (and so the flipped byte)
  d.replace(8, patch.size(), patch);
  EXPECT_EQ(Read(*obj, 0, d.size()), d) << "a write drops the cached chunk";
  auto t = store_->truncate(*obj, kChunk + 100, 1);
  ASSERT_TRUE(t.ok());
  d.resize(kChunk + 100);
  EXPECT_EQ(Read(*obj, 0, kChunk + 3000).substr(0, d.size()), d);
  EXPECT_EQ(Read(*obj, kChunk + 100, 2900), std::string(2900, '\0')) << "a truncate drops the cut chunk";
  ASSERT_TRUE(store_->punch_hole(*obj, 0, kChunk).ok());
  EXPECT_EQ(Read(*obj, 0, 4096), std::string(4096, '\0')) << "a punched chunk is gone from RAM too";

  obj.reset();
  auto u = ns_->unlink(meta::kRootIno, "cached");
  ASSERT_TRUE(u.ok());
  ASSERT_TRUE(store_->reclaim(f.ino).ok());
  EXPECT_EQ(store_->cache_stats().bytes, 0u) << "reclaim drops every chunk of the object";
}

TEST_F(ObjectStoreTest, RamCacheOnRandomOperationsMatchesTheModel) {
  store_->set_cache(4 * kChunk, "lru");  // smaller than the file: evictions happen
  InodeRecord f = NewFile("model");
  auto obj = Obj(f);
  ASSERT_NE(obj, nullptr);
  Model m;
  std::mt19937_64 rng(77);
  for (int i = 0; i < 400; ++i) {
    const uint64_t off = rng() % (5 * kChunk);
    switch (rng() % 5) {
      case 0: {
        std::string data = Pattern(1 + rng() % (kChunk / 2), static_cast<uint32_t>(i));
        ASSERT_TRUE(Write(*obj, off, data).ok());
        m.write(off, data);
        break;
      }
      case 1:
        ASSERT_TRUE(store_->truncate(*obj, off, 1).ok());
        m.truncate(off);
        break;
      case 2:  // the whole file: every chunk goes into the cache, more than fit
        ASSERT_TRUE(SameBytes(Read(*obj, 0, m.bytes.size()), m.bytes)) << "op " << i;
        break;
      default: {
        const size_t len = std::min<size_t>(1 + rng() % (2 * kChunk), m.bytes.size() > off ? m.bytes.size() - off : 0);
        if (len == 0) break;
        ASSERT_TRUE(SameBytes(Read(*obj, off, len), m.bytes.substr(off, len))) << "op " << i;
      }
    }
  }
  ASSERT_TRUE(SameBytes(Read(*obj, 0, m.bytes.size()), m.bytes));
  const CacheStats s = store_->cache_stats();
  EXPECT_GT(s.hits, 0u);
  EXPECT_GT(s.evictions, 0u);
  EXPECT_LE(s.bytes, s.capacity);
}

}  // namespace
}  // namespace stripefs

namespace stripefs {
namespace {

// replace_many(): the write-back buffer's flush, many object puts in one commit.

std::vector<ObjectStore::Put> Puts(const std::vector<std::pair<ObjectStore::Object*, const std::string*>>& items) {
  std::vector<ObjectStore::Put> puts;
  for (const auto& [obj, data] : items) puts.push_back({obj, data->data(), data->size(), nullptr, {}});
  return puts;
}

TEST_F(ObjectStoreTest, ReplaceManyStoresEveryObjectWithWhatItReplacedFreed) {
  const uint64_t free_at_start = TotalFree();
  std::vector<std::shared_ptr<ObjectStore::Object>> objs;
  std::vector<std::string> contents;
  for (int i = 0; i < 12; ++i) {
    objs.push_back(Obj(NewFile("m" + std::to_string(i))));
    ASSERT_NE(objs.back(), nullptr);
    // Every third object had larger contents before: its old chunks must go.
    if (i % 3 == 0) {
      ASSERT_TRUE(Write(*objs.back(), 0, Pattern(3 * kChunk + 100, 60 + i)).ok());
    }
    // Sizes from 1 byte to more than two chunks, most of them unaligned.
    contents.push_back(Pattern(i == 5 ? 2 * kChunk + 4096 : 1 + i * 7919, 80 + i));
  }
  std::vector<std::pair<ObjectStore::Object*, const std::string*>> items;
  for (int i = 11; i >= 0; --i) items.emplace_back(objs[i].get(), &contents[i]);  // out of inode order
  auto puts = Puts(items);
  store_->replace_many(puts);
  for (const auto& p : puts) EXPECT_TRUE(p.status.ok()) << p.obj->ino << ": " << p.status.message();

  uint64_t footprint = 0;
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(Size(objs[i]->ino), contents[i].size());
    EXPECT_TRUE(SameBytes(Read(*objs[i], 0, contents[i].size()), contents[i])) << i;
    EXPECT_EQ(Chunks(objs[i]->ino).size(), (contents[i].size() + kChunk - 1) / kChunk) << i;
    footprint += (contents[i].size() + kBlock - 1) / kBlock * kBlock;  // a put reserves just what it needs
  }
  ASSERT_TRUE(store_->sync().ok());
  EXPECT_EQ(TotalFree(), free_at_start - footprint) << "the replaced chunks' space came back";

  // A new store instance reads the same bytes from the committed records.
  std::vector<uint64_t> inos;
  for (const auto& o : objs) inos.push_back(o->ino);
  objs.clear();
  NewStore();
  for (int i = 0; i < 12; ++i) {
    auto r = ns_->get(inos[i]);
    ASSERT_TRUE(r.ok());
    auto obj = Obj(r.value());
    EXPECT_TRUE(SameBytes(Read(*obj, 0, contents[i].size()), contents[i])) << i;
  }
}

TEST_F(ObjectStoreTest, ReplaceManyFailsARemovedObjectAloneAndLeavesNothingOfIt) {
  auto a = Obj(NewFile("a"));
  InodeRecord gone_inode = NewFile("gone");
  auto gone = Obj(gone_inode);
  auto b = Obj(NewFile("b"));
  ASSERT_TRUE(a && gone && b);
  // Removed after its put was buffered: unlinked and reclaimed.
  ASSERT_TRUE(ns_->unlink(meta::kRootIno, "gone").ok());
  ASSERT_TRUE(store_->reclaim(gone_inode.ino).ok());
  const uint64_t free_before = TotalFree();

  const std::string da = Pattern(5000, 90), dg = Pattern(6000, 91), db = Pattern(7000, 92);
  auto puts = Puts({{a.get(), &da}, {gone.get(), &dg}, {b.get(), &db}});
  store_->replace_many(puts);
  for (const auto& p : puts) {
    if (p.obj == gone.get()) {
      EXPECT_EQ(p.status.code(), Code::kNotFound) << p.status.message();
    } else {
      EXPECT_TRUE(p.status.ok()) << p.status.message();
    }
  }
  EXPECT_TRUE(Chunks(gone_inode.ino).empty()) << "no chunk record of the removed object";
  EXPECT_EQ(ns_->get(gone_inode.ino).status().code(), Code::kNotFound);
  EXPECT_TRUE(SameBytes(Read(*a, 0, da.size()), da));
  EXPECT_TRUE(SameBytes(Read(*b, 0, db.size()), db));
  ASSERT_TRUE(store_->sync().ok());
  EXPECT_EQ(TotalFree(), free_before - 8192 - 8192) << "only a's and b's blocks stay taken";
}

TEST_F(ObjectStoreTest, ReplaceManyOnANearlyFullPoolStoresWhatFitsAndGivesTheRestBack) {
  auto filler = Obj(NewFile("filler"));
  ASSERT_NE(filler, nullptr);
  const uint64_t total_chunks = kDrives * (kCapacity / kChunk);
  const std::string chunk = Pattern(kChunk, 93);
  for (uint64_t i = 0; i + 2 < total_chunks; ++i) ASSERT_TRUE(Write(*filler, i * kChunk, chunk).ok());
  ASSERT_EQ(TotalFree(), 2 * kChunk);

  std::vector<std::shared_ptr<ObjectStore::Object>> objs;
  for (int i = 0; i < 3; ++i) objs.push_back(Obj(NewFile("p" + std::to_string(i))));
  auto puts = Puts({{objs[0].get(), &chunk}, {objs[1].get(), &chunk}, {objs[2].get(), &chunk}});
  store_->replace_many(puts);
  int stored = 0, no_space = 0;
  for (const auto& p : puts) {
    if (p.status.ok()) {
      ++stored;
      EXPECT_TRUE(SameBytes(Read(*p.obj, 0, chunk.size()), chunk));
    } else {
      EXPECT_EQ(p.status.code(), Code::kNoSpace) << p.status.message();
      ++no_space;
      EXPECT_EQ(Size(p.obj->ino), 0u);
      EXPECT_TRUE(Chunks(p.obj->ino).empty());
    }
  }
  EXPECT_EQ(stored, 2);
  EXPECT_EQ(no_space, 1);
  EXPECT_EQ(TotalFree(), 0u);
}

TEST_F(ObjectStoreTest, ReplaceManyWithAFailedDriveWriteStoresNoneAndKeepsTheOldContents) {
  std::vector<std::shared_ptr<ObjectStore::Object>> objs;
  std::vector<std::string> old_contents;
  for (int i = 0; i < 4; ++i) {
    objs.push_back(Obj(NewFile("w" + std::to_string(i))));
    old_contents.push_back(Pattern(10000 + i, 100 + i));
    ASSERT_TRUE(Write(*objs[i], 0, old_contents[i]).ok());
  }
  ASSERT_TRUE(store_->sync().ok());
  const uint64_t free_before = TotalFree();
  const std::string fresh = Pattern(20000, 110);
  auto puts = Puts({{objs[0].get(), &fresh}, {objs[1].get(), &fresh}, {objs[2].get(), &fresh}, {objs[3].get(), &fresh}});
  faulty_->FailNthWrite(3);
  store_->replace_many(puts);
  faulty_->FailNthWrite(0);
  for (const auto& p : puts) EXPECT_FALSE(p.status.ok());
  ASSERT_TRUE(store_->sync().ok());
  EXPECT_EQ(TotalFree(), free_before) << "every reservation was given back";
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(Size(objs[i]->ino), old_contents[i].size());
    EXPECT_TRUE(SameBytes(Read(*objs[i], 0, old_contents[i].size()), old_contents[i])) << i;
  }
}

}  // namespace
}  // namespace stripefs
