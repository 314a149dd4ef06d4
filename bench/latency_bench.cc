// SPDX-License-Identifier: Apache-2.0
// latency_bench: BENCHMARKS.md §3, the rows of RAMCloud's latency suite
// (seed 003, clusterperf) for stripefs, one table per target:
//
//   engine        the object API (stripefs/objects.h), RAM tier on (s3fifo,
//                 the whole RAM segment): ObjectPool::get / put / multi_get
//   engine-noram  the object API with ram_cache "off": every read goes to the
//                 drive files (io_uring) and checks the block's crc32c
//   mount         a stripefs mount (RAM tier on), plain syscalls per object
//                 operation: a read is open + pread + close of a warm file, a
//                 write is open(O_TRUNC) + write + close (fsync before close
//                 when synced). The mount opens files with keep_cache, so a
//                 warm file's bytes come from the kernel page cache; open and
//                 close (FLUSH) each go to the daemon.
//   mount-fd      the same mount, a kept-open fd: pread / pwrite only (reads
//                 from the kernel page cache; writes go to the daemon)
//   mount-direct  the same, the kept-open fd with O_DIRECT: every pread
//                 reaches the daemon, which answers from its RAM tier
//
// Rows, in the seed's style (name, value, unit, description) plus p90/p99:
//   basic.readS / basic.writeS    one S-byte object (S = 100 B ... 1 MB) with a
//                                 30-byte name, read (or replaced) again and
//                                 again; value = median latency
//   basic.readBwS / writeBwS      S / mean latency
//   readNotFound                  a read of a name that does not exist
// and the seed's sub-tables:
//   writeAsyncSync        a write of S bytes, not synced (or synced), then a
//                         100 B write that is synced (put + sync(); fsync on
//                         the mount): both latencies, medians
//   readVaryingKeyLength  100 B objects whose names are 1 ... 4,000 bytes;
//                         names over 255 bytes are split into components of at
//                         most 255 (NAME_MAX), '/' counted in the length
//   multiRead             N = 1 ... 1,000 objects of 100 B in one call
//                         (ObjectPool::multi_get; on the mount, N reads in a
//                         row): batch latency and latency per object, medians
//   readLoaded            1 ... 16 threads reading one 100 B object: median
//                         (p90, p99) latency per read and total reads/s
//
// Every operation is timed alone with steady_clock (clock_gettime through the
// vDSO, ~20 ns; the machine's clocksource is printed). Each pool is made with
// `stripefs mkfs` in a fresh directory on the backing, one pool per target;
// drive files are sparse. Everything is unmounted and removed at the end, on
// an error and on SIGINT/SIGTERM/SIGHUP.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "pool_fixture.h"
#include "stripefs/objects.h"

namespace stripefs::bench {
namespace {

using nlohmann::json;
constexpr size_t kKeySize = 30;  // the seed's keys are 30 bytes
constexpr size_t kSmall = 100;   // the seed's small object
constexpr size_t kAlign = 4096;

// ---------------------------------------------------------------------------
// How much of everything to do.

struct Plan {
  std::vector<size_t> sizes = {100, 1000, 10000, 100000, 1000000};
  size_t read_iters_small = 100000, read_iters_100k = 20000, read_iters_1m = 2000;
  size_t write_iters_small = 20000, write_iters_100k = 2000, write_iters_1m = 500;
  size_t not_found_iters = 100000;
  size_t key_iters = 20000;
  std::vector<size_t> key_lengths;
  size_t async_sync_reps = 500;
  std::vector<size_t> batch_sizes;
  size_t batch_objects = 50000;  // objects read per batch size (at least batch_min_reps batches)
  size_t batch_min_reps = 50;
  std::vector<int> loaded_threads;
  double loaded_seconds = 1.0;

  size_t read_iters(size_t s) const {
    return s >= 1000000 ? read_iters_1m : s >= 100000 ? read_iters_100k : read_iters_small;
  }
  size_t write_iters(size_t s) const {
    return s >= 1000000 ? write_iters_1m : s >= 100000 ? write_iters_100k : write_iters_small;
  }
};

Plan MakePlan(const std::string& mode) {
  Plan p;
  for (size_t l : {1, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80, 85, 90, 95, 100}) {
    p.key_lengths.push_back(l);
  }
  for (size_t l = 200; l <= 1000; l += 100) p.key_lengths.push_back(l);
  for (size_t l : {2000, 3000, 4000}) p.key_lengths.push_back(l);
  for (size_t n = 1; n <= 10; ++n) p.batch_sizes.push_back(n);
  for (size_t n = 20; n <= 100; n += 10) p.batch_sizes.push_back(n);
  for (size_t n = 200; n <= 1000; n += 100) p.batch_sizes.push_back(n);
  for (int t = 1; t <= 16; ++t) p.loaded_threads.push_back(t);
  if (mode == "quick") {
    p.read_iters_small = 20000, p.read_iters_100k = 5000, p.read_iters_1m = 500;
    p.write_iters_small = 5000, p.write_iters_100k = 1000, p.write_iters_1m = 200;
    p.not_found_iters = 20000;
    p.key_iters = 5000;
    p.async_sync_reps = 100;
    p.batch_objects = 5000, p.batch_min_reps = 10;
    p.loaded_threads = {1, 2, 3, 4, 6, 8, 12, 16};
    p.loaded_seconds = 0.3;
  } else if (mode == "smoke") {  // checks the plumbing, measures nothing worth keeping
    p.read_iters_small = 200, p.read_iters_100k = 50, p.read_iters_1m = 10;
    p.write_iters_small = 50, p.write_iters_100k = 20, p.write_iters_1m = 5;
    p.not_found_iters = 200;
    p.key_iters = 20;
    p.key_lengths = {1, 30, 255, 256, 1000, 4000};
    p.async_sync_reps = 5;
    p.batch_sizes = {1, 10, 100, 1000};
    p.batch_objects = 1000, p.batch_min_reps = 2;
    p.loaded_threads = {1, 2, 4};
    p.loaded_seconds = 0.05;
  }
  return p;
}

// ---------------------------------------------------------------------------
// Names and contents.

// stem padded to the seed's 30-byte key.
std::string Key30(const std::string& stem) { return stem + std::string(kKeySize - stem.size(), '_'); }

// A name of exactly `length` bytes whose components are at most 255 bytes
// (NAME_MAX), '/' counted. Names up to 255 bytes are one component of 'k's
// (unique by length); longer names start with a directory named after their
// length, so no name is another's directory.
std::string NameOfLength(size_t length) {
  constexpr size_t kNameMax = 255;
  if (length <= kNameMax) return std::string(length, 'k');
  std::string name;
  size_t remaining = length;
  bool first = true;
  while (remaining > kNameMax) {
    const size_t part = std::min(kNameMax, remaining - 2);  // leave a '/' and at least one byte
    std::string component = first ? fmt::format("L{}", length) : std::string();
    component.resize(part, 'k');
    name += component + "/";
    remaining -= part + 1;
    first = false;
  }
  return name + std::string(remaining, 'k');
}

std::string Contents(size_t size, uint64_t seed) {
  std::string s(size, '\0');
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (char& c : s) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>('!' + x % 90);
  }
  return s;
}

// 4 KiB-aligned memory (O_DIRECT needs it).
struct AlignedBytes {
  explicit AlignedBytes(size_t n) : size((n + kAlign - 1) / kAlign * kAlign) {
    data = static_cast<char*>(std::aligned_alloc(kAlign, std::max(size, kAlign)));
    std::memset(data, 0, std::max(size, kAlign));
  }
  ~AlignedBytes() { std::free(data); }
  AlignedBytes(const AlignedBytes&) = delete;
  AlignedBytes& operator=(const AlignedBytes&) = delete;
  char* data;
  size_t size;
};

// ---------------------------------------------------------------------------
// Targets: what a row does, per target. The returned closures are what is
// timed; each owns its buffers (and fds), so threads each take their own.

using ReadOp = std::function<bool()>;  // false: the object does not exist
using WriteOp = std::function<void()>;

class Target {
 public:
  virtual ~Target() = default;
  // Untimed setup: stores data as `name`, replacing it.
  virtual void put(const std::string& name, std::string_view data) = 0;
  // Untimed check: the whole object.
  virtual std::string fetch(const std::string& name, size_t size) = 0;
  // One read of the whole object (size bytes).
  virtual ReadOp reader(const std::string& name, size_t size) = 0;
  // One write that replaces the object's bytes with data; durable when sync.
  virtual WriteOp writer(const std::string& name, std::string data, bool sync) = 0;
  // One read of every object in names (each size bytes).
  virtual WriteOp batch_reader(const std::vector<std::string>& names, size_t size) = 0;
  // False for a kept-open fd: no name is looked up, so the rows about names
  // (readNotFound, readVaryingKeyLength) and writeAsyncSync are left out.
  virtual bool per_operation_names() const { return true; }
  // One line about the RAM tier after the run (empty if there is nothing to say).
  virtual std::string cache_line() const { return ""; }
};

class EngineTarget final : public Target {
 public:
  EngineTarget(const std::string& meta, const std::string& ram_cache) {
    api::Error err;
    api::Options o;
    o.ram_cache = ram_cache;
    pool_ = api::ObjectPool::Open(meta, o, &err);
    if (!pool_) Die("ObjectPool::Open " + meta + ": " + err.message);
  }
  void put(const std::string& name, std::string_view data) override { Check(pool_->put(name, data), "put " + name); }
  std::string fetch(const std::string& name, size_t) override {
    std::string out;
    Check(pool_->get(name, &out), "get " + name);
    return out;
  }
  ReadOp reader(const std::string& name, size_t) override {
    auto buf = std::make_shared<std::string>();
    api::ObjectPool* pool = pool_.get();
    return [pool, name, buf] {
      const api::Error e = pool->get(name, buf.get());
      if (e.code == ENOENT) return false;
      if (e) Die("get " + name + ": " + e.message);
      return true;
    };
  }
  // data is a std::string, as a client's would be: not 4 KiB-aligned, and
  // 1,000,000 B is not whole blocks either, so the engine copies it into an
  // aligned buffer it allocates per put (see the README on basic.write1M).
  WriteOp writer(const std::string& name, std::string data, bool sync) override {
    api::ObjectPool* pool = pool_.get();
    return [pool, name, data = std::move(data), sync] {
      Check(pool->put(name, data), "put " + name);
      if (sync) Check(pool->sync(), "sync");
    };
  }
  WriteOp batch_reader(const std::vector<std::string>& names, size_t) override {
    struct State {
      std::vector<std::string> names, data;
      std::vector<api::Error> errors;
    };
    auto st = std::make_shared<State>();
    st->names = names;
    api::ObjectPool* pool = pool_.get();
    return [pool, st] {
      pool->multi_get(st->names, &st->data, &st->errors);
      for (const api::Error& e : st->errors) {
        if (e) Die("multi_get: " + e.message);
      }
    };
  }
  std::string cache_line() const override {
    const api::Stats s = pool_->stats();
    if (s.cache_capacity == 0) return "RAM tier off";
    return fmt::format("RAM tier: {} hits, {} misses, {} evictions, holds {} of {}", s.cache_hits, s.cache_misses,
                       s.cache_evictions, Bytes(s.cache_bytes), Bytes(s.cache_capacity));
  }

 private:
  static void Check(const api::Error& e, const std::string& what) {
    if (e) Die(what + ": " + e.message);
  }
  std::unique_ptr<api::ObjectPool> pool_;
};

// An fd closed when the last closure holding it goes.
struct Fd {
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int fd;
};

void ReadFull(int fd, char* buf, size_t size, const std::string& what) {
  for (size_t done = 0; done < size;) {
    ssize_t n = pread(fd, buf + done, size - done, static_cast<off_t>(done));
    if (n < 0) DieErrno("pread " + what);
    if (n == 0) Die(fmt::format("{}: {} bytes, expected {}", what, done, size));
    done += static_cast<size_t>(n);
  }
}

void WriteFull(int fd, const char* buf, size_t size, const std::string& what) {
  for (size_t done = 0; done < size;) {
    ssize_t n = pwrite(fd, buf + done, size - done, static_cast<off_t>(done));
    if (n <= 0) DieErrno("pwrite " + what);
    done += static_cast<size_t>(n);
  }
}

class MountTarget final : public Target {
 public:
  enum class Mode { kOpenEach, kKeptOpen, kDirect };
  MountTarget(const std::string& mnt, Mode mode) : mode_(mode) {
    root_ = open(mnt.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_ < 0) DieErrno("open " + mnt);
  }
  ~MountTarget() override { close(root_); }

  void put(const std::string& name, std::string_view data) override {
    MakeParents(name);
    const int fd = openat(root_, name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) DieErrno("create " + name);
    WriteFull(fd, data.data(), data.size(), name);
    if (close(fd) != 0) DieErrno("close " + name);
  }

  std::string fetch(const std::string& name, size_t size) override {
    std::string out(size, '\0');
    Fd fd(openat(root_, name.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.fd < 0) DieErrno("open " + name);
    ReadFull(fd.fd, out.data(), size, name);
    return out;
  }

  ReadOp reader(const std::string& name, size_t size) override {
    const int root = root_;
    switch (mode_) {
      case Mode::kOpenEach: {
        auto buf = std::make_shared<std::vector<char>>(size);
        return [root, name, buf, size] {
          const int fd = openat(root, name.c_str(), O_RDONLY | O_CLOEXEC);
          if (fd < 0) {
            if (errno == ENOENT) return false;
            DieErrno("open " + name);
          }
          ReadFull(fd, buf->data(), size, name);
          close(fd);
          return true;
        };
      }
      case Mode::kKeptOpen: {
        auto fd = OpenKept(name, O_RDONLY);
        auto buf = std::make_shared<std::vector<char>>(size);
        return [fd, buf, size, name] {
          ReadFull(fd->fd, buf->data(), size, name);
          return true;
        };
      }
      case Mode::kDirect: {
        auto fd = OpenKept(name, O_RDONLY | O_DIRECT);
        auto buf = std::make_shared<AlignedBytes>(size);
        return [fd, buf, size, name] {
          // A whole-block request; the daemon answers with the object's size bytes.
          const ssize_t n = pread(fd->fd, buf->data, buf->size, 0);
          if (n != static_cast<ssize_t>(size)) Die(fmt::format("O_DIRECT pread {}: {} of {} bytes", name, n, size));
          return true;
        };
      }
    }
    return {};
  }

  WriteOp writer(const std::string& name, std::string data, bool sync) override {
    const int root = root_;
    if (mode_ == Mode::kOpenEach) {
      MakeParents(name);
      return [root, name, data = std::move(data), sync] {
        const int fd = openat(root, name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) DieErrno("create " + name);
        WriteFull(fd, data.data(), data.size(), name);
        if (sync && fsync(fd) != 0) DieErrno("fsync " + name);
        if (close(fd) != 0) DieErrno("close " + name);
      };
    }
    // Kept open: overwrite in place (the object already holds data.size() bytes).
    put(name, data);
    if (mode_ == Mode::kKeptOpen) {
      auto fd = OpenKept(name, O_WRONLY);
      return [fd, name, data = std::move(data), sync] {
        WriteFull(fd->fd, data.data(), data.size(), name);
        if (sync && fdatasync(fd->fd) != 0) DieErrno("fdatasync " + name);
      };
    }
    auto fd = OpenKept(name, O_WRONLY | O_DIRECT);
    auto buf = std::make_shared<AlignedBytes>(data.size());
    std::memcpy(buf->data, data.data(), data.size());
    const size_t size = data.size();
    return [fd, buf, size, name, sync] {
      if (pwrite(fd->fd, buf->data, size, 0) != static_cast<ssize_t>(size)) DieErrno("O_DIRECT pwrite " + name);
      if (sync && fdatasync(fd->fd) != 0) DieErrno("fdatasync " + name);
    };
  }

  WriteOp batch_reader(const std::vector<std::string>& names, size_t size) override {
    auto ops = std::make_shared<std::vector<ReadOp>>();
    for (const std::string& n : names) ops->push_back(reader(n, size));
    return [ops] {
      for (const ReadOp& op : *ops) {
        if (!op()) Die("multiRead: an object is missing");
      }
    };
  }

  bool per_operation_names() const override { return mode_ == Mode::kOpenEach; }

 private:
  std::shared_ptr<Fd> OpenKept(const std::string& name, int flags) {
    auto fd = std::make_shared<Fd>(openat(root_, name.c_str(), flags | O_CLOEXEC));
    if (fd->fd < 0) DieErrno("open " + name);
    return fd;
  }

  void MakeParents(const std::string& name) {
    for (size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1)) {
      const std::string dir = name.substr(0, slash);
      if (mkdirat(root_, dir.c_str(), 0755) != 0 && errno != EEXIST) DieErrno("mkdir " + dir);
    }
  }

  int root_;
  Mode mode_;
};

// ---------------------------------------------------------------------------
// Timing.

std::vector<uint64_t> TimeReads(const ReadOp& op, size_t warmup, size_t iters, bool expect_found) {
  for (size_t i = 0; i < warmup; ++i) op();
  std::vector<uint64_t> ns(iters);
  for (size_t i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    const bool found = op();
    const auto t1 = Clock::now();
    if (found != expect_found) Die(expect_found ? "a read found nothing" : "a missing object was found");
    ns[i] = NsSince(t0, t1);
  }
  return ns;
}

std::vector<uint64_t> TimeWrites(const WriteOp& op, size_t warmup, size_t iters) {
  for (size_t i = 0; i < warmup; ++i) op();
  std::vector<uint64_t> ns(iters);
  for (size_t i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    op();
    ns[i] = NsSince(t0, Clock::now());
  }
  return ns;
}

size_t Warmup(size_t iters) { return std::clamp<size_t>(iters / 10, 3, 1000); }

// ---------------------------------------------------------------------------
// Output: a Markdown table per target and its sub-tables, and JSON.

struct Row {
  std::string name;
  double value;
  std::string unit;
  double p90 = -1, p99 = -1;  // <0: not applicable
  std::string description;
};

std::string SizeLabel(size_t s) {
  if (s >= 1000000) return fmt::format("{}M", s / 1000000);
  if (s >= 1000) return fmt::format("{}K", s / 1000);
  return std::to_string(s);
}

std::string Num(double v) {
  if (v < 0) return "";
  if (v < 10) return fmt::format("{:.2f}", v);
  if (v < 1000) return fmt::format("{:.1f}", v);
  return fmt::format("{:.0f}", v);
}

// Counts print as integers, measurements with Num's precision.
std::string Cell(double v) {
  return v == static_cast<double>(static_cast<int64_t>(v)) ? fmt::format("{:.0f}", v) : Num(v);
}

class Report {
 public:
  explicit Report(std::string target) : target_(std::move(target)) { out_["target"] = target_; }

  void row(const Row& r) {
    rows_.push_back(r);
    out_["rows"].push_back({{"name", r.name},
                            {"value", r.value},
                            {"unit", r.unit},
                            {"p90", r.p90},
                            {"p99", r.p99},
                            {"description", r.description}});
    fmt::print(stderr, "  {} {} {} {}\n", target_, r.name, Num(r.value), r.unit);
  }
  // A seed-style sub-table: title (the seed's comment line), columns, rows.
  void table(const std::string& key, const std::string& title, const std::vector<std::string>& columns,
             const std::vector<std::vector<double>>& rows) {
    tables_.push_back({title, columns, rows});
    json t = {{"title", title}, {"columns", columns}, {"rows", rows}};
    out_["tables"][key] = t;
  }
  void note(const std::string& line) {
    notes_.push_back(line);
    out_["notes"].push_back(line);
  }

  void print(const std::string& heading) const {
    fmt::print("\n## {}\n\n", heading);
    fmt::print("| name | value | unit | p90 | p99 | description |\n|---|---:|---|---:|---:|---|\n");
    for (const Row& r : rows_) {
      fmt::print("| {} | {} | {} | {} | {} | {} |\n", r.name, Num(r.value), r.unit, Num(r.p90), Num(r.p99),
                 r.description);
    }
    for (const Table& t : tables_) {
      fmt::print("\n# {} ({})\n\n|", t.title, target_);
      for (const auto& c : t.columns) fmt::print(" {} |", c);
      fmt::print("\n|");
      for (size_t i = 0; i < t.columns.size(); ++i) fmt::print("---:|");
      fmt::print("\n");
      for (const auto& r : t.rows) {
        fmt::print("|");
        for (double v : r) fmt::print(" {} |", Cell(v));
        fmt::print("\n");
      }
    }
    for (const std::string& n : notes_) fmt::print("\n{}\n", n);
    std::fflush(stdout);
  }
  const json& as_json() const { return out_; }

 private:
  struct Table {
    std::string title;
    std::vector<std::string> columns;
    std::vector<std::vector<double>> rows;
  };
  std::string target_;
  std::vector<Row> rows_;
  std::vector<Table> tables_;
  std::vector<std::string> notes_;
  json out_;
};

// ---------------------------------------------------------------------------
// The rows.

// The latency row of one size and its bandwidth row (size / mean latency).
// op: "read" or "write"; gerund: "reading" or "writing".
void LatencyAndBandwidthRows(Report& rep, const std::string& op, const std::string& gerund, size_t size,
                             const Summary& s, std::string what) {
  rep.row({"basic." + op + SizeLabel(size), s.p50_us, "us", s.p90_us, s.p99_us, std::move(what)});
  rep.row({"basic." + op + "Bw" + SizeLabel(size), static_cast<double>(size) / s.mean_us, "MB/s", -1, -1,
           fmt::format("bandwidth {} {}B object with 30B key (size / mean latency {} us)", gerund, SizeLabel(size),
                       Num(s.mean_us))});
}

void BasicReads(Target& t, const Plan& plan, Report& rep) {
  for (size_t size : plan.sizes) {
    const std::string name = Key30(fmt::format("read{}", size));
    const std::string data = Contents(size, size);
    t.put(name, data);
    const size_t iters = plan.read_iters(size);
    const Summary s = Summarize(TimeReads(t.reader(name, size), Warmup(iters), iters, true));
    if (t.fetch(name, size) != data) Die("basic.read" + SizeLabel(size) + ": the object read back differs");
    LatencyAndBandwidthRows(rep, "read", "reading", size, s,
                            fmt::format("read single {}B object with 30B key (median of {})", SizeLabel(size), iters));
  }
}

void BasicWrites(Target& t, const Plan& plan, Report& rep) {
  for (size_t size : plan.sizes) {
    const std::string name = Key30(fmt::format("write{}", size));
    const std::string data = Contents(size, size + 7);
    const size_t iters = plan.write_iters(size);
    const Summary s = Summarize(TimeWrites(t.writer(name, data, false), Warmup(iters), iters));
    if (t.fetch(name, size) != data) Die("basic.write" + SizeLabel(size) + ": the object read back differs");
    LatencyAndBandwidthRows(
        rep, "write", "writing", size, s,
        fmt::format("write single {}B object with 30B key, not synced (median of {})", SizeLabel(size), iters));
  }
}

void ReadNotFound(Target& t, const Plan& plan, Report& rep) {
  const std::string name = Key30("missing");
  const Summary s =
      Summarize(TimeReads(t.reader(name, kSmall), Warmup(plan.not_found_iters), plan.not_found_iters, false));
  rep.row({"readNotFound", s.p50_us, "us", s.p90_us, s.p99_us,
           fmt::format("read object that doesn't exist (median of {})", plan.not_found_iters)});
}

void ReadVaryingKeyLength(Target& t, const Plan& plan, Report& rep) {
  std::vector<std::vector<double>> rows;
  for (size_t length : plan.key_lengths) {
    const std::string name = NameOfLength(length);
    if (name.size() != length) Die(fmt::format("name of length {} came out {} bytes", length, name.size()));
    t.put(name, Contents(kSmall, length));
    const Summary s = Summarize(TimeReads(t.reader(name, kSmall), Warmup(plan.key_iters), plan.key_iters, true));
    rows.push_back(
        {static_cast<double>(length), s.p50_us, s.p90_us, s.p99_us, static_cast<double>(length) / s.mean_us});
  }
  rep.table("readVaryingKeyLength",
            "stripefs read performance for 100 B objects with keys of various lengths (components <= 255 B)",
            {"Key Length", "Latency (us)", "p90 (us)", "p99 (us)", "Bandwidth (MB/s)"}, rows);
}

void WriteAsyncSync(Target& t, const Plan& plan, Report& rep) {
  const std::string first = Key30("async_first"), second = Key30("sync_second");
  std::vector<std::vector<double>> rows;
  for (bool first_sync : {false, true}) {
    for (size_t size : plan.sizes) {
      WriteOp w1 = t.writer(first, Contents(size, size), first_sync);
      WriteOp w2 = t.writer(second, Contents(kSmall, 1), true);
      std::vector<uint64_t> a, b;
      for (size_t i = 0; i < plan.async_sync_reps + 2; ++i) {
        const auto t0 = Clock::now();
        w1();
        const auto t1 = Clock::now();
        w2();
        const auto t2 = Clock::now();
        if (i >= 2) a.push_back(NsSince(t0, t1)), b.push_back(NsSince(t1, t2));  // two warm-up rounds
      }
      rows.push_back({first_sync ? 1.0 : 0.0, static_cast<double>(size), Summarize(a).p50_us, Summarize(b).p50_us});
    }
  }
  rep.table("writeAsyncSync",
            "stripefs write performance for a 100 B object, synced (put + sync; fsync on the mount), after a write "
            "of various sizes, synced or not",
            {"firstWriteIsSync", "firstObjectSize", "firstWriteLatency(us)", "syncWriteLatency(us)"}, rows);
}

void MultiRead(Target& t, const Plan& plan, Report& rep) {
  const size_t most =
      plan.batch_sizes.empty() ? 0 : *std::max_element(plan.batch_sizes.begin(), plan.batch_sizes.end());
  std::vector<std::string> names;
  for (size_t i = 0; i < most; ++i) {
    names.push_back(Key30(fmt::format("multi{:04d}", i)));
    t.put(names.back(), Contents(kSmall, 1000 + i));
  }
  std::vector<std::vector<double>> rows;
  for (size_t n : plan.batch_sizes) {
    const std::vector<std::string> batch(names.begin(), names.begin() + static_cast<ptrdiff_t>(n));
    const size_t reps = std::max(plan.batch_min_reps, plan.batch_objects / n);
    const Summary s = Summarize(TimeWrites(t.batch_reader(batch, kSmall), 2, reps));
    rows.push_back({static_cast<double>(n), s.p50_us, s.p50_us / static_cast<double>(n)});
  }
  rep.table("multiRead", "stripefs multiRead performance for 100 B objects with 30 byte keys",
            {"Num Objs", "Latency (us)", "Latency/Obj (us)"}, rows);
}

void ReadLoaded(Target& t, const Plan& plan, Report& rep) {
  const std::string name = Key30("loaded");
  t.put(name, Contents(kSmall, 42));
  std::vector<std::vector<double>> rows;
  for (int threads : plan.loaded_threads) {
    std::vector<ReadOp> ops;
    for (int i = 0; i < threads; ++i) ops.push_back(t.reader(name, kSmall));
    for (const ReadOp& op : ops) op();  // warm
    std::vector<std::vector<uint64_t>> samples(static_cast<size_t>(threads));
    std::barrier start(threads + 1);
    std::atomic<bool> stop{false};
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) {
      pool.emplace_back([&, i] {
        auto& mine = samples[static_cast<size_t>(i)];
        mine.reserve(1 << 20);
        start.arrive_and_wait();
        while (!stop.load(std::memory_order_relaxed)) {
          const auto t0 = Clock::now();
          ops[static_cast<size_t>(i)]();
          mine.push_back(NsSince(t0, Clock::now()));
        }
      });
    }
    start.arrive_and_wait();
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(plan.loaded_seconds));
    stop = true;
    for (auto& th : pool) th.join();
    const double secs = static_cast<double>(NsSince(t0, Clock::now())) / 1e9;
    std::vector<uint64_t> all;
    for (auto& v : samples) all.insert(all.end(), v.begin(), v.end());
    const size_t reads = all.size();
    const Summary s = Summarize(std::move(all));
    rows.push_back(
        {static_cast<double>(threads), s.p50_us, s.p90_us, s.p99_us, static_cast<double>(reads) / secs / 1000.0});
  }
  rep.table("readLoaded",
            "stripefs read performance as a function of load (1 or more threads all reading a single 100-byte "
            "object with 30-byte key repeatedly)",
            {"numClients", "readLatency(us)", "p90 (us)", "p99 (us)", "throughput(total kreads/sec)"}, rows);
}

void RunTarget(Target& t, const Plan& plan, Report& rep) {
  fmt::print(stderr, "{}: basic reads\n", rep.as_json()["target"].get<std::string>());
  BasicReads(t, plan, rep);
  BasicWrites(t, plan, rep);
  if (t.per_operation_names()) {
    ReadNotFound(t, plan, rep);
    ReadVaryingKeyLength(t, plan, rep);
    WriteAsyncSync(t, plan, rep);
  }
  MultiRead(t, plan, rep);
  ReadLoaded(t, plan, rep);
  if (std::string c = t.cache_line(); !c.empty()) rep.note(c);
}

// ---------------------------------------------------------------------------

struct Config {
  std::string mode = "full";
  std::string backing = "tmpfs", dir, stripefs, json_path;
  std::vector<std::string> targets = {"engine", "engine-noram", "mount", "mount-fd", "mount-direct"};
  PoolSpec spec;
};

std::string Describe(const std::string& target, const Config& c) {
  const std::string ram = Bytes(c.spec.ram);
  if (target == "engine")
    return fmt::format("engine: object API (ObjectPool get/put/multi_get), RAM tier s3fifo {}", ram);
  if (target == "engine-noram")
    return "engine-noram: object API, RAM tier off (every read from the drive files, crc32c checked)";
  if (target == "mount")
    return fmt::format(
        "mount: stripefs mount (RAM tier s3fifo {}), open + pread + close per read of a warm file "
        "(data from the kernel page cache: keep_cache), open(O_TRUNC) + write + close per write",
        ram);
  if (target == "mount-fd")
    return "mount-fd: the mount, a kept-open fd: pread (kernel page cache) / pwrite in place (to the daemon)";
  return fmt::format(
      "mount-direct: the mount, a kept-open O_DIRECT fd: every pread and pwrite goes to the daemon "
      "(reads from its RAM tier, s3fifo {})",
      ram);
}

std::string ClockSource() {
  std::ifstream in("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string s;
  in >> s;
  return s.empty() ? "?" : s;
}

int Main(int argc, char** argv) {
  InitBench("latency_bench");
  Config cfg;
  bool quick = false, smoke = false;
  std::string ram_text = "512M", drive_text = "16G";
  CLI::App app{
      "latency_bench (BENCHMARKS.md §3, seed 003): RAMCloud's latency rows for stripefs, through the object "
      "API (RAM tier on and off) and through the mount"};
  app.add_flag("--quick", quick, "Fewer iterations (a few minutes)");
  app.add_flag("--smoke", smoke, "A handful of iterations: checks that every row runs (for ctest)");
  app.add_option("--backing", cfg.backing,
                 "Where the drive files and metadata live: tmpfs (/dev/shm) or disk (/var/tmp)")
      ->check(CLI::IsMember({"tmpfs", "disk"}))
      ->capture_default_str();
  app.add_option("--dir", cfg.dir, "Make the work directory here instead of /dev/shm or /var/tmp");
  app.add_option("--targets", cfg.targets, "Targets, comma-separated")
      ->delimiter(',')
      ->check(CLI::IsMember({"engine", "engine-noram", "mount", "mount-fd", "mount-direct"}))
      ->capture_default_str();
  app.add_option("--ram", ram_text, "RAM segment of each pool (the RAM tier's capacity)")->capture_default_str();
  app.add_option("--drive-size", drive_text, "Size of each of the 4 (sparse) drive files")->capture_default_str();
  app.add_option("--stripefs", cfg.stripefs, "stripefs binary (default: $STRIPEFS, else build/tools/stripefs)");
  app.add_option("--json", cfg.json_path, "Also write every row and table to this file");
  CLI11_PARSE(app, argc, argv);
  cfg.mode = smoke ? "smoke" : quick ? "quick" : "full";
  cfg.spec.ram = ParseSize(ram_text, "--ram");
  cfg.spec.drive_size = ParseSize(drive_text, "--drive-size");
  cfg.stripefs = FindStripefs(cfg.stripefs);
  const Plan plan = MakePlan(cfg.mode);

  const Backing backing = MakeBacking(cfg.backing, cfg.dir, "latency_bench");
  fmt::print("# latency_bench ({} mode)\n\n", cfg.mode);
  fmt::print("- machine: {}; clocksource {}\n", MachineLine(), ClockSource());
  fmt::print("- backing: {} — {}\n", cfg.backing, backing.describe());
  fmt::print(
      "- pools: one per target, `stripefs mkfs` with {} sparse drive files of {} and a {} RAM segment, "
      "default chunk size, 1 replica; stripefs {}\n",
      cfg.spec.drives, Bytes(cfg.spec.drive_size), Bytes(cfg.spec.ram), cfg.stripefs);
  fmt::print(
      "- latency: each operation timed alone (steady_clock); value = median, p90/p99 = nearest rank; "
      "Bw = size / mean latency; MB/s = 10^6 B/s\n");
  std::fflush(stdout);

  json out = {{"mode", cfg.mode},
              {"backing", cfg.backing},
              {"workdir", backing.workdir},
              {"fs_type", backing.fs_type},
              {"machine", MachineLine()},
              {"ram", cfg.spec.ram},
              {"drive_size", cfg.spec.drive_size}};
  for (const std::string& name : cfg.targets) {
    const PoolDir pool = MakePool(cfg.stripefs, backing.workdir + "/" + name, cfg.spec);
    Report rep(name);
    const bool mounted = name.rfind("mount", 0) == 0;
    if (mounted) Mount(cfg.stripefs, pool, "ram_cache=s3fifo");
    {
      std::unique_ptr<Target> t;
      if (name == "engine") t = std::make_unique<EngineTarget>(pool.meta, "s3fifo");
      if (name == "engine-noram") t = std::make_unique<EngineTarget>(pool.meta, "off");
      if (name == "mount") t = std::make_unique<MountTarget>(pool.mnt, MountTarget::Mode::kOpenEach);
      if (name == "mount-fd") t = std::make_unique<MountTarget>(pool.mnt, MountTarget::Mode::kKeptOpen);
      if (name == "mount-direct") t = std::make_unique<MountTarget>(pool.mnt, MountTarget::Mode::kDirect);
      RunTarget(*t, plan, rep);
    }  // the pool is closed (or its fds) before it is unmounted and removed
    if (mounted) Unmount(pool);
    RemovePool(pool);
    rep.print(Describe(name, cfg));
    out["targets"].push_back(rep.as_json());
  }
  if (!cfg.json_path.empty()) {
    std::ofstream f(cfg.json_path);
    f << out.dump(2) << "\n";
    if (!f) Die("cannot write " + cfg.json_path);
  }
  fmt::print("\n- load average at the end: {:.2f}\n", LoadAverage());
  Cleanup();
  return 0;
}

}  // namespace
}  // namespace stripefs::bench

int main(int argc, char** argv) { return stripefs::bench::Main(argc, argv); }
