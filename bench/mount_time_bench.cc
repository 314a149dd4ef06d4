// SPDX-License-Identifier: Apache-2.0
// mount_time_bench: how long Pool::Open(meta_dir, kMount) takes with N chunk
// records, and how long `stripefs fsck` (Pool::Open(kCheck) + fsck(false)) takes.
//
// It formats a pool of 4 sparse drive files (chunk size 4 MiB) in a temp dir,
// then writes the metadata of N/4 files of 4 chunks each straight into the
// RocksDB store (no data is written): inodes, directory entries in directories
// of at most 10,000 entries under the root, and chunk records with one replica
// each, at non-overlapping offsets, round-robin over the drives, each with its
// 1024 block checksums (meta::PutChunk: the placement record 'C' and the
// checksum pages 'K'). Then it times Pool::Open(kMount) + destruction a few
// times, runs the fsck logic once, and removes the temp dir (--keep keeps it).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/pool/pool.h"
#include "meta/kv_store.h"
#include "meta/namespace.h"
#include "meta/schema.h"
#include "meta/chunk_table.h"

namespace stripefs::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kDrives = 4;
constexpr uint64_t kChunk = 4ULL << 20;
constexpr uint32_t kChunksPerFile = 4;
constexpr uint64_t kDirEntriesMax = 10'000;
constexpr uint64_t kBatchRecords = 10'000;

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

[[noreturn]] void Die(const std::string& what, const Status& s) {
  fmt::print(stderr, "mount_time_bench: {}: {}\n", what, s.message());
  std::exit(1);
}

void Check(const Status& s, const std::string& what) {
  if (!s.ok()) Die(what, s);
}

// Writes the namespace and chunk records of `records` chunks into meta_dir.
void Populate(const std::string& meta_dir, uint64_t records) {
  auto kv_or = meta::OpenRocksKvStore(meta_dir, meta::OpenMode::kReadWrite);
  if (!kv_or.ok()) Die("open metadata", kv_or.status());
  auto kv = std::move(kv_or).value();
  std::string raw;
  Check(kv->get(meta::ConfigKey(), &raw), "read pool config");
  auto config = meta::DecodeConfig(raw);
  if (!config.ok()) Die("decode pool config", config.status());
  Check(kv->get(meta::InodeKey(meta::kRootIno), &raw), "read root inode");
  auto root = meta::DecodeInode(raw);
  if (!root.ok()) Die("decode root inode", root.status());

  const uint64_t files = (records + kChunksPerFile - 1) / kChunksPerFile;
  const uint64_t dirs = (files + kDirEntriesMax - 1) / kDirEntriesMax;
  const uint64_t first_dir = meta::kRootIno + 1, first_file = first_dir + dirs;
  const int64_t now = meta::NowNs();
  const uint32_t uid = getuid(), gid = getgid();

  meta::Transaction txn;
  size_t in_batch = 0;
  auto flush = [&](bool force) {
    if (in_batch == 0 || (!force && in_batch < kBatchRecords)) return;
    Check(kv->commit(txn, false), "commit batch");
    txn = meta::Transaction();
    in_batch = 0;
  };

  // The root gains one subdirectory link per directory.
  meta::InodeRecord r = root.value();
  r.nlink = static_cast<uint32_t>(2 + dirs);
  r.mtime_ns = r.ctime_ns = now;
  txn.put(meta::InodeKey(r.ino), meta::EncodeInode(r));
  for (uint64_t d = 0; d < dirs; ++d) {
    meta::InodeRecord dir;
    dir.ino = first_dir + d;
    dir.mode = S_IFDIR | 0755;
    dir.uid = uid;
    dir.gid = gid;
    dir.nlink = 2;
    dir.parent = meta::kRootIno;
    dir.atime_ns = dir.mtime_ns = dir.ctime_ns = now;
    txn.put(meta::InodeKey(dir.ino), meta::EncodeInode(dir));
    txn.put(meta::DirEntryKey(meta::kRootIno, fmt::format("d{:05}", d)), meta::EncodeDirEntry({dir.ino, S_IFDIR}));
    ++in_batch;
  }

  meta::ChunkRecord chunk;
  chunk.length = static_cast<uint32_t>(kChunk);
  chunk.capacity = static_cast<uint32_t>(kChunk);
  chunk.replicas.resize(1);
  chunk.crcs.resize(kChunk / meta::kBlockSize);
  uint64_t global_chunk = 0;
  for (uint64_t f = 0; f < files; ++f) {
    uint64_t chunks = std::min<uint64_t>(kChunksPerFile, records - f * kChunksPerFile);
    meta::InodeRecord file;
    file.ino = first_file + f;
    file.mode = S_IFREG | 0644;
    file.uid = uid;
    file.gid = gid;
    file.nlink = 1;
    file.size = chunks * kChunk;
    file.atime_ns = file.mtime_ns = file.ctime_ns = now;
    file.uri = fmt::format("stripefs://{}/{:016x}", config->uuid, file.ino);  // as Namespace::create names it
    file.chunk_size = static_cast<uint32_t>(kChunk);
    file.strategy = "striped";
    file.replicas = 1;
    file.allocated = chunks * kChunk;
    txn.put(meta::InodeKey(file.ino), meta::EncodeInode(file));
    uint64_t dir = first_dir + f / kDirEntriesMax;
    txn.put(meta::DirEntryKey(dir, fmt::format("f{:07}", f)), meta::EncodeDirEntry({file.ino, S_IFREG}));
    for (uint64_t c = 0; c < chunks; ++c, ++global_chunk) {
      chunk.replicas[0] = {static_cast<uint32_t>(global_chunk % kDrives), {{(global_chunk / kDrives) * kChunk, kChunk}}};
      // Checksums of data we do not write: pseudo-random, so they compress like real ones.
      for (size_t b = 0; b < chunk.crcs.size(); ++b) {
        chunk.crcs[b] = static_cast<uint32_t>(SplitMix64(global_chunk * chunk.crcs.size() + b));
      }
      meta::PutChunk(&txn, file.ino, c, meta::ChunkRecord{}, chunk);  // placement and checksum pages
      ++in_batch;
    }
    flush(false);
  }
  txn.put(meta::NextInoKey(), meta::EncodeU64(first_file + files));
  ++in_batch;
  flush(true);
  Check(kv->sync(), "sync metadata");
}

// Compacts the store fully, as a long-lived pool's LSM tree would be, so that
// background compaction does not run during the timed opens.
void Compact(const std::string& meta_dir) {
  rocksdb::Options options;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(options, meta_dir, &raw);
  if (!s.ok()) Die("open for compaction", Status::IOError(s.ToString()));
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::CompactRangeOptions cro;
  cro.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  s = db->CompactRange(cro, nullptr, nullptr);
  if (!s.ok()) Die("compact", Status::IOError(s.ToString()));
  s = db->Close();
  if (!s.ok()) Die("close after compaction", Status::IOError(s.ToString()));
}

uint64_t DirBytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec)) total += e.file_size(ec);
  }
  return total;
}

void DropCaches() {
  sync();
  FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w");
  if (!f) {
    fmt::print(stderr, "mount_time_bench: cannot drop caches (needs root); timing with a warm cache\n");
    return;
  }
  std::fputs("3\n", f);
  std::fclose(f);
}

}  // namespace
}  // namespace stripefs::bench

int main(int argc, char** argv) {
  using namespace stripefs;
  using namespace stripefs::bench;

  CLI::App app{
      "mount_time_bench: times Pool::Open(kMount) (+ destruction) of a pool holding N chunk records, and the\n"
      "fsck logic (Pool::Open(kCheck) + fsck without --verify). Builds the pool in a temp dir: 4 sparse drive\n"
      "files, chunk size 4 MiB, N/4 files of 4 chunks, metadata written straight into RocksDB (no data)."};
  uint64_t records = 1'000'000;
  std::string dir;
  bool keep = false, reuse = false, no_compact = false, cold = false;
  int runs = 3;
  app.add_option("--records", records, "Chunk records to create (4 per file)")->capture_default_str()->check(
      CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  app.add_option("--dir", dir, "Where to build the pool (default: a new /tmp/stripefs-mount-bench.XXXXXX)");
  app.add_option("--runs", runs, "Timed mounts")->capture_default_str()->check(CLI::Range(1, 100));
  app.add_flag("--keep", keep, "Keep the pool afterwards (rerun with --dir DIR --reuse)");
  app.add_flag("--reuse", reuse, "Use the pool already in --dir (from a --keep run) instead of building one");
  app.add_flag("--no-compact", no_compact,
               "Skip the full RocksDB compaction after writing (background compaction may then overlap the timings)");
  app.add_flag("--cold", cold, "Drop the page cache (root) before each timed open, so the metadata is read from disk");
  CLI11_PARSE(app, argc, argv);

  bool made_dir = false;
  if (dir.empty()) {
    std::string tmpl = "/tmp/stripefs-mount-bench.XXXXXX";
    if (!mkdtemp(tmpl.data())) {
      fmt::print(stderr, "mount_time_bench: mkdtemp: {}\n", std::strerror(errno));
      return 1;
    }
    dir = tmpl;
    made_dir = true;
  }
  const std::string meta_dir = (fs::path(dir) / "meta").string();
  const uint64_t per_drive = (records + kDrives - 1) / kDrives;
  const uint64_t drive_size = kDataOffset + per_drive * kChunk + (1ULL << 30);

  if (!reuse) {
    std::error_code ec;
    if (!made_dir && fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
      fmt::print(stderr, "mount_time_bench: {} is not empty (give an empty or new --dir, or --reuse)\n", dir);
      return 1;
    }
    fs::create_directories(dir, ec);
    FormatOptions fo;
    fo.meta_dir = meta_dir;
    for (uint32_t d = 0; d < kDrives; ++d) fo.drives.push_back({(fs::path(dir) / fmt::format("drive{}.img", d)).string(), drive_size});
    fo.chunk_size = static_cast<uint32_t>(kChunk);
    fo.strategy = "striped";
    fo.replicas = 1;
    Check(FormatPool(fo, getuid(), getgid()), "format pool");
    auto t = Clock::now();
    Populate(meta_dir, records);
    fmt::print("# populated {} chunk records ({} files) in {:.1f} s\n", records, (records + 3) / 4, Seconds(t));
    if (!no_compact) {
      t = Clock::now();
      Compact(meta_dir);
      fmt::print("# compacted the metadata store in {:.1f} s\n", Seconds(t));
    }
  }
  fmt::print("# pool {}: 4 sparse drives of {} bytes, metadata {:.2f} GiB on disk, page cache {}\n", dir, drive_size,
             static_cast<double>(DirBytes(meta_dir)) / (1ULL << 30), cold ? "dropped before each open" : "warm");

  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    if (cold) DropCaches();
    auto t = Clock::now();
    {
      auto pool = Pool::Open(meta_dir, Pool::Mode::kMount);
      if (!pool.ok()) Die("mount", pool.status());
    }
    times.push_back(Seconds(t));
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  fmt::print("records\tmount_median(s)\tmount_runs(s)\n{}\t{:.3f}\t", records, sorted[sorted.size() / 2]);
  for (size_t i = 0; i < times.size(); ++i) fmt::print("{}{:.3f}", i ? "," : "", times[i]);
  fmt::print("\n");

  if (cold) DropCaches();
  auto t = Clock::now();
  bool clean = false;
  size_t problems = 0;
  std::vector<std::string> notes;
  {
    auto pool = Pool::Open(meta_dir, Pool::Mode::kCheck);
    if (!pool.ok()) Die("open for fsck", pool.status());
    auto found = pool.value()->fsck(false, &notes);
    if (!found.ok()) Die("fsck", found.status());
    problems = found->size();
    clean = problems == 0;
    for (size_t i = 0; i < std::min<size_t>(problems, 5); ++i) fmt::print(stderr, "PROBLEM: {}\n", found.value()[i]);
  }
  double fsck_s = Seconds(t);
  fmt::print("fsck\t{}\t{:.3f} s\t{}\n", clean ? "clean" : fmt::format("{} problem(s)", problems), fsck_s,
             fmt::join(notes, "; "));

  if (!keep) {
    std::error_code ec;
    if (made_dir || !reuse) {
      fs::remove_all(dir, ec);
    }
    if (ec) fmt::print(stderr, "mount_time_bench: cannot remove {}: {}\n", dir, ec.message());
  } else {
    fmt::print("# kept {} (rerun with --dir {} --reuse)\n", dir, dir);
  }
  return 0;
}
