// SPDX-License-Identifier: Apache-2.0
// ycsb_bench: BENCHMARKS.md §4 (seed 004). The YCSB core workloads, written
// here in C++ after YCSB's CoreWorkload, against four targets in one run:
//
//   engine        the object API (stripefs/objects.h), RAM tier on (s3fifo,
//                 the whole RAM segment) with its write-back buffer: a put is
//                 held in RAM and stored by a timer (1 s), like RocksDB's
//                 memtable it is not on the drives when put returns
//   engine-noram  the object API, ram_cache "off" (no write-back buffer:
//                 every put is written to the drives and committed)
//   mount         a stripefs mount (RAM tier on), one file per record, plain
//                 syscalls: read = open + pread + close, update = open(O_TRUNC)
//                 + write + close, insert = open(O_CREAT|O_EXCL) + write + close
//   rocksdb       plain RocksDB in a directory on the same backing: default
//                 options plus a bloom filter (10 bits/key) and an LRU block
//                 cache as large as the RAM tier; WAL on, not synced (the
//                 engine does not sync each put either)
//
// As YCSB: recordcount records of one 1,024-byte field, keys "user" + the
// decimal FNV-1a 64 hash of the record number (insertorder=hashed); one client
// thread; the load inserts records 0..N-1 in order. The load and each
// workload end with a sync of the target, counted in their time. Workloads
// (operationcount operations each), run on one load per target in YCSB's recommended order
// A, B, C, F, D, E (D and E insert new records, numbered on from the last):
//   a  50 % read, 50 % update               scrambled zipfian (0.99)
//   b  95 % read,  5 % update               scrambled zipfian
//   c 100 % read                            scrambled zipfian
//   f  50 % read, 50 % read-modify-write    scrambled zipfian
//   d  95 % read,  5 % insert               latest (skewed towards new records)
//   e  95 % scan,  5 % insert               scrambled zipfian; scan length uniform 1..100
// The generators are YCSB's: ZipfianGenerator (Gray et al.) with constant
// 0.99, ScrambledZipfianGenerator (zipfian over 10^10 items, FNV-hashed into
// the key range, with YCSB's precomputed zeta), SkewedLatestGenerator, and
// the key chooser's redraw of numbers not yet inserted.
//
// Scans: the object store has no ordered index over names, but list() of a
// directory returns its names sorted. Records live in directories named by
// the first P digits of the key ("ycsb/123/user123..."), P chosen so that a
// directory holds about 100 records; name order inside a directory, then
// directory order, is exactly the keys' order (truncating to a prefix keeps
// order). A scan of K records from key k lists the directory holding k, reads
// the records named >= k in order, and goes on through the next directories
// until it has K. The mount does the same with readdir (sorted by the client),
// RocksDB with an iterator (Seek, Next).
//
// Every read checks the record's size and the record number stamped in its
// first 8 bytes. Latency: each operation timed alone (steady_clock); RunTime
// is the wall time of the run loop; Throughput = operations / RunTime.
// Everything is unmounted and removed at the end, on an error and on
// SIGINT/SIGTERM/SIGHUP.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/statistics.h>
#include <rocksdb/table.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "pool_fixture.h"
#include "stripefs/objects.h"

namespace stripefs::bench {
namespace {

using nlohmann::json;
constexpr size_t kFieldLength = 1024;  // fieldcount=1, fieldlength=1024 (the seed's settings)

// ---------------------------------------------------------------------------
// YCSB's generators (site.ycsb.generator), single-threaded.

// Utils.fnvhash64: FNV-1a over the 8 bytes of val, low byte first; Math.abs of the result.
uint64_t FnvHash64(uint64_t val) {
  uint64_t hash = 0xCBF29CE484222325ULL;
  for (int i = 0; i < 8; ++i) {
    hash ^= val & 0xff;
    val >>= 8;
    hash *= 1099511628211ULL;
  }
  const auto s = static_cast<int64_t>(hash);
  return static_cast<uint64_t>(s < 0 && s != INT64_MIN ? -s : s);
}

// CoreWorkload.buildKeyName with insertorder=hashed, zeropadding=1.
std::string KeyName(uint64_t keynum) { return "user" + std::to_string(FnvHash64(keynum)); }

// xoshiro256**: fast, and good enough for choosing keys and operations.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& w : s_) {
      seed += 0x9e3779b97f4a7c15ULL;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      w = z ^ (z >> 31);
    }
  }
  uint64_t next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0], s_[3] ^= s_[1], s_[1] ^= s_[2], s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  double next_double() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }      // [0, 1)
  uint64_t uniform(uint64_t lo, uint64_t hi) { return lo + next() % (hi - lo + 1); }  // [lo, hi]

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// ZipfianGenerator: items min..max, popularity ~ 1/rank^theta (Gray et al.,
// "Quickly Generating Billion-Record Synthetic Databases", SIGMOD'94).
class Zipfian {
 public:
  static constexpr double kTheta = 0.99;  // ZipfianGenerator.ZIPFIAN_CONSTANT

  Zipfian(uint64_t min, uint64_t max, double zetan = -1)
      : items_(max - min + 1), base_(min), zeta2theta_(Zeta(0, 2, 0)), alpha_(1.0 / (1.0 - kTheta)) {
    zetan_ = zetan >= 0 ? zetan : Zeta(0, items_, 0);
    count_for_zeta_ = items_;
    eta_ = Eta();
  }

  // nextLong(itemcount): itemcount may grow (the latest distribution).
  uint64_t next(Rng& rng, uint64_t itemcount) {
    if (itemcount > count_for_zeta_) {
      // YCSB extends zeta incrementally and recomputes eta with the original
      // item count (a quirk of the original, kept for fidelity).
      zetan_ = Zeta(count_for_zeta_, itemcount, zetan_);
      count_for_zeta_ = itemcount;
      eta_ = Eta();
    }
    const double u = rng.next_double();
    const double uz = u * zetan_;
    if (uz < 1.0) return base_;
    if (uz < 1.0 + std::pow(0.5, kTheta)) return base_ + 1;
    return base_ + static_cast<uint64_t>(static_cast<double>(itemcount) * std::pow(eta_ * u - eta_ + 1, alpha_));
  }
  uint64_t next(Rng& rng) { return next(rng, items_); }

 private:
  static double Zeta(uint64_t st, uint64_t n, double initial) {
    double sum = initial;
    for (uint64_t i = st; i < n; ++i) sum += 1.0 / std::pow(static_cast<double>(i + 1), kTheta);
    return sum;
  }
  double Eta() const {
    return (1 - std::pow(2.0 / static_cast<double>(items_), 1 - kTheta)) / (1 - zeta2theta_ / zetan_);
  }
  uint64_t items_, base_;
  double zeta2theta_, alpha_, zetan_ = 0, eta_ = 0;
  uint64_t count_for_zeta_ = 0;
};

// ScrambledZipfianGenerator: zipfian over 10^10 items, hashed into [min, max],
// so the popular records are spread over the key space.
class ScrambledZipfian {
 public:
  static constexpr uint64_t kItemCount = 10000000000ULL;
  static constexpr double kZetan = 26.46902820178302;  // zeta(10^10, 0.99), as YCSB precomputes it

  ScrambledZipfian(uint64_t min, uint64_t max) : min_(min), count_(max - min + 1), gen_(0, kItemCount, kZetan) {}
  uint64_t next(Rng& rng) { return min_ + FnvHash64(gen_.next(rng)) % count_; }

 private:
  uint64_t min_, count_;
  Zipfian gen_;
};

// SkewedLatestGenerator: the most recently inserted records are the most popular.
class SkewedLatest {
 public:
  // YCSB: new ZipfianGenerator(basis.lastValue()), i.e. items 0 .. last-1.
  explicit SkewedLatest(uint64_t last) : zipfian_(0, std::max<uint64_t>(last, 1) - 1) {}
  uint64_t next(Rng& rng, uint64_t last) { return last - zipfian_.next(rng, last); }

 private:
  Zipfian zipfian_;
};

// ---------------------------------------------------------------------------
// Records: 1,024 bytes, the record number in the first 8 so reads can be checked.

class Values {
 public:
  explicit Values(uint64_t seed) : pool_(kPool * kFieldLength, '\0') {
    Rng rng(seed);
    // YCSB's RandomByteIterator: printable bytes ' ' + (random & 63).
    for (char& c : pool_) c = static_cast<char>(' ' + (rng.next() & 63));
  }
  // A fresh value for record keynum (the tail rotates through a pool of random bytes).
  const std::string& make(uint64_t keynum) {
    value_.assign(pool_.data() + (next_++ % kPool) * kFieldLength, kFieldLength);
    std::memcpy(value_.data(), &keynum, sizeof keynum);
    return value_;
  }
  static void Check(const std::string& v, uint64_t keynum, const std::string& where) {
    uint64_t got = 0;
    if (v.size() == kFieldLength) std::memcpy(&got, v.data(), sizeof got);
    if (v.size() != kFieldLength || got != keynum) {
      Die(fmt::format("{}: record {} read back as {} bytes stamped {}", where, keynum, v.size(), got));
    }
  }
  static uint64_t Stamp(const std::string& v) {
    uint64_t got = 0;
    if (v.size() >= sizeof got) std::memcpy(&got, v.data(), sizeof got);
    return got;
  }

 private:
  static constexpr size_t kPool = 1024;
  std::string pool_, value_;
  uint64_t next_ = 0;
};

// ---------------------------------------------------------------------------
// Stores: the operations, per target.

struct CacheCounters {
  bool available = false;  // false: the target does not report them
  uint64_t capacity = 0, ios = 0, hits = 0, evictions = 0;
  bool evictions_known = true;
};

class Store {
 public:
  virtual ~Store() = default;
  virtual void insert(const std::string& key, const std::string& value) = 0;
  // False when the record does not exist.
  virtual bool read(const std::string& key, std::string* value) = 0;
  virtual void update(const std::string& key, const std::string& value) = 0;
  // Up to count records in key order from start (inclusive), values appended to out.
  virtual void scan(const std::string& start, size_t count, std::vector<std::string>* out) = 0;
  virtual CacheCounters cache() const = 0;
  virtual uint64_t cache_size() const = 0;  // bytes (0: no cache)
  // Makes everything loaded durable: the load ends with it, so no target
  // carries the load's unsynced work into the workloads.
  virtual void sync() = 0;
};

// Record key -> "ycsb/<first P digits>/<key>", so directory order then name order is key order.
class BucketedNames {
 public:
  explicit BucketedNames(int digits) : digits_(static_cast<size_t>(digits)) {}
  std::string bucket(const std::string& key) const { return key.substr(4, digits_); }
  std::string dir(const std::string& bucket) const { return "ycsb/" + bucket; }
  std::string path(const std::string& key) const { return dir(bucket(key)) + "/" + key; }

 private:
  size_t digits_;
};

class EngineStore final : public Store {
 public:
  EngineStore(const std::string& meta, const std::string& ram_cache, int digits) : names_(digits) {
    api::Options o;
    o.ram_cache = ram_cache;
    api::Error err;
    pool_ = api::ObjectPool::Open(meta, o, &err);
    if (!pool_) Die("ObjectPool::Open " + meta + ": " + err.message);
  }
  void insert(const std::string& key, const std::string& value) override {
    Check(pool_->put(names_.path(key), value), "put");
    buckets_.insert(names_.bucket(key));
  }
  bool read(const std::string& key, std::string* value) override {
    const api::Error e = pool_->get(names_.path(key), value);
    if (e.code == ENOENT) return false;
    Check(e, "get");
    return true;
  }
  void update(const std::string& key, const std::string& value) override {
    Check(pool_->put(names_.path(key), value), "put");
  }
  void scan(const std::string& start, size_t count, std::vector<std::string>* out) override {
    for (auto b = buckets_.lower_bound(names_.bucket(start)); b != buckets_.end() && out->size() < count; ++b) {
      const std::string dir = names_.dir(*b);
      Check(pool_->list(dir, &listing_), "list " + dir);
      auto it = std::lower_bound(listing_.begin(), listing_.end(), start);
      for (; it != listing_.end() && out->size() < count; ++it) {
        out->emplace_back();
        Check(pool_->get(dir + "/" + *it, &out->back()), "get");
      }
    }
  }
  CacheCounters cache() const override {
    const api::Stats s = pool_->stats();
    CacheCounters c;
    c.available = s.cache_capacity > 0;
    c.capacity = s.cache_capacity;
    c.ios = s.cache_hits + s.cache_misses;
    c.hits = s.cache_hits;
    c.evictions = s.cache_evictions;
    return c;
  }
  uint64_t cache_size() const override { return pool_->stats().cache_capacity; }
  void sync() override { Check(pool_->sync(), "sync"); }

 private:
  static void Check(const api::Error& e, const std::string& what) {
    if (e) Die(what + ": " + e.message);
  }
  std::unique_ptr<api::ObjectPool> pool_;
  BucketedNames names_;
  // The directories under ycsb/, sorted: what list("ycsb") returns, kept as
  // records are inserted (every insert goes through this store).
  std::set<std::string> buckets_;
  std::vector<std::string> listing_;
};

class MountStore final : public Store {
 public:
  MountStore(const std::string& mnt, uint64_t ram, int digits) : names_(digits), ram_(ram) {
    root_ = open(mnt.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_ < 0) DieErrno("open " + mnt);
    if (mkdirat(root_, "ycsb", 0755) != 0 && errno != EEXIST) DieErrno("mkdir ycsb");
  }
  ~MountStore() override { close(root_); }
  void sync() override {
    if (syncfs(root_) != 0) DieErrno("syncfs");
  }

  void insert(const std::string& key, const std::string& value) override {
    const std::string b = names_.bucket(key);
    if (buckets_.insert(b).second) {
      if (mkdirat(root_, names_.dir(b).c_str(), 0755) != 0 && errno != EEXIST) DieErrno("mkdir " + names_.dir(b));
    }
    Write(names_.path(key), value, O_CREAT | O_EXCL);
  }
  bool read(const std::string& key, std::string* value) override { return ReadFile(names_.path(key), value); }
  void update(const std::string& key, const std::string& value) override { Write(names_.path(key), value, O_TRUNC); }
  void scan(const std::string& start, size_t count, std::vector<std::string>* out) override {
    for (auto b = buckets_.lower_bound(names_.bucket(start)); b != buckets_.end() && out->size() < count; ++b) {
      const std::string dir = names_.dir(*b);
      List(dir);
      auto it = std::lower_bound(listing_.begin(), listing_.end(), start);
      for (; it != listing_.end() && out->size() < count; ++it) {
        out->emplace_back();
        if (!ReadFile(dir + "/" + *it, &out->back())) Die("scan: " + *it + " vanished");
      }
    }
  }
  // The daemon's RAM tier, from the stats it answers on the mountpoint
  // (`stripefs stats --json`). Reads served by the kernel's page cache never
  // reach it, so its lookups count only the reads the daemon served.
  CacheCounters cache() const override {
    std::string v(64 << 10, '\0');
    const ssize_t n = fgetxattr(root_, "user.stripefs.stats", v.data(), v.size());
    if (n < 0) return {};
    const json j = json::parse(v.substr(0, static_cast<size_t>(n)), nullptr, false);
    if (j.is_discarded() || !j.contains("cache")) return {};
    const json& c = j["cache"];
    CacheCounters out;
    out.available = c.value("capacity", uint64_t{0}) > 0;
    out.capacity = c.value("capacity", uint64_t{0});
    out.hits = c.value("hits", uint64_t{0});
    out.ios = out.hits + c.value("misses", uint64_t{0});
    out.evictions = c.value("evictions", uint64_t{0});
    return out;
  }
  uint64_t cache_size() const override { return ram_; }

 private:
  void Write(const std::string& path, const std::string& value, int flags) {
    const int fd = openat(root_, path.c_str(), O_WRONLY | O_CLOEXEC | flags, 0644);
    if (fd < 0) DieErrno("open " + path);
    if (write(fd, value.data(), value.size()) != static_cast<ssize_t>(value.size())) DieErrno("write " + path);
    if (close(fd) != 0) DieErrno("close " + path);
  }
  bool ReadFile(const std::string& path, std::string* value) {
    const int fd = openat(root_, path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return false;
      DieErrno("open " + path);
    }
    // One byte more than a record: a short count proves the end of the file.
    value->resize(kFieldLength + 1);
    const ssize_t n = pread(fd, value->data(), value->size(), 0);
    if (n < 0) DieErrno("pread " + path);
    value->resize(static_cast<size_t>(n));
    close(fd);
    return true;
  }
  void List(const std::string& dir) {
    const int fd = openat(root_, dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) DieErrno("open " + dir);
    DIR* d = fdopendir(fd);
    if (!d) DieErrno("fdopendir " + dir);
    listing_.clear();
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') listing_.emplace_back(e->d_name);
    }
    closedir(d);
    std::sort(listing_.begin(), listing_.end());
  }

  int root_;
  BucketedNames names_;
  uint64_t ram_;
  std::set<std::string> buckets_;
  std::vector<std::string> listing_;
};

class RocksStore final : public Store {
 public:
  RocksStore(const std::string& dir, uint64_t block_cache) : block_cache_(block_cache) {
    rocksdb::Options options;
    options.create_if_missing = true;
    options.statistics = rocksdb::CreateDBStatistics();
    options.statistics->set_stats_level(rocksdb::StatsLevel::kExceptHistogramOrTimers);  // tickers only
    rocksdb::BlockBasedTableOptions table;
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
    table.block_cache = rocksdb::NewLRUCache(block_cache);
    options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    rocksdb::DB* db = nullptr;
    const rocksdb::Status s = rocksdb::DB::Open(options, dir, &db);
    if (!s.ok()) Die("RocksDB open " + dir + ": " + s.ToString());
    db_.reset(db);
    stats_ = options.statistics;
    write_.sync = false;  // the default, stated: the WAL is written, not synced, per put
  }
  ~RocksStore() override { db_->Close().PermitUncheckedError(); }
  void sync() override { Check(db_->SyncWAL(), "SyncWAL"); }

  void insert(const std::string& key, const std::string& value) override { Check(db_->Put(write_, key, value), "put"); }
  bool read(const std::string& key, std::string* value) override {
    const rocksdb::Status s = db_->Get(read_, key, value);
    if (s.IsNotFound()) return false;
    Check(s, "get");
    return true;
  }
  void update(const std::string& key, const std::string& value) override { Check(db_->Put(write_, key, value), "put"); }
  void scan(const std::string& start, size_t count, std::vector<std::string>* out) override {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read_));
    for (it->Seek(start); it->Valid() && out->size() < count; it->Next()) out->emplace_back(it->value().ToString());
    Check(it->status(), "scan");
  }
  CacheCounters cache() const override {
    CacheCounters c;
    c.available = true;
    c.capacity = block_cache_;
    c.hits = stats_->getTickerCount(rocksdb::BLOCK_CACHE_DATA_HIT);
    c.ios = c.hits + stats_->getTickerCount(rocksdb::BLOCK_CACHE_DATA_MISS);
    c.evictions_known = false;  // RocksDB counts no block cache evictions
    return c;
  }
  uint64_t cache_size() const override { return block_cache_; }

 private:
  static void Check(const rocksdb::Status& s, const std::string& what) {
    if (!s.ok()) Die("RocksDB " + what + ": " + s.ToString());
  }
  std::unique_ptr<rocksdb::DB> db_;
  std::shared_ptr<rocksdb::Statistics> stats_;
  rocksdb::ReadOptions read_;
  rocksdb::WriteOptions write_;
  uint64_t block_cache_;
};

// ---------------------------------------------------------------------------
// Workloads.

struct Workload {
  char name;
  double read = 0, update = 0, insert = 0, scan = 0, rmw = 0;
  bool latest = false;  // requestdistribution=latest (else zipfian)
};

const std::vector<Workload>& CoreWorkloads() {
  // YCSB's recommended order: A, B, C, F, D, E.
  static const std::vector<Workload> w = {
      {'a', 0.50, 0.50, 0, 0, 0, false}, {'b', 0.95, 0.05, 0, 0, 0, false}, {'c', 1.00, 0, 0, 0, 0, false},
      {'f', 0.50, 0, 0, 0, 0.50, false}, {'d', 0.95, 0, 0.05, 0, 0, true},  {'e', 0, 0, 0.05, 0.95, 0, false},
  };
  return w;
}

constexpr uint64_t kMaxScanLength = 100;  // maxscanlength; scanlengthdistribution=uniform

// The operations, as YCSB names them in its per-operation figures.
enum class Op { kRead, kUpdate, kInsert, kScan, kReadModifyWrite };
constexpr std::array<const char*, 5> kOpNames = {"READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE"};

struct Measured {
  uint64_t ops = 0, sum_ns = 0, min_ns = UINT64_MAX, max_ns = 0;
  std::array<uint64_t, 5> ops_by_op{}, sum_ns_by_op{};  // indexed by Op: which kind of operation the time went to
  double run_ms = 0;
  double sync_ms = 0;  // the part of run_ms spent in the closing sync
  CacheCounters cache_before, cache_after;
  std::vector<uint64_t> samples_ns;  // for the percentiles in the JSON (YCSB prints them too)
  void add(Op op, uint64_t ns) {
    ++ops;
    sum_ns += ns;
    min_ns = std::min(min_ns, ns);
    max_ns = std::max(max_ns, ns);
    samples_ns.push_back(ns);
    ++ops_by_op[static_cast<size_t>(op)];
    sum_ns_by_op[static_cast<size_t>(op)] += ns;
  }
};

// The client: the record count, the insert sequence and the value source, across workloads.
class Client {
 public:
  Client(Store& store, uint64_t seed) : store_(store), rng_(seed), values_(seed ^ 0x5943534200000000ULL) {}

  Measured load(uint64_t records) {
    Measured m;
    m.cache_before = store_.cache();
    const auto start = Clock::now();
    for (uint64_t k = 0; k < records; ++k) {
      const std::string key = KeyName(k);
      const std::string& v = values_.make(k);
      const auto t0 = Clock::now();
      store_.insert(key, v);
      m.add(Op::kInsert, NsSince(t0, Clock::now()));
    }
    m.sync_ms = timed_sync();
    m.run_ms = static_cast<double>(NsSince(start, Clock::now())) / 1e6;
    m.cache_after = store_.cache();
    next_insert_ = records;
    return m;
  }

  Measured run(const Workload& w, uint64_t operations, double max_seconds) {
    // CoreWorkload.init: the key chooser covers the records and the inserts to come.
    const uint64_t expected_new = static_cast<uint64_t>(static_cast<double>(operations) * w.insert * 2.0);
    ScrambledZipfian zipf(0, next_insert_ - 1 + expected_new);
    SkewedLatest latest(next_insert_ - 1);
    Measured m;
    m.cache_before = store_.cache();
    const auto start = Clock::now();
    const auto deadline =
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(max_seconds));
    for (uint64_t i = 0; i < operations; ++i) {
      if (max_seconds > 0 && (i & 1023) == 0 && Clock::now() > deadline) break;  // YCSB's maxexecutiontime
      one_operation(w, zipf, latest, m);
    }
    // What the workload wrote is stored before its time stops, as after the
    // load: otherwise a target that buffers writes (the engine's write-back
    // buffer, RocksDB's memtable and WAL) would leave that work to the next
    // workload, whose figures would then measure both.
    m.sync_ms = timed_sync();
    m.run_ms = static_cast<double>(NsSince(start, Clock::now())) / 1e6;
    m.cache_after = store_.cache();
    return m;
  }

 private:
  // Syncs the target; the milliseconds it took.
  double timed_sync() {
    const auto start = Clock::now();
    store_.sync();
    return static_cast<double>(NsSince(start, Clock::now())) / 1e6;
  }

  // CoreWorkload.nextKeynum: redraw numbers not inserted yet.
  uint64_t next_keynum(const Workload& w, ScrambledZipfian& zipf, SkewedLatest& latest) {
    const uint64_t last = next_insert_ - 1;
    if (w.latest) return latest.next(rng_, last);
    uint64_t k;
    do {
      k = zipf.next(rng_);
    } while (k > last);
    return k;
  }

  void one_operation(const Workload& w, ScrambledZipfian& zipf, SkewedLatest& latest, Measured& m) {
    double r = rng_.next_double();
    if ((r -= w.read) < 0) {
      const uint64_t k = next_keynum(w, zipf, latest);
      const std::string key = KeyName(k);
      const auto t0 = Clock::now();
      const bool found = store_.read(key, &buf_);
      m.add(Op::kRead, NsSince(t0, Clock::now()));
      if (!found) Die(fmt::format("read: record {} ({}) not found", k, key));
      Values::Check(buf_, k, "read");
    } else if ((r -= w.update) < 0) {
      const uint64_t k = next_keynum(w, zipf, latest);
      const std::string key = KeyName(k);
      const std::string& v = values_.make(k);
      const auto t0 = Clock::now();
      store_.update(key, v);
      m.add(Op::kUpdate, NsSince(t0, Clock::now()));
    } else if ((r -= w.insert) < 0) {
      const uint64_t k = next_insert_;
      const std::string key = KeyName(k);
      const std::string& v = values_.make(k);
      const auto t0 = Clock::now();
      store_.insert(key, v);
      m.add(Op::kInsert, NsSince(t0, Clock::now()));
      ++next_insert_;  // acknowledged: readable from now on
    } else if ((r -= w.scan) < 0) {
      const uint64_t k = next_keynum(w, zipf, latest);
      const std::string key = KeyName(k);
      const uint64_t len = rng_.uniform(1, kMaxScanLength);
      scanned_.clear();
      const auto t0 = Clock::now();
      store_.scan(key, len, &scanned_);
      m.add(Op::kScan, NsSince(t0, Clock::now()));
      if (scanned_.empty() || Values::Stamp(scanned_.front()) != k)
        Die(fmt::format("scan from {} did not start there", key));
      for (const std::string& v : scanned_) {
        if (v.size() != kFieldLength) Die("scan: a record of " + std::to_string(v.size()) + " bytes");
      }
    } else {  // read-modify-write: one operation, timed whole
      const uint64_t k = next_keynum(w, zipf, latest);
      const std::string key = KeyName(k);
      const std::string& v = values_.make(k);
      const auto t0 = Clock::now();
      const bool found = store_.read(key, &buf_);
      if (found) store_.update(key, v);
      m.add(Op::kReadModifyWrite, NsSince(t0, Clock::now()));
      if (!found) Die(fmt::format("read-modify-write: record {} not found", k));
    }
  }

  Store& store_;
  Rng rng_;
  Values values_;
  uint64_t next_insert_ = 0;
  std::string buf_;
  std::vector<std::string> scanned_;
};

// ---------------------------------------------------------------------------
// Output.

std::string CacheStatsCell(const Measured& m) {
  if (!m.cache_after.available) return "n/a";
  const uint64_t ios = m.cache_after.ios - m.cache_before.ios;
  const uint64_t hits = m.cache_after.hits - m.cache_before.hits;
  if (!m.cache_after.evictions_known) return fmt::format("{}, {}, n/a", ios, hits);
  return fmt::format("{}, {}, {}", ios, hits, m.cache_after.evictions - m.cache_before.evictions);
}

std::string Fixed(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }

json RowJson(const std::string& workload, const std::string& target, const Measured& m, uint64_t cache_size) {
  const double avg = m.ops ? static_cast<double>(m.sum_ns) / static_cast<double>(m.ops) / 1000.0 : 0;
  const Summary s = Summarize(m.samples_ns);
  json by_op = json::object();  // YCSB's [READ], [INSERT], ... AverageLatency(us), for the kinds this run made
  for (size_t i = 0; i < kOpNames.size(); ++i) {
    if (m.ops_by_op[i]) {
      by_op[kOpNames[i]] = {{"operations", m.ops_by_op[i]},
                            {"avg_us", static_cast<double>(m.sum_ns_by_op[i]) / static_cast<double>(m.ops_by_op[i]) / 1000.0}};
    }
  }
  return {{"workload", workload},
          {"by_operation", by_op},
          {"p50_us", s.p50_us},
          {"p90_us", s.p90_us},
          {"p99_us", s.p99_us},
          {"target", target},
          {"operations", m.ops},
          {"runtime_ms", m.run_ms},
          {"sync_ms", m.sync_ms},
          {"throughput", m.run_ms > 0 ? static_cast<double>(m.ops) / (m.run_ms / 1000.0) : 0},
          {"avg_us", avg},
          {"min_us", m.ops ? static_cast<double>(m.min_ns) / 1000.0 : 0},
          {"max_us", static_cast<double>(m.max_ns) / 1000.0},
          {"cache_size", cache_size},
          {"cache_stats", CacheStatsCell(m)}};
}

void PrintRow(const json& r) {
  const uint64_t cache = r["cache_size"].get<uint64_t>();
  fmt::print("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", r["workload"].get<std::string>(),
             r["target"].get<std::string>(), Fixed(r["runtime_ms"].get<double>(), 1),
             Fixed(r["throughput"].get<double>(), 2), Fixed(r["avg_us"].get<double>(), 2),
             Fixed(r["min_us"].get<double>(), 2), Fixed(r["max_us"].get<double>(), 1), cache ? Bytes(cache) : "0",
             r["cache_stats"].get<std::string>());
}

void PrintHeader() {
  fmt::print(
      "| Workload | Target | RunTime(ms) | Throughput(ops/sec) | AvgLat(us) | MinLat(us) | MaxLat(us) | Cache Size | "
      "Cache Stats (ios, hits, evictions) |\n|---|---|---:|---:|---:|---:|---:|---:|---|\n");
}

// ---------------------------------------------------------------------------

struct Config {
  uint64_t records = 1000000, operations = 1000000;
  std::string backing = "tmpfs", dir, stripefs, json_path;
  std::vector<std::string> targets = {"engine", "engine-noram", "mount", "rocksdb"};
  std::string workloads = "abcfde";
  uint64_t seed = 42;
  double max_seconds = 0;
  PoolSpec spec;
};

// Directory prefix digits: about 100 records per directory.
int BucketDigits(uint64_t records) {
  const double d = std::floor(std::log10(std::max<double>(static_cast<double>(records) / 100.0, 1.0)) + 0.5);
  return std::clamp(static_cast<int>(d), 1, 6);
}

std::unique_ptr<Store> OpenStore(const std::string& target, const Config& cfg, const PoolDir& pool, int digits) {
  if (target == "engine") return std::make_unique<EngineStore>(pool.meta, "s3fifo", digits);
  if (target == "engine-noram") return std::make_unique<EngineStore>(pool.meta, "off", digits);
  if (target == "mount") return std::make_unique<MountStore>(pool.mnt, cfg.spec.ram, digits);
  return std::make_unique<RocksStore>(pool.dir + "/rocksdb", cfg.spec.ram);
}

// Loads the target, runs every workload; appends the rows and the load row.
void RunTarget(const std::string& target, const Config& cfg, const Backing& backing, json* rows, json* loads) {
  const int digits = BucketDigits(cfg.records);
  const bool pool_target = target != "rocksdb";
  PoolDir pool{backing.workdir + "/" + target, "", ""};
  if (pool_target) {
    pool = MakePool(cfg.stripefs, pool.dir, cfg.spec);
  } else {
    std::filesystem::create_directories(pool.dir);
  }
  if (target == "mount") Mount(cfg.stripefs, pool, "ram_cache=s3fifo");
  {
    std::unique_ptr<Store> store = OpenStore(target, cfg, pool, digits);
    Client client(*store, cfg.seed);
    fmt::print(stderr, "{}: loading {} records\n", target, cfg.records);
    const Measured l = client.load(cfg.records);
    loads->push_back(RowJson("load", target, l, store->cache_size()));
    for (const Workload& w : CoreWorkloads()) {
      if (cfg.workloads.find(w.name) == std::string::npos) continue;
      const Measured m = client.run(w, cfg.operations, cfg.max_seconds);
      json r = RowJson(std::string(1, w.name), target, m, store->cache_size());
      std::string by_op;
      for (const auto& [op, v] : r["by_operation"].items()) {
        by_op += fmt::format(", {} {:.2f} us", op, v["avg_us"].get<double>());
      }
      fmt::print(stderr,
                 "{} {}: {:.0f} ops/s, avg {:.2f} us{}, p50 {:.2f} p99 {:.2f}, closing sync {:.1f} ms ({} ops, load "
                 "average {:.2f})\n",
                 target, w.name, r["throughput"].get<double>(), r["avg_us"].get<double>(), by_op,
                 r["p50_us"].get<double>(), r["p99_us"].get<double>(), m.sync_ms, m.ops, LoadAverage());
      rows->push_back(std::move(r));
    }
    const auto closing = Clock::now();
    store.reset();  // closed before its unmount
    fmt::print(stderr, "{}: closed in {:.2f} s\n", target,
               static_cast<double>(NsSince(closing, Clock::now())) / 1e9);
  }
  if (target == "mount") Unmount(pool);
  RemovePool(pool);
}

int Main(int argc, char** argv) {
  InitBench("ycsb_bench");
  Config cfg;
  bool quick = false;
  uint64_t records = 0, operations = 0;
  std::string ram_text, drive_text;
  CLI::App app{
      "ycsb_bench (BENCHMARKS.md §4, seed 004): YCSB core workloads A-F (zipfian 0.99, one 1,024-byte "
      "field) on the object API (RAM tier on and off), a stripefs mount and plain RocksDB"};
  app.add_flag("--quick", quick,
               "100,000 records and 100,000 operations per workload, each workload stopped after 60 s "
               "(default: 1,000,000 each, no time limit)");
  app.add_option("--records", records, "recordcount (overrides --quick)");
  app.add_option("--operations", operations, "operationcount per workload (overrides --quick)");
  app.add_option("--targets", cfg.targets, "Targets, comma-separated")
      ->delimiter(',')
      ->check(CLI::IsMember({"engine", "engine-noram", "mount", "rocksdb"}))
      ->capture_default_str();
  app.add_option("--workloads", cfg.workloads, "Workloads to run, in YCSB's order (letters of abcfde)")
      ->capture_default_str();
  app.add_option("--backing", cfg.backing, "Where pools and the RocksDB live: tmpfs (/dev/shm) or disk (/var/tmp)")
      ->check(CLI::IsMember({"tmpfs", "disk"}))
      ->capture_default_str();
  app.add_option("--dir", cfg.dir, "Make the work directory here instead of /dev/shm or /var/tmp");
  app.add_option("--ram", ram_text,
                 "RAM segment (the RAM tier's capacity; also RocksDB's block cache). Default: 512M, or enough for "
                 "twice the records");
  app.add_option("--drive-size", drive_text, "Size of each of the 4 sparse drive files (default: see the header)");
  double max_seconds = -1;
  app.add_option(
      "--max-seconds", max_seconds,
      "Stop a workload after this long (YCSB's maxexecutiontime; 0: never; default 60 with --quick, else 0)");
  app.add_option("--seed", cfg.seed, "Seed of the key and operation choices")->capture_default_str();
  app.add_option("--stripefs", cfg.stripefs, "stripefs binary (default: $STRIPEFS, else build/tools/stripefs)");
  app.add_option("--json", cfg.json_path, "Also write every row to this file");
  CLI11_PARSE(app, argc, argv);
  if (quick) cfg.records = cfg.operations = 100000;
  // The mount's scans (E) take minutes at 100,000 operations; the rest finish well within the limit.
  cfg.max_seconds = max_seconds >= 0 ? max_seconds : quick ? 60 : 0;
  if (records) cfg.records = records;
  if (operations) cfg.operations = operations;
  if (cfg.records < 2) Die("--records must be at least 2");
  for (char c : cfg.workloads) {
    if (std::string("abcdef").find(c) == std::string::npos) Die(fmt::format("--workloads: no workload '{}'", c));
  }
  cfg.stripefs = FindStripefs(cfg.stripefs);

  // Records at the end: the load plus D's and E's inserts (5 % each).
  const uint64_t final_records = cfg.records + cfg.operations / 10 + 1;
  // RAM tier: every record's chunk (1 KiB) twice over, at least 512 MiB.
  cfg.spec.ram = ram_text.empty()
                     ? std::max<uint64_t>(512 * kMiB, (final_records * 2 * kFieldLength + kMiB - 1) / kMiB * kMiB)
                     : ParseSize(ram_text, "--ram");
  // Drives: the object API keeps a whole chunk (4 MiB) reserved for each
  // object it writes (it never gives back the unused part, which a mount does
  // on close), and a replaced record takes a new chunk until the next sync
  // frees the old one. The drive files are sparse, so this costs address space
  // only: 4 MiB per record at the end, plus a quarter for replacements.
  const uint64_t reserved = final_records * 4 * kMiB * 5 / 4;
  cfg.spec.drive_size = drive_text.empty()
                            ? std::max<uint64_t>(16 * kGiB, (reserved / cfg.spec.drives + kGiB - 1) / kGiB * kGiB)
                            : ParseSize(drive_text, "--drive-size");

  const Backing backing = MakeBacking(cfg.backing, cfg.dir, "ycsb_bench");
  fmt::print(
      "# ycsb_bench: recordcount {}, operationcount {}, fieldcount 1, fieldlength {}, zipfian 0.99, 1 client "
      "thread\n\n",
      cfg.records, cfg.operations, kFieldLength);
  fmt::print("- machine: {}\n", MachineLine());
  fmt::print("- backing: {} — {}\n", cfg.backing, backing.describe());
  fmt::print(
      "- stripefs pools: `stripefs mkfs` with {} sparse drive files of {}, a {} RAM segment (the RAM tier: "
      "s3fifo, whole RAM segment; engine: puts <= 256 KiB held in its write-back buffer, stored every 1 s), "
      "default 4 MiB chunks, 1 replica; one pool per target; {}\n",
      cfg.spec.drives, Bytes(cfg.spec.drive_size), Bytes(cfg.spec.ram), cfg.stripefs);
  fmt::print("- rocksdb: default options + bloom filter 10 bits/key + LRU block cache {}; WAL not synced per put\n",
             Bytes(cfg.spec.ram));
  fmt::print("- records in directories by the first {} digits of the key (scans: see the file header)\n",
             BucketDigits(cfg.records));
  fmt::print(
      "- the load and every workload end with a sync of the target (engine: sync(); mount: syncfs; rocksdb: "
      "SyncWAL), counted in its time, so no workload inherits another's buffered writes\n");
  if (cfg.max_seconds > 0) fmt::print("- each workload stops after {} s (maxexecutiontime)\n", cfg.max_seconds);
  std::fflush(stdout);

  json rows = json::array(), loads = json::array();
  for (const std::string& t : cfg.targets) RunTarget(t, cfg, backing, &rows, &loads);

  fmt::print("\n## Load ({} records)\n\n", cfg.records);
  PrintHeader();
  for (const json& r : loads) PrintRow(r);
  fmt::print("\n## Workloads ({} operations each)\n\n", cfg.operations);
  PrintHeader();
  // Grouped by workload, targets side by side, in YCSB's run order.
  for (const Workload& w : CoreWorkloads()) {
    for (const json& r : rows) {
      if (r["workload"] == std::string(1, w.name)) PrintRow(r);
    }
  }
  for (const json& r : rows) {
    if (r["operations"].get<uint64_t>() < cfg.operations) {
      fmt::print("\n- {} {} stopped after {} operations (--max-seconds)\n", r["workload"].get<std::string>(),
                 r["target"].get<std::string>(), r["operations"].get<uint64_t>());
    }
  }
  fmt::print(
      "\n- Cache Stats: during the run, the RAM tier's lookups, hits and evictions (engine; mount: the "
      "daemon's, from `stripefs stats`, so only reads the kernel's page cache did not answer); RocksDB's data "
      "block cache lookups and hits (it counts no evictions)\n- load average at the end: {:.2f}\n",
      LoadAverage());
  if (!cfg.json_path.empty()) {
    std::ofstream f(cfg.json_path);
    f << json{{"records", cfg.records},
              {"operations", cfg.operations},
              {"backing", cfg.backing},
              {"workdir", backing.workdir},
              {"fs_type", backing.fs_type},
              {"ram", cfg.spec.ram},
              {"drive_size", cfg.spec.drive_size},
              {"machine", MachineLine()},
              {"load", loads},
              {"rows", rows}}
             .dump(2)
      << "\n";
    if (!f) Die("cannot write " + cfg.json_path);
  }
  Cleanup();
  return 0;
}

}  // namespace
}  // namespace stripefs::bench

int main(int argc, char** argv) { return stripefs::bench::Main(argc, argv); }
