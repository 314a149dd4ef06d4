// SPDX-License-Identifier: Apache-2.0
// Metadata schema: record encodings and key layout.
#include "meta/schema.h"
#include "meta/chunk_table.h"

#include "meta/kv_store.h"

#include <gtest/gtest.h>
#include <tuple>
#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <vector>

namespace stripefs::meta {
namespace {

InodeRecord SampleInode() {
  InodeRecord r;
  r.ino = 0x0123456789abcdefull;
  r.mode = S_IFREG | 0640;
  r.uid = 1000;
  r.gid = 2000;
  r.nlink = 3;
  r.size = (5ull << 30) + 17;
  r.rdev = 0x0803;
  r.atime_ns = -5;  // before the epoch
  r.mtime_ns = 1700000000123456789;
  r.ctime_ns = 1700000000987654321;
  r.parent = 42;
  r.uri = "stripefs://1b4e28ba-2fa1-11d2-883f-0016d3cca427/0123456789abcdef";
  r.chunk_size = 4u << 20;
  r.strategy = "striped";
  r.replicas = 2;
  r.symlink = std::string("target\0with nul", 15);
  r.allocated = 12345678;
  return r;
}

void ExpectSameInode(const InodeRecord& a, const InodeRecord& b) {
  EXPECT_EQ(a.ino, b.ino);
  EXPECT_EQ(a.mode, b.mode);
  EXPECT_EQ(a.uid, b.uid);
  EXPECT_EQ(a.gid, b.gid);
  EXPECT_EQ(a.nlink, b.nlink);
  EXPECT_EQ(a.size, b.size);
  EXPECT_EQ(a.rdev, b.rdev);
  EXPECT_EQ(a.atime_ns, b.atime_ns);
  EXPECT_EQ(a.mtime_ns, b.mtime_ns);
  EXPECT_EQ(a.ctime_ns, b.ctime_ns);
  EXPECT_EQ(a.parent, b.parent);
  EXPECT_EQ(a.uri, b.uri);
  EXPECT_EQ(a.chunk_size, b.chunk_size);
  EXPECT_EQ(a.strategy, b.strategy);
  EXPECT_EQ(a.replicas, b.replicas);
  EXPECT_EQ(a.symlink, b.symlink);
  EXPECT_EQ(a.allocated, b.allocated);
}

ChunkRecord SampleChunk() {
  ChunkRecord c;
  c.length = 3 * kBlockSize + 100;  // 4 blocks
  c.capacity = 1u << 20;
  c.replicas = {{2, {{7 * 4096ull, 4096}, {16 * 4096ull, (1u << 20) - 4096}}}, {0, {{(1ull << 36) + 4096, 1u << 20}}}};
  c.crcs = {0xdeadbeef, 0, 0xffffffff, 0x12345678};
  c.pending = {{1, 0xcafef00d}, {3, 0x0badc0de}};
  return c;
}

// Both halves of a chunk record through their encoders and decoders.
Result<ChunkRecord> RoundTripChunk(const ChunkRecord& c) {
  auto d = DecodeChunk(EncodeChunk(c));
  if (!d.ok()) return d.status();
  ChunkRecord r = std::move(d).value();
  SFS_RETURN_IF_ERROR(DecodeChecksums(EncodeChecksums(c), &r));
  return r;
}

void ExpectSameChunk(const ChunkRecord& a, const ChunkRecord& b) {
  EXPECT_EQ(a.length, b.length);
  EXPECT_EQ(a.capacity, b.capacity);
  EXPECT_EQ(a.replicas, b.replicas);
  EXPECT_EQ(a.crcs, b.crcs);
  EXPECT_EQ(a.pending, b.pending);
}

// Every strict prefix of an encoding must be refused as corruption.
template <typename Decode>
void ExpectTruncationsRejected(const std::string& bytes, Decode decode) {
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = decode(std::string_view(bytes.data(), n));
    ASSERT_FALSE(r.ok()) << "a prefix of " << n << " of " << bytes.size() << " bytes decoded";
    EXPECT_EQ(r.status().code(), Code::kCorruption) << "prefix of " << n << " bytes";
  }
}

template <typename Decode>
void ExpectWrongVersionRejected(std::string bytes, Decode decode, std::vector<int> wrong = {0, 2, 0x7f, 0xff}) {
  ASSERT_FALSE(bytes.empty());
  for (int v : wrong) {
    bytes[0] = static_cast<char>(v);
    auto r = decode(bytes);
    ASSERT_FALSE(r.ok()) << "version byte " << v << " accepted";
    EXPECT_EQ(r.status().code(), Code::kCorruption);
  }
}

template <typename Decode>
void ExpectTrailingBytesRejected(const std::string& bytes, Decode decode) {
  auto r = decode(bytes + "x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCorruption);
}

TEST(SchemaTest, InodeRoundTrip) {
  InodeRecord r = SampleInode();
  auto d = DecodeInode(EncodeInode(r));
  ASSERT_TRUE(d.ok()) << d.status().message();
  ExpectSameInode(d.value(), r);

  InodeRecord empty;  // default-valued, empty strings
  auto e = DecodeInode(EncodeInode(empty));
  ASSERT_TRUE(e.ok()) << e.status().message();
  ExpectSameInode(e.value(), empty);
}

TEST(SchemaTest, InodeDecodeRejectsBadInput) {
  std::string bytes = EncodeInode(SampleInode());
  EXPECT_EQ(static_cast<uint8_t>(bytes[0]), 1u) << "records start with the version byte";
  ExpectTruncationsRejected(bytes, [](std::string_view b) { return DecodeInode(b); });
  ExpectWrongVersionRejected(bytes, [](std::string_view b) { return DecodeInode(b); });
  ExpectTrailingBytesRejected(bytes, [](std::string_view b) { return DecodeInode(b); });
}

TEST(SchemaTest, DirEntryRoundTripAndRejects) {
  DirEntry e{0xfedcba9876543210ull, S_IFDIR};
  std::string bytes = EncodeDirEntry(e);
  auto d = DecodeDirEntry(bytes);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->ino, e.ino);
  EXPECT_EQ(d->type, e.type);
  ExpectTruncationsRejected(bytes, [](std::string_view b) { return DecodeDirEntry(b); });
  ExpectWrongVersionRejected(bytes, [](std::string_view b) { return DecodeDirEntry(b); });
  ExpectTrailingBytesRejected(bytes, [](std::string_view b) { return DecodeDirEntry(b); });
}

TEST(SchemaTest, ChunkRoundTrip) {
  ChunkRecord c = SampleChunk();
  auto d = RoundTripChunk(c);
  ASSERT_TRUE(d.ok()) << d.status().message();
  ExpectSameChunk(d.value(), c);
  EXPECT_EQ(d->blocks(), 4u);

  // One replica, no pending, a block-aligned length.
  ChunkRecord one;
  one.length = 2 * kBlockSize;
  one.capacity = 2 * kBlockSize;
  one.replicas = {{3, {{0, 2 * kBlockSize}}}};
  one.crcs = {1, 2};
  auto d1 = RoundTripChunk(one);
  ASSERT_TRUE(d1.ok()) << d1.status().message();
  ExpectSameChunk(d1.value(), one);

  // Three replicas.
  ChunkRecord three = one;
  three.replicas = {{0, {{4096, 2 * kBlockSize}}}, {1, {{16384, 2 * kBlockSize}}}, {2, {{32768, kBlockSize}, {8192, kBlockSize}}}};
  auto d3 = RoundTripChunk(three);
  ASSERT_TRUE(d3.ok()) << d3.status().message();
  ExpectSameChunk(d3.value(), three);

  // Empty chunk.
  ChunkRecord empty;
  auto d0 = RoundTripChunk(empty);
  ASSERT_TRUE(d0.ok()) << d0.status().message();
  ExpectSameChunk(d0.value(), empty);
}

TEST(SchemaTest, ChunkDecodeRejectsBadInput) {
  std::string bytes = EncodeChunk(SampleChunk());
  ExpectTruncationsRejected(bytes, [](std::string_view b) { return DecodeChunk(b); });
  ExpectWrongVersionRejected(bytes, [](std::string_view b) { return DecodeChunk(b); }, {0, 3, 0x7f, 0xff});
  ExpectTrailingBytesRejected(bytes, [](std::string_view b) { return DecodeChunk(b); });
  // Extents that do not add up to the reserved bytes.
  ChunkRecord short_replica = SampleChunk();
  short_replica.replicas[1].extents[0].length -= 4096;
  auto d = DecodeChunk(EncodeChunk(short_replica));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kCorruption);
  // The checksum half, decoded into a record whose length says 4 blocks.
  std::string sums = EncodeChecksums(SampleChunk());
  auto decode_sums = [](std::string_view b) -> Result<ChunkRecord> {
    ChunkRecord r = SampleChunk();
    SFS_RETURN_IF_ERROR(DecodeChecksums(b, &r));
    return r;
  };
  ExpectTruncationsRejected(sums, decode_sums);
  ExpectWrongVersionRejected(sums, decode_sums);
  ExpectTrailingBytesRejected(sums, decode_sums);
}

// The placement half as 0.1.0 wrote it (version 1): length, capacity, and
// each replica's segment and offset; its bytes lie in one extent of capacity.
TEST(SchemaTest, ChunkVersion1DecodesAsOneExtentPerReplica) {
  std::string v1(1, '\x01');
  auto put32 = [&](uint32_t x) { v1.append(reinterpret_cast<const char*>(&x), 4); };
  auto put64 = [&](uint64_t x) { v1.append(reinterpret_cast<const char*>(&x), 8); };
  put32(5000);      // length
  put32(8192);      // capacity
  put32(2);         // replicas
  put32(1);
  put64(1u << 20);  // segment 1 at 1 MiB
  put32(3);
  put64(40960);     // segment 3 at 40 KiB
  auto d = DecodeChunk(v1);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->length, 5000u);
  EXPECT_EQ(d->capacity, 8192u);
  ASSERT_EQ(d->replicas.size(), 2u);
  EXPECT_EQ(d->replicas[0], (Replica{1, {{1u << 20, 8192}}}));
  EXPECT_EQ(d->replicas[1], (Replica{3, {{40960, 8192}}}));
  // Stored again, it is written in today's version and reads back the same.
  std::string v2 = EncodeChunk(d.value());
  EXPECT_EQ(static_cast<uint8_t>(v2[0]), 2u);
  auto again = DecodeChunk(v2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->replicas, d->replicas);
  ExpectTruncationsRejected(v1, [](std::string_view b) { return DecodeChunk(b); });
  ExpectTrailingBytesRejected(v1, [](std::string_view b) { return DecodeChunk(b); });
}

TEST(SchemaTest, ReplicaMapsCutsAndAppends) {
  Replica r{0, {{100 * 4096, 2 * 4096}, {10 * 4096, 4096}, {50 * 4096, 3 * 4096}}};
  EXPECT_EQ(r.bytes(), 6u * 4096);
  std::vector<std::tuple<uint64_t, uint64_t, uint64_t>> pieces;
  r.map(4096, 4 * 4096, [&](uint64_t at, uint64_t from, uint64_t n) { pieces.emplace_back(at, from, n); });
  EXPECT_EQ(pieces, (std::vector<std::tuple<uint64_t, uint64_t, uint64_t>>{
                        {101 * 4096, 0, 4096}, {10 * 4096, 4096, 4096}, {50 * 4096, 2 * 4096, 2 * 4096}}));
  Replica cut = r;
  std::vector<Extent> rest;
  cut.cut(4 * 4096, &rest);  // inside the third extent
  EXPECT_EQ(cut.extents, (std::vector<Extent>{{100 * 4096, 2 * 4096}, {10 * 4096, 4096}, {50 * 4096, 4096}}));
  EXPECT_EQ(rest, (std::vector<Extent>{{51 * 4096, 2 * 4096}}));
  rest.clear();
  cut.cut(2 * 4096, &rest);  // at an extent's end
  EXPECT_EQ(cut.extents, (std::vector<Extent>{{100 * 4096, 2 * 4096}}));
  EXPECT_EQ(rest, (std::vector<Extent>{{10 * 4096, 4096}, {50 * 4096, 4096}}));
  cut.append({102 * 4096, 4096});  // right after the last: it grows
  cut.append({7 * 4096, 4096});    // elsewhere: a new extent
  EXPECT_EQ(cut.extents, (std::vector<Extent>{{100 * 4096, 3 * 4096}, {7 * 4096, 4096}}));
}

TEST(SchemaTest, ChunkDecodeRejectsCrcCountDisagreeingWithLength) {
  ChunkRecord c = SampleChunk();
  c.crcs.pop_back();  // 3 crcs for 4 blocks
  auto d = RoundTripChunk(c);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kCorruption);
}

// Checksum pages: a chunk's checksums stored in pages of kChecksumPageBlocks
// blocks; a store writes only the pages that change.
class ChecksumPagesTest : public testing::Test {
 protected:
  static constexpr uint64_t kIno = 9, kIndex = 3;

  static ChunkRecord Chunk(uint32_t blocks) {
    ChunkRecord c;
    c.length = blocks * kBlockSize;
    c.capacity = 4u << 20;
    c.replicas = {{1, {{8192, 4u << 20}}}};
    for (uint32_t b = 0; b < blocks; ++b) c.crcs.push_back(0x1000 + b);
    return c;
  }

  // The chunk as the store holds it: placement half plus every record under its ChecksumKey.
  Result<ChunkRecord> Load() {
    std::string placement;
    SFS_RETURN_IF_ERROR(kv_->get(ChunkKey(kIno, kIndex), &placement));
    SFS_ASSIGN_OR_RETURN(ChunkRecord rec, DecodeChunk(placement));
    ChecksumLoader loader;
    Status bad;
    SFS_RETURN_IF_ERROR(kv_->scan(ChecksumKey(kIno, kIndex), [&](std::string_view k, std::string_view v) {
      bad = loader.add(k, v, &rec);
      return bad.ok();
    }));
    SFS_RETURN_IF_ERROR(bad);
    if (!loader.complete(kIndex, rec)) return Status::Corruption("incomplete");
    return rec;
  }

  std::vector<std::string> ChecksumKeys() {
    std::vector<std::string> keys;
    EXPECT_TRUE(kv_->scan(ChecksumKey(kIno, kIndex), [&](std::string_view k, std::string_view) {
                      keys.emplace_back(k);
                      return true;
                    }).ok());
    return keys;
  }

  void Commit(const Transaction& txn) { ASSERT_TRUE(kv_->commit(txn, false).ok()); }

  std::unique_ptr<KvStore> kv_ = NewMemKvStore();
};

TEST_F(ChecksumPagesTest, AChunkIsStoredInPagesAndLoadsBack) {
  ChunkRecord c = Chunk(200);  // pages of 64, 64, 64 and 8 blocks
  c.pending = {{70, 0xabc}, {199, 0xdef}};
  Transaction txn;
  PutChunk(&txn, kIno, kIndex, ChunkRecord{}, c);
  Commit(txn);
  EXPECT_EQ(ChecksumKeys(), (std::vector<std::string>{ChecksumPageKey(kIno, kIndex, 0), ChecksumPageKey(kIno, kIndex, 1),
                                                      ChecksumPageKey(kIno, kIndex, 2), ChecksumPageKey(kIno, kIndex, 3)}));
  auto back = Load();
  ASSERT_TRUE(back.ok()) << back.status().message();
  ExpectSameChunk(back.value(), c);
  EXPECT_FALSE(back->whole_checksum_record);
}

TEST_F(ChecksumPagesTest, AnOverwriteStoresOnlyThePageItTouches) {
  ChunkRecord stored = Chunk(1024);  // a whole 4 MiB chunk
  Transaction first;
  PutChunk(&first, kIno, kIndex, ChunkRecord{}, stored);
  Commit(first);
  // The intent of a one-block overwrite: one page, a few hundred bytes.
  ChunkRecord intent = stored;
  intent.pending.emplace_back(700, 0x5555);
  Transaction txn;
  PutChecksums(&txn, kIno, kIndex, stored, intent);
  ASSERT_EQ(txn.ops().size(), 1u);
  EXPECT_EQ(txn.ops()[0].key, ChecksumPageKey(kIno, kIndex, 700 / kChecksumPageBlocks));
  EXPECT_LT(txn.ops()[0].value.size(), 300u);
  Commit(txn);
  // The record after the write: the placement half and that page again.
  ChunkRecord after = stored;
  after.crcs[700] = 0x5555;
  Transaction done;
  PutChunk(&done, kIno, kIndex, intent, after);
  ASSERT_EQ(done.ops().size(), 2u);
  EXPECT_EQ(done.ops()[0].key, ChunkKey(kIno, kIndex));
  EXPECT_EQ(done.ops()[1].key, ChecksumPageKey(kIno, kIndex, 700 / kChecksumPageBlocks));
  Commit(done);
  auto back = Load();
  ASSERT_TRUE(back.ok()) << back.status().message();
  ExpectSameChunk(back.value(), after);
  // Nothing changed, nothing but the placement half written.
  Transaction same;
  PutChunk(&same, kIno, kIndex, after, after);
  EXPECT_EQ(same.ops().size(), 1u);
}

TEST_F(ChecksumPagesTest, AShorterChunkDropsItsLastPages) {
  ChunkRecord stored = Chunk(200);
  Transaction first;
  PutChunk(&first, kIno, kIndex, ChunkRecord{}, stored);
  Commit(first);
  ChunkRecord cut = Chunk(10);
  Transaction txn;
  PutChunk(&txn, kIno, kIndex, stored, cut);
  Commit(txn);
  EXPECT_EQ(ChecksumKeys(), std::vector<std::string>{ChecksumPageKey(kIno, kIndex, 0)});
  auto back = Load();
  ASSERT_TRUE(back.ok()) << back.status().message();
  ExpectSameChunk(back.value(), cut);
  Transaction gone;
  DeleteChunk(&gone, kIno, kIndex, cut);
  Commit(gone);
  EXPECT_TRUE(ChecksumKeys().empty());
  std::string ignored;
  EXPECT_EQ(kv_->get(ChunkKey(kIno, kIndex), &ignored).code(), Code::kNotFound);
}

TEST_F(ChecksumPagesTest, AWholeChunkRecordIsReadAndReplacedByPagesWhenStored) {
  // As pools written before pages hold it: one record for the whole chunk.
  ChunkRecord old = Chunk(100);
  old.pending = {{5, 0x77}};
  Transaction legacy;
  legacy.put(ChunkKey(kIno, kIndex), EncodeChunk(old));
  legacy.put(ChecksumKey(kIno, kIndex), EncodeChecksums(old));
  Commit(legacy);
  auto loaded = Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ExpectSameChunk(loaded.value(), old);
  ASSERT_TRUE(loaded->whole_checksum_record);
  ChunkRecord after = loaded.value();
  after.crcs[99] = 0x99;
  Transaction txn;
  PutChunk(&txn, kIno, kIndex, loaded.value(), after);
  Commit(txn);
  EXPECT_EQ(ChecksumKeys(), (std::vector<std::string>{ChecksumPageKey(kIno, kIndex, 0), ChecksumPageKey(kIno, kIndex, 1)}));
  auto back = Load();
  ASSERT_TRUE(back.ok()) << back.status().message();
  ExpectSameChunk(back.value(), after);
  EXPECT_FALSE(back->whole_checksum_record);
  // A whole-chunk record is deleted as it is, too.
  Commit(legacy);
  Transaction gone;
  DeleteChunk(&gone, kIno, kIndex, loaded.value());
  gone.del(ChecksumPageKey(kIno, kIndex, 0));
  gone.del(ChecksumPageKey(kIno, kIndex, 1));
  Commit(gone);
  EXPECT_TRUE(ChecksumKeys().empty());
}

TEST_F(ChecksumPagesTest, MissingStrayOrDamagedPagesAreCorruption) {
  ChunkRecord c = Chunk(130);  // 3 pages
  Transaction txn;
  PutChunk(&txn, kIno, kIndex, ChunkRecord{}, c);
  Commit(txn);
  ASSERT_TRUE(Load().ok());
  auto expect_corrupt = [&](const char* what) {
    auto r = Load();
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.status().code(), Code::kCorruption) << what;
  };
  Transaction missing;
  missing.del(ChecksumPageKey(kIno, kIndex, 1));
  Commit(missing);
  expect_corrupt("a missing page");
  Transaction back;
  back.put(ChecksumPageKey(kIno, kIndex, 1), EncodeChecksumPage(c, 1));
  back.put(ChecksumPageKey(kIno, kIndex, 3), EncodeChecksumPage(c, 2));
  Commit(back);
  expect_corrupt("a page past the chunk's length");
  Transaction stray;
  stray.del(ChecksumPageKey(kIno, kIndex, 3));
  stray.put(ChecksumKey(kIno, kIndex), EncodeChecksums(c));
  Commit(stray);
  expect_corrupt("a whole-chunk record beside pages");
  Transaction damaged;
  damaged.del(ChecksumKey(kIno, kIndex));
  damaged.put(ChecksumPageKey(kIno, kIndex, 2), EncodeChecksumPage(c, 1));  // 64 crcs where 2 belong
  Commit(damaged);
  expect_corrupt("a page of the wrong length");
}

TEST(SchemaTest, BlockMatchesAcceptsCommittedOrPendingCrc) {
  ChunkRecord c = SampleChunk();
  EXPECT_TRUE(c.block_matches(0, 0xdeadbeef));
  EXPECT_TRUE(c.block_matches(1, 0));           // committed
  EXPECT_TRUE(c.block_matches(1, 0xcafef00d));  // pending
  EXPECT_FALSE(c.block_matches(0, 0xcafef00d)); // pending of another block
  EXPECT_FALSE(c.block_matches(2, 0x12345678));
  EXPECT_FALSE(c.block_matches(9, 0));          // past the crcs
}

TEST(SchemaTest, ConfigRoundTrip) {
  PoolConfig c;
  c.uuid = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";
  c.chunk_size = 1u << 20;
  c.strategy = "random";
  c.replicas = 2;
  c.segments = {{0, "drive", "/dev/nvme0n1", 1ull << 40}, {1, "drive", "/tmp/d1", 64ull << 20},
                {2, "ram", "ram", 1ull << 30}};
  auto d = DecodeConfig(EncodeConfig(c));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->format_version, kFormatVersion);
  EXPECT_EQ(d->uuid, c.uuid);
  EXPECT_EQ(d->chunk_size, c.chunk_size);
  EXPECT_EQ(d->strategy, c.strategy);
  EXPECT_EQ(d->replicas, c.replicas);
  ASSERT_EQ(d->segments.size(), c.segments.size());
  for (size_t i = 0; i < c.segments.size(); ++i) {
    EXPECT_EQ(d->segments[i].id, c.segments[i].id);
    EXPECT_EQ(d->segments[i].kind, c.segments[i].kind);
    EXPECT_EQ(d->segments[i].path, c.segments[i].path);
    EXPECT_EQ(d->segments[i].capacity, c.segments[i].capacity);
  }
}

TEST(SchemaTest, ConfigDecodeRejectsBadInput) {
  PoolConfig c;
  c.uuid = "u";
  c.segments = {{0, "drive", "/tmp/d0", 4096}};
  std::string bytes = EncodeConfig(c);
  ExpectTruncationsRejected(bytes, [](std::string_view b) { return DecodeConfig(b); });
  PoolConfig future = c;
  future.format_version = kFormatVersion + 1;
  auto d = DecodeConfig(EncodeConfig(future));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kCorruption);
  auto missing = DecodeConfig(R"({"format_version":1,"uuid":"u"})");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kCorruption);
}

TEST(SchemaTest, U64ValueRoundTripAndRejects) {
  for (uint64_t v : {0ull, 1ull, 0xffffffffffffffffull, 0x0102030405060708ull}) {
    auto d = DecodeU64Value(EncodeU64(v));
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d.value(), v);
  }
  std::string bytes = EncodeU64(77);
  ExpectTruncationsRejected(bytes, [](std::string_view b) { return DecodeU64Value(b); });
  ExpectWrongVersionRejected(bytes, [](std::string_view b) { return DecodeU64Value(b); });
}

TEST(SchemaKeyTest, ChunkKeysSortNumerically) {
  const uint64_t ino = 77;
  EXPECT_LT(ChunkKey(ino, 2), ChunkKey(ino, 10));
  EXPECT_LT(ChunkKey(ino, 255), ChunkKey(ino, 256));
  EXPECT_LT(ChunkKey(ino, 0xffffffffull), ChunkKey(ino, 0x100000000ull));
  std::vector<uint64_t> idx = {0, 1, 2, 9, 10, 11, 100, 255, 256, 65535, 65536, 1ull << 40};
  std::vector<std::string> keys;
  for (uint64_t i : idx) keys.push_back(ChunkKey(ino, i));
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
}

TEST(SchemaKeyTest, ChunkKeysSortUnderTheirPrefix) {
  const uint64_t ino = 0x1ff;
  const std::string prefix = ChunkPrefix(ino);
  for (uint64_t i : {0ull, 1ull, 2ull, 10ull, 1ull << 32, ~0ull}) {
    std::string k = ChunkKey(ino, i);
    EXPECT_TRUE(k.starts_with(prefix)) << "chunk " << i;
    EXPECT_TRUE(k.starts_with(ChunkPrefixAll()));
    EXPECT_EQ(InoFromKey(k), ino);
    EXPECT_EQ(ChunkIndexFromKey(k), i);
    // Neighbouring inodes' chunks do not fall under this prefix.
    EXPECT_FALSE(ChunkKey(ino + 1, i).starts_with(prefix));
    EXPECT_FALSE(ChunkKey(ino - 1, i).starts_with(prefix));
    // Inode ino's chunks sort between its neighbours'.
    EXPECT_LT(ChunkKey(ino - 1, ~0ull), k);
    EXPECT_LT(k, ChunkKey(ino + 1, 0));
  }
  // Inode 256 vs 1: big-endian, so numeric order holds across byte boundaries.
  EXPECT_LT(ChunkPrefix(1), ChunkPrefix(256));
}

TEST(SchemaKeyTest, KeyFamiliesAreDistinctAndDecodable) {
  const uint64_t ino = 123456789;
  EXPECT_EQ(InoFromKey(InodeKey(ino)), ino);
  EXPECT_EQ(InoFromKey(OrphanKey(ino)), ino);
  EXPECT_EQ(NameFromKey(DirEntryKey(ino, "hello.txt")), "hello.txt");
  EXPECT_EQ(NameFromKey(XattrKey(ino, "user.k")), "user.k");
  EXPECT_TRUE(DirEntryKey(ino, "x").starts_with(DirPrefix(ino)));
  EXPECT_TRUE(XattrKey(ino, "x").starts_with(XattrPrefix(ino)));
  EXPECT_TRUE(InodeKey(ino).starts_with(InodePrefixAll()));
  EXPECT_TRUE(OrphanKey(ino).starts_with(OrphanPrefixAll()));
  EXPECT_TRUE(DirPrefix(ino).starts_with(DirPrefixAll()));
  EXPECT_TRUE(XattrPrefix(ino).starts_with(XattrPrefixAll()));
  // No family's keys fall under another family's prefix.
  std::vector<std::string> alls = {InodePrefixAll(), DirPrefixAll(), ChunkPrefixAll(), XattrPrefixAll(),
                                   OrphanPrefixAll(), ChecksumPrefixAll()};
  std::vector<std::string> keys = {InodeKey(ino), DirEntryKey(ino, "n"), ChunkKey(ino, 0), XattrKey(ino, "n"),
                                   OrphanKey(ino), ChecksumKey(ino, 0)};
  for (size_t i = 0; i < alls.size(); ++i) {
    for (size_t j = 0; j < keys.size(); ++j) {
      EXPECT_EQ(keys[j].starts_with(alls[i]), i == j) << "key family " << j << " vs prefix " << alls[i];
    }
    EXPECT_FALSE(ConfigKey().starts_with(alls[i]));
    EXPECT_FALSE(NextInoKey().starts_with(alls[i]));
  }
  EXPECT_NE(ConfigKey(), NextInoKey());
  EXPECT_EQ(DecodeU64BE(std::string("\x00\x00\x00\x00\x00\x00\x01\x02", 8)), 0x102u);
}

}  // namespace
}  // namespace stripefs::meta
