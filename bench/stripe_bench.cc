// SPDX-License-Identifier: Apache-2.0
// stripe_bench: BENCHMARKS.md §2 (seed 002). Stores and loads objects of 2, 14
// and 16 MiB, 64 in flight, through the engine's object API (FormatPool,
// Pool::Open(kMount), Namespace::create, ObjectStore::object/write/read; no
// FUSE) on N drive files, for two layouts, beside fio's raw bandwidth on the
// same drive files measured in the same run:
//   round-robin  chunk i on drive i mod N: every object starts on drive 0
//                (the layout the seed's fix replaced, "old");
//   striped      chunk i on drive (H(uri) + i) mod N: hash start ("new").
//
// One measurement of a (layout, object size) cell, all in one pool:
//   untimed: create the objects' inodes (regular files with that strategy),
//            make sure the drive range they will occupy was written once
//            (first writes to a sparse file cost block or page allocation that
//            neither fio nor a long-lived pool pays), stamp every 4 KiB block
//            of the source buffers with (measurement, object, block);
//   timed:   store: ObjectStore::write of every whole object;
//   untimed: ObjectStore::sync (timed separately, reported in the JSON);
//   timed:   load: ObjectStore::read of every whole object into its own buffer;
//   untimed: compare every loaded byte with its source, check every chunk sits
//            on the drive its layout names (no spill to another drive), unlink
//            and reclaim the objects, sync, and check the drives are empty again.
// Objects keep their ObjectStore::Object from store to load, as an open file
// does: a load does not re-read the chunk records from RocksDB.
//
// "64 in flight": ObjectStore::write and ::read are synchronous, one object per
// call; a call hands every chunk of its object to IoBackend::run at once and
// waits for all of them. So the objects in flight are the threads inside the
// engine: 64 worker threads (--threads) keep 64 objects in flight, i.e. 64
// (2 MiB) to 256 (16 MiB: 4 chunks each) chunk I/Os queued. A few threads
// would keep a few objects in flight, not more chunks per object. On a 2-core
// machine most of the 64 wait for I/O; --threads 8 shows what the
// oversubscription costs. The timed part does nothing but hand out object
// indexes (an atomic counter): sources are stamped and destinations faulted in
// beforehand, and every object has its own 4 KiB-aligned source and
// destination, so write() and read() take the caller's bytes as they are.
//
// fio: --direct=1 when the backing accepts O_DIRECT (else buffered, and the
// header says so), bs = chunk size, 64 in flight over the N files, time based,
// over a preconditioned range that starts where the pool's data area starts
// (the superblocks are never touched; the pool is empty whenever fio runs):
//   io_uring  one job per file, iodepth 64/N, sequential (the % columns);
//   psync     64/N jobs per file, each sequential over its own slice: the
//             same 64 in flight from 64 submitters, as the engine's threads
//             (on a virtio disk this writes faster than one io_uring per file).
// The object buffers are 4 KiB pages, as fio's (--hugepages for THP).
//
// Every figure is the median of --runs runs; the cells' runs and fio's runs
// are shuffled together with a std::mt19937_64 seeded by --seed. MB/s is 10^6
// bytes per second, as fio's bw_bytes. Beside MB/s, each measurement records
// the process's CPU seconds per GB (fio's from wait4, io_uring workers
// included) and how idle the machine was (/proc/stat): on a shared machine
// CPU per byte moves less than MB/s. The work directory (drive files and
// metadata) is a new directory under --dir, removed at the end, on an error
// and on SIGINT/SIGTERM/SIGHUP.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <spawn.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <linux/magic.h>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/placement/placement.h"
#include "engine/pool/pool.h"
#include "meta/namespace.h"
#include "meta/schema.h"

extern char** environ;

namespace stripefs::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr uint64_t kMiB = 1ULL << 20;
constexpr uint64_t kBlock = meta::kBlockSize;
constexpr int kInFlight = 64;                 // objects in flight, and fio's total queue depth
constexpr uint64_t kPreconditionStep = 64 * kMiB;
constexpr uint64_t kStampMagic = 0x5354524950454253ULL;  // "STRIPEBS"

const char* const kLayouts[] = {"round-robin", "striped"};

// ---------------------------------------------------------------------------
// Cleanup: the work directory goes away on every way out.

struct CleanupState {
  std::mutex mu;
  std::string workdir;   // removed entirely
  std::string made_dir;  // --dir, when this run created it: removed if empty
  std::atomic<pid_t> child{0};
};

CleanupState& Cleanup() {
  static CleanupState* state = new CleanupState;  // never destroyed: used by the signal thread at any time
  return *state;
}

void RemoveWorkdir() {
  CleanupState& c = Cleanup();
  std::lock_guard lock(c.mu);
  std::error_code ec;
  if (!c.workdir.empty()) {
    fs::remove_all(c.workdir, ec);
    if (ec) fmt::print(stderr, "stripe_bench: cannot remove {}: {}\n", c.workdir, ec.message());
    c.workdir.clear();
  }
  if (!c.made_dir.empty()) {
    fs::remove(c.made_dir, ec);  // only if empty
    c.made_dir.clear();
  }
}

// Exits without running destructors: the pool's RocksDB threads may still be running.
[[noreturn]] void Die(const std::string& what) {
  std::fflush(stdout);
  fmt::print(stderr, "stripe_bench: {}\n", what);
  RemoveWorkdir();
  std::fflush(stderr);
  _exit(1);
}

void Check(const Status& s, const std::string& what) {
  if (!s.ok()) Die(fmt::format("{}: {}", what, s.message()));
}

template <typename T>
T Take(Result<T> r, const std::string& what) {
  if (!r.ok()) Die(fmt::format("{}: {}", what, r.status().message()));
  return std::move(r).value();
}

// Signals are blocked in every thread and taken by one thread that stops fio,
// removes the work directory and exits.
void StartSignalThread() {
  static sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([] {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) return;
    if (pid_t child = Cleanup().child.load(); child > 0) kill(child, SIGTERM);
    fmt::print(stderr, "stripe_bench: signal {}: cleaning up\n", sig);
    RemoveWorkdir();
    _exit(128 + sig);
  }).detach();
}

// ---------------------------------------------------------------------------
// Small helpers.

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// User + system CPU seconds of this process so far, every thread included
// (io_uring's kernel workers are threads of the process that submitted).
double CpuSeconds() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  auto s = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

// Jiffies of the whole machine from /proc/stat: {idle (idle + iowait), total}.
std::pair<uint64_t, uint64_t> MachineJiffies() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  uint64_t v[10] = {0}, total = 0;
  in >> cpu;
  for (auto& x : v) {
    in >> x;
    total += x;
  }
  return {v[3] + v[4], total};
}

// Share of the machine's CPU time that was idle between two MachineJiffies().
double IdleShare(std::pair<uint64_t, uint64_t> a, std::pair<uint64_t, uint64_t> b) {
  return b.second > a.second ? static_cast<double>(b.first - a.first) / static_cast<double>(b.second - a.second) : 0;
}

double LoadAverage() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string Bytes(uint64_t b) {
  if (b >= (1ULL << 30) && b % (1ULL << 30) == 0) return fmt::format("{} GiB", b >> 30);
  if (b >= (1ULL << 30)) return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1ULL << 30));
  if (b % kMiB == 0) return fmt::format("{} MiB", b / kMiB);
  return fmt::format("{:.1f} MiB", static_cast<double>(b) / kMiB);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Anonymous memory, page-aligned (so 4 KiB-aligned), faulted in by the caller
// before any timing. 4 KiB pages unless huge: fio's buffers are 4 KiB pages,
// and the page size changes O_DIRECT costs (a 4 MiB request from 4 KiB pages
// has 1024 segments, which a virtio disk with max_segments 254 takes as 5
// requests; from 2 MiB pages it has 2).
class Region {
 public:
  explicit Region(size_t n, bool huge = false) : size_(std::max<size_t>(n, kBlock)) {
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) Die(fmt::format("mmap of {} bytes: {}", size_, std::strerror(errno)));
    madvise(p, size_, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);  // a hint only
    data_ = static_cast<char*>(p);
  }
  ~Region() { munmap(data_, size_); }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  size_t size_;
  char* data_;
};

// Pseudo-random bytes, so a chunk landing at the wrong offset or drive never
// compares equal by accident.
void FillPattern(char* p, size_t n, uint64_t seed) {
  auto* w = reinterpret_cast<uint64_t*>(p);
  for (size_t i = 0; i < n / 8; ++i) w[i] = SplitMix64(seed ^ (i * 0x100000001b3ULL));
}

// The first 16 bytes of every 4 KiB block of object j become (salt, j, block):
// each measurement's objects differ from each other and from every earlier
// measurement's, so a load returning stale or misplaced blocks fails the check.
void Stamp(char* base, size_t objects, uint64_t object_size, uint32_t salt) {
  for (size_t j = 0; j < objects; ++j) {
    char* obj = base + j * object_size;
    for (uint64_t b = 0; b < object_size / kBlock; ++b) {
      auto* w = reinterpret_cast<uint64_t*>(obj + b * kBlock);
      w[0] = (uint64_t{salt} << 32) | j;
      w[1] = b ^ kStampMagic;
    }
  }
}

// ---------------------------------------------------------------------------
// Backing: what file system --dir is on, and whether it takes O_DIRECT.

struct Backing {
  std::string fs_type;      // from /proc/self/mountinfo, else from the statfs magic
  std::string source;       // the mount's source (a device, or "tmpfs")
  std::string mount_point;
  uint64_t magic = 0;       // statfs f_type
  bool tmpfs = false;
  bool o_direct = false;
  uint64_t free_bytes = 0;  // statfs f_bavail * f_bsize at the start
};

std::string MagicName(uint64_t magic) {
  switch (magic) {
    case TMPFS_MAGIC: return "tmpfs";
    case EXT4_SUPER_MAGIC: return "ext2/3/4";
    case XFS_SUPER_MAGIC: return "xfs";
    case BTRFS_SUPER_MAGIC: return "btrfs";
    case F2FS_SUPER_MAGIC: return "f2fs";
    case OVERLAYFS_SUPER_MAGIC: return "overlay";
    case RAMFS_MAGIC: return "ramfs";
    case NFS_SUPER_MAGIC: return "nfs";
    default: return fmt::format("fs magic {:#x}", magic);
  }
}

Backing DetectBacking(const std::string& dir) {
  Backing b;
  struct statfs sfs;
  if (statfs(dir.c_str(), &sfs) != 0) Die(fmt::format("statfs {}: {}", dir, std::strerror(errno)));
  b.magic = static_cast<uint64_t>(sfs.f_type);
  b.tmpfs = b.magic == TMPFS_MAGIC;
  b.free_bytes = static_cast<uint64_t>(sfs.f_bavail) * static_cast<uint64_t>(sfs.f_bsize);
  b.fs_type = MagicName(b.magic);

  // The mount whose device is dir's and whose mount point is the longest prefix of dir.
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    std::error_code ec;
    std::string canon = fs::canonical(dir, ec).string();
    std::string want = fmt::format("{}:{}", major(st.st_dev), minor(st.st_dev));
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    size_t best = 0;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string id, parent, devno, root, mnt;
      ls >> id >> parent >> devno >> root >> mnt;
      if (devno != want) continue;
      size_t dash = line.find(" - ");
      if (dash == std::string::npos) continue;
      std::istringstream tail(line.substr(dash + 3));
      std::string type, source;
      tail >> type >> source;
      bool prefix = canon.compare(0, mnt.size(), mnt) == 0 &&
                    (mnt == "/" || canon.size() == mnt.size() || canon[mnt.size()] == '/');
      if (prefix && mnt.size() + 1 > best) {
        best = mnt.size() + 1;
        b.fs_type = type;
        b.source = source;
        b.mount_point = mnt;
      }
    }
  }

  // O_DIRECT: open and write one aligned block, as the engine's drives and fio would.
  std::string probe = (fs::path(dir) / ".odirect_probe").string();
  int fd = open(probe.c_str(), O_CREAT | O_RDWR | O_DIRECT | O_CLOEXEC, 0600);
  if (fd >= 0) {
    Region block(kBlock);
    std::memset(block.data(), 0, kBlock);
    b.o_direct = pwrite(fd, block.data(), kBlock, 0) == static_cast<ssize_t>(kBlock);
    close(fd);
  }
  unlink(probe.c_str());
  return b;
}

// ---------------------------------------------------------------------------
// Workers: a fixed pool of threads, started once, that run fn(0..count-1).

class Workers {
 public:
  explicit Workers(int n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { loop(); });
  }
  ~Workers() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    start_cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

  // Runs fn(i) for every i in [0, count), each once, on all workers; returns the
  // wall time from releasing the workers to the last one finishing. After an
  // error no new item starts, and *error is the first one.
  double run(size_t count, const std::function<Status(size_t)>& fn, Status* error) {
    Clock::time_point t0;
    {
      std::lock_guard lock(mu_);
      fn_ = &fn;
      count_ = count;
      next_.store(0);
      first_error_ = Status::OK();
      running_ = threads_.size();
      ++generation_;
      t0 = Clock::now();
    }
    start_cv_.notify_all();
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [&] { return running_ == 0; });
    Clock::time_point t1 = Clock::now();
    *error = first_error_;
    return Seconds(t0, t1);
  }

 private:
  void loop() {
    uint64_t seen = 0;
    std::unique_lock lock(mu_);
    for (;;) {
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      const auto* fn = fn_;
      const size_t count = count_;
      lock.unlock();
      for (;;) {
        size_t i = next_.fetch_add(1, std::memory_order_relaxed);
        if (i >= count) break;
        Status s = (*fn)(i);
        if (!s.ok()) {
          std::lock_guard g(error_mu_);
          if (first_error_.ok()) first_error_ = s;
          next_.store(count, std::memory_order_relaxed);
        }
      }
      lock.lock();
      if (--running_ == 0) done_cv_.notify_one();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  bool stop_ = false;                                   // GUARDED_BY(mu_)
  uint64_t generation_ = 0;                             // GUARDED_BY(mu_)
  size_t running_ = 0;                                  // GUARDED_BY(mu_)
  const std::function<Status(size_t)>* fn_ = nullptr;  // GUARDED_BY(mu_)
  size_t count_ = 0;                                    // GUARDED_BY(mu_)
  std::atomic<size_t> next_{0};
  std::mutex error_mu_;
  Status first_error_;  // written under error_mu_ by workers, read by run() once all are done
};

// ---------------------------------------------------------------------------
// Preconditioning: every byte of a drive's data area that the engine or fio
// will touch is written once before any timing. On tmpfs the first write to a
// hole allocates and zeroes a page (fio measured ~0.7 GB/s on fresh files
// against ~8 GB/s on written ones here), on a disk file system it allocates
// blocks; a long-lived pool pays neither.

// The size of the smallest of these block devices (each a drive of the pool).
uint64_t SmallestDevice(const std::vector<std::string>& devices) {
  uint64_t smallest = UINT64_MAX;
  for (const auto& d : devices) {
    int fd = open(d.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) Die(fmt::format("--devices: open {}: {}", d, std::strerror(errno)));
    struct stat st;
    uint64_t bytes = 0;
    const bool block = fstat(fd, &st) == 0 && S_ISBLK(st.st_mode) && ioctl(fd, BLKGETSIZE64, &bytes) == 0;
    close(fd);
    if (!block) Die(fmt::format("--devices: {} is not a block device", d));
    smallest = std::min(smallest, bytes);
  }
  return smallest;
}

class Preconditioner {
 public:
  Preconditioner(const std::vector<std::string>& paths, uint64_t data_bytes, bool direct)
      : limit_(data_bytes), done_(paths.size(), 0), buf_(4 * kMiB) {
    FillPattern(buf_.data(), buf_.size(), 0xfeedULL);
    for (const auto& p : paths) {
      int fd = open(p.c_str(), O_RDWR | O_CLOEXEC | (direct ? O_DIRECT : 0));
      if (fd < 0) Die(fmt::format("open {}: {}", p, std::strerror(errno)));
      fds_.push_back(fd);
    }
  }
  ~Preconditioner() {
    for (int fd : fds_) close(fd);
  }

  // Makes sure [0, bytes) of drive d's data area has been written; returns the seconds it took.
  double extend(size_t d, uint64_t bytes) {
    uint64_t want = std::min(RoundUp(bytes, kPreconditionStep), limit_);
    if (want <= done_[d]) return 0;
    auto t0 = Clock::now();
    while (done_[d] < want) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(buf_.size(), want - done_[d]));
      ssize_t w = pwrite(fds_[d], buf_.data(), n, static_cast<off_t>(kDataOffset + done_[d]));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0 || static_cast<size_t>(w) % kBlock != 0) {
        Die(fmt::format("preconditioning drive {}: {}", d, w < 0 ? std::strerror(errno) : "short write"));
      }
      done_[d] += static_cast<uint64_t>(w);
    }
    if (fdatasync(fds_[d]) != 0) Die(fmt::format("fdatasync drive {}: {}", d, std::strerror(errno)));
    return Seconds(t0, Clock::now());
  }
  uint64_t done(size_t d) const { return done_[d]; }

 private:
  uint64_t limit_;
  std::vector<int> fds_;
  std::vector<uint64_t> done_;
  Region buf_;
};

// ---------------------------------------------------------------------------
// fio.

struct FioSetup {
  std::string binary;
  std::vector<std::string> files;
  uint64_t bs = 0;
  uint64_t region = 0;  // bytes per file, from the data area's start
  bool direct = true;
  int runtime_s = 3;
  int ramp_s = 1;
  std::string workdir;

  // engine "io_uring": one job per file, iodepth 64/N, sequential over the
  // file's range; "psync": 64/N synchronous jobs per file, each sequential over
  // its own slice of the range (the same 64 in flight, one per process).
  std::vector<std::string> args(const std::string& engine, const std::string& rw) const {
    std::vector<std::string> a = {binary,
                                  "--output-format=json",
                                  "--ioengine=" + engine,
                                  fmt::format("--direct={}", direct ? 1 : 0),
                                  fmt::format("--bs={}", bs),
                                  "--rw=" + rw,
                                  "--time_based=1",
                                  fmt::format("--runtime={}", runtime_s),
                                  fmt::format("--ramp_time={}", ramp_s),
                                  fmt::format("--offset={}", kDataOffset),
                                  fmt::format("--size={}", region),
                                  "--fallocate=none",
                                  "--allow_file_create=0",
                                  "--group_reporting=0"};
    const int n = static_cast<int>(files.size());
    for (int i = 0; i < n; ++i) {
      int depth = kInFlight / n + (i < kInFlight % n ? 1 : 0);  // 64 in flight over all files
      a.push_back(fmt::format("--name=drive{}", i));
      a.push_back("--filename=" + files[i]);
      depth = std::max(depth, 1);
      if (engine == "psync") {
        // Each of the file's jobs reads or writes its own slice, as the objects do.
        // (With a range too small for a block per job, they share the range.)
        const uint64_t slice = region / static_cast<uint64_t>(depth) / bs * bs;
        a.push_back(fmt::format("--numjobs={}", depth));
        if (slice > 0) {
          a.push_back(fmt::format("--size={}", slice));
          a.push_back(fmt::format("--offset_increment={}", slice));
        }
      } else {
        a.push_back(fmt::format("--iodepth={}", depth));
      }
    }
    return a;
  }
};

std::string ShellJoin(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "" : " ") + a;
  return out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs fio, stdout and stderr to files in the work directory; returns its exit
// status (-1 if it could not be started) and its CPU seconds (every thread of
// it, io_uring workers included) in *cpu_s.
int Spawn(const std::vector<std::string>& args, const std::string& out, const std::string& err, double* cpu_s) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);  // this process blocks signals; fio must not
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return -1;
  Cleanup().child.store(pid);
  int status = 0;
  struct rusage ru {};
  while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  Cleanup().child.store(0);
  auto sec = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; };
  *cpu_s = sec(ru.ru_utime) + sec(ru.ru_stime);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

struct FioResult {
  double mbps = 0;          // every job's bandwidth, summed
  double cpu_s_per_gb = 0;  // fio's user+sys CPU per 10^9 bytes (see RunFio)
};

FioResult RunFio(const FioSetup& f, const std::string& engine, const std::string& rw) {
  const std::string out = (fs::path(f.workdir) / "fio.json").string();
  const std::string err = (fs::path(f.workdir) / "fio.err").string();
  auto args = f.args(engine, rw);
  double cpu_s = 0;
  int rc = Spawn(args, out, err, &cpu_s);
  if (rc != 0) {
    Die(fmt::format("`{}` {}: {}", ShellJoin(args), rc < 0 ? "could not start" : fmt::format("exited {}", rc),
                    ReadAll(err)));
  }
  std::string text = ReadAll(out);
  size_t brace = text.find('{');  // fio may print notes before the JSON
  json j = json::parse(brace == std::string::npos ? std::string() : text.substr(brace), nullptr, false);
  if (j.is_discarded() || !j.contains("jobs")) Die(fmt::format("cannot parse fio's JSON output: {}", text.substr(0, 400)));
  double bytes_per_s = 0;
  for (const auto& job : j["jobs"]) {
    if (job.value("error", 0) != 0) Die(fmt::format("fio job {} failed: error {}", job.value("jobname", "?"), job.value("error", 0)));
    bytes_per_s += job[rw].value("bw_bytes", 0.0);
  }
  // fio's own usr_cpu/sys_cpu leave out its io_uring workers (they are per
  // thread), so the CPU is the whole child's, from wait4, over the bytes of the
  // ramp and the measured part at the measured rate.
  const double bytes = bytes_per_s * (f.runtime_s + f.ramp_s);
  return {bytes_per_s / 1e6, bytes > 0 ? cpu_s / bytes * 1e9 : 0};
}

// ---------------------------------------------------------------------------
// The engine side.

struct Config {
  uint32_t drives = 4;
  uint64_t chunk = 4 * kMiB;
  uint64_t total = 0;
  std::vector<uint64_t> sizes;
  int threads = kInFlight;
  int runs = 3;
  uint64_t seed = 42;
};

struct CellResult {
  double store_mbps = 0, load_mbps = 0, sync_s = 0;
  double store_cpu_s_per_gb = 0, load_cpu_s_per_gb = 0;  // process CPU during the timed part per 10^9 bytes
  double store_idle = 0, load_idle = 0;  // share of the machine's CPU time left idle during the timed part
  double max_drive_share = 0;  // bytes on the busiest drive / all bytes
};

class Bench {
 public:
  Bench(const Config& cfg, Pool* pool, Preconditioner* pre, Workers* workers, char* src, char* dst)
      : cfg_(cfg), pool_(pool), pre_(pre), workers_(workers), src_(src), dst_(dst) {
    for (const char* layout : kLayouts) {
      meta::NewInode dir;
      dir.mode = S_IFDIR | 0755;
      dir.uid = getuid();
      dir.gid = getgid();
      auto made = pool_->ns().create(meta::kRootIno, layout, dir);
      dirs_.push_back(Take(std::move(made), fmt::format("mkdir /{}", layout)).ino);
    }
  }

  size_t objects(uint64_t size) const { return std::max<uint64_t>(1, cfg_.total / size); }

  // One measurement of (layout, object size) with count objects.
  CellResult measure(int layout, uint64_t size, size_t count) {
    const uint32_t salt = ++salt_;
    const std::string cell = fmt::format("{} {}", Bytes(size), kLayouts[layout]);
    const uint32_t n = cfg_.drives;
    const uint64_t chunks = (size + cfg_.chunk - 1) / cfg_.chunk;

    // Untimed: inodes, the drive range they will take, the source stamps.
    std::vector<meta::InodeRecord> inodes;
    std::vector<std::shared_ptr<ObjectStore::Object>> objs;
    std::vector<uint64_t> footprint(n, 0);  // every chunk reserves a whole chunk (ObjectStore::write)
    for (size_t j = 0; j < count; ++j) {
      meta::NewInode f;
      f.mode = S_IFREG | 0644;
      f.uid = getuid();
      f.gid = getgid();
      f.chunk_size = static_cast<uint32_t>(cfg_.chunk);
      f.strategy = kLayouts[layout];
      f.replicas = 1;
      auto made = pool_->ns().create(dirs_[layout], fmt::format("m{}_o{}", salt, j), f);
      inodes.push_back(Take(std::move(made), "create " + cell));
      objs.push_back(Take(pool_->store().object(inodes.back()), "object " + cell));
      const uint64_t h = ObjectHash(inodes.back().uri);
      for (uint64_t i = 0; i < chunks; ++i) footprint[expected_drive(layout, h, i)] += cfg_.chunk;
    }
    for (uint32_t d = 0; d < n; ++d) {
      double s = pre_->extend(d, footprint[d]);
      if (s > 0) fmt::print(stderr, "  preconditioned drive {} to {} ({:.1f} s)\n", d, Bytes(pre_->done(d)), s);
    }
    Stamp(src_, count, size, salt);
    const double bytes = static_cast<double>(size) * static_cast<double>(count);

    // Timed: store.
    Status error;
    std::function<Status(size_t)> store_one = [&](size_t j) -> Status {
      return pool_->store().write(*objs[j], 0, src_ + j * size, size).status();
    };
    double cpu0 = CpuSeconds();
    auto jiffies0 = MachineJiffies();
    double store_s = workers_->run(count, store_one, &error);
    double store_cpu = CpuSeconds() - cpu0;
    double store_idle = IdleShare(jiffies0, MachineJiffies());
    Check(error, "store " + cell);
    auto t0 = Clock::now();
    Check(pool_->store().sync(), "sync after store " + cell);
    double sync_s = Seconds(t0, Clock::now());

    // Timed: load.
    std::function<Status(size_t)> load_one = [&](size_t j) -> Status {
      return pool_->store().read(*objs[j], 0, size, dst_ + j * size);
    };
    cpu0 = CpuSeconds();
    jiffies0 = MachineJiffies();
    double load_s = workers_->run(count, load_one, &error);
    double load_cpu = CpuSeconds() - cpu0;
    double load_idle = IdleShare(jiffies0, MachineJiffies());
    Check(error, "load " + cell);

    // Untimed: contents, placement, delete.
    for (size_t j = 0; j < count; ++j) {
      const char* want = src_ + j * size;
      const char* got = dst_ + j * size;
      if (std::memcmp(want, got, size) != 0) {
        size_t at = 0;
        while (want[at] == got[at]) ++at;
        Die(fmt::format("{}: object {} read back wrong at byte {} (chunk {})", cell, j, at, at / cfg_.chunk));
      }
    }
    std::vector<uint64_t> on_drive(n, 0);
    for (size_t j = 0; j < count; ++j) {
      auto recs = Take(pool_->store().load_chunks(inodes[j].ino), "chunk records " + cell);
      if (recs.size() != chunks) Die(fmt::format("{}: object {} has {} chunks, not {}", cell, j, recs.size(), chunks));
      const uint64_t h = ObjectHash(inodes[j].uri);
      for (const auto& [index, rec] : recs) {
        uint32_t want = expected_drive(layout, h, index);
        if (rec.replicas.size() != 1 || rec.replicas[0].segment != want) {
          Die(fmt::format("{}: object {} chunk {} is on drive {}, the layout says {} (a drive was full: raise "
                          "--drive-size or lower --total)",
                          cell, j, index, rec.replicas.empty() ? -1 : static_cast<int>(rec.replicas[0].segment), want));
        }
        on_drive[want] += rec.length;
      }
    }
    objs.clear();  // drop our references, so reclaim also drops the cached state
    for (size_t j = 0; j < count; ++j) {
      auto r = Take(pool_->ns().unlink(dirs_[layout], fmt::format("m{}_o{}", salt, j)), "unlink " + cell);
      if (r.nlink == 0) Check(pool_->store().reclaim(r.ino), "reclaim " + cell);
    }
    Check(pool_->store().sync(), "sync after delete " + cell);  // freed space becomes reusable after a sync
    for (const auto& u : Take(pool_->usage(), "usage")) {
      if (u.kind == "drive" && u.used != 0) Die(fmt::format("{}: drive {} still has {} bytes used after delete", cell, u.id, u.used));
    }

    CellResult r;
    r.store_mbps = bytes / store_s / 1e6;
    r.load_mbps = bytes / load_s / 1e6;
    r.sync_s = sync_s;
    r.store_cpu_s_per_gb = store_cpu / bytes * 1e9;
    r.load_cpu_s_per_gb = load_cpu / bytes * 1e9;
    r.store_idle = store_idle;
    r.load_idle = load_idle;
    r.max_drive_share = static_cast<double>(*std::max_element(on_drive.begin(), on_drive.end())) / bytes;
    return r;
  }

 private:
  // Mirrors the two strategies in engine/placement.cc; measure() checks the engine agrees.
  uint32_t expected_drive(int layout, uint64_t hash, uint64_t index) const {
    const uint32_t n = cfg_.drives;
    if (layout == 0) return static_cast<uint32_t>(index % n);
    return static_cast<uint32_t>((hash % n + index % n) % n);
  }

  const Config& cfg_;
  Pool* pool_;
  Preconditioner* pre_;
  Workers* workers_;
  char* src_;
  char* dst_;
  std::vector<uint64_t> dirs_;
  uint32_t salt_ = 0;
};

}  // namespace
}  // namespace stripefs::bench

int main(int argc, char** argv) {
  using namespace stripefs;
  using namespace stripefs::bench;

  CLI::App app{
      "stripe_bench (BENCHMARKS.md §2, seed 002): store and load objects of 2, 14 and 16 MiB, 64 in flight,\n"
      "through the engine's object API on N drive files, for the round-robin layout (every object starts on\n"
      "drive 0) and the striped layout (hash-of-URI start), beside fio's raw read/write bandwidth on the same\n"
      "drive files. Each figure is the median of --runs runs in shuffled order."};
  std::string dir, json_path, drive_size_text, chunk_text = "4M", total_text, sizes_text = "2M,14M,16M";
  std::string fio_binary = "fio";
  std::vector<std::string> fio_engines = {"io_uring", "psync"};
  Config cfg;
  bool quick = false, hugepages = false;
  int fio_runtime = 0;
  app.add_option("--dir", dir, "Directory for the drive files and the metadata (a new subdirectory is made and removed)")
      ->required();
  app.add_option("--drives", cfg.drives, "Drive files")->capture_default_str()->check(CLI::Range(1, 64));
  std::vector<std::string> devices;
  app.add_option("--devices", devices,
                 "Block devices to use as the drives instead of drive files (their contents are overwritten; "
                 "--dir then holds the metadata only; see bench/stripe_bench_throttled)")
      ->delimiter(',');
  app.add_option("--drive-size", drive_size_text,
                 "Size of each drive file (default: just enough for the round-robin layout of the smallest objects)");
  app.add_option("--chunk-size", chunk_text, "Chunk size (power of two, 1M-64M); also fio's block size")
      ->capture_default_str();
  app.add_option("--total", total_text, "Bytes of objects per measurement (default 2G, 512M with --quick)");
  app.add_option("--sizes", sizes_text, "Object sizes, comma-separated, multiples of 4K")->capture_default_str();
  app.add_option("--threads", cfg.threads, "Worker threads = objects in flight (see the file header)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--runs", cfg.runs, "Runs of every figure (the median is shown)")->capture_default_str()->check(
      CLI::Range(1, 99));
  app.add_option("--seed", cfg.seed, "Seed of the shuffle")->capture_default_str();
  app.add_option("--fio", fio_binary, "fio binary")->capture_default_str();
  app.add_option("--fio-engines", fio_engines,
                 "fio engines to measure; the % columns are against the first (io_uring: iodepth 64/N per file; "
                 "psync: 64/N jobs per file)")
      ->delimiter(',')
      ->check(CLI::IsMember({"io_uring", "psync"}))
      ->capture_default_str();
  app.add_option("--fio-runtime", fio_runtime, "Seconds per fio run, after a 1 s ramp (default 3, 2 with --quick)")
      ->check(CLI::Range(1, 600));
  app.add_flag("--hugepages", hugepages,
               "Back the object buffers with transparent huge pages (default 4 KiB pages, like fio's buffers)");
  app.add_flag("--quick", quick, "Smaller totals (512M) and shorter fio runs");
  app.add_option("--json", json_path, "Also write every run and the medians to this file");
  CLI11_PARSE(app, argc, argv);

  if (!devices.empty()) {
    if (devices.size() > 64) Die("--devices: at most 64");
    cfg.drives = static_cast<uint32_t>(devices.size());
  }
  cfg.chunk = Take(ParseSize(chunk_text), "--chunk-size");
  Check(CheckChunkSize(cfg.chunk), "--chunk-size");
  cfg.total = total_text.empty() ? (quick ? 512 * kMiB : 2048 * kMiB) : Take(ParseSize(total_text), "--total");
  if (fio_runtime == 0) fio_runtime = quick ? 2 : 3;
  {
    std::stringstream ss(sizes_text);
    std::string part;
    while (std::getline(ss, part, ',')) {
      uint64_t s = Take(ParseSize(part), "--sizes");
      if (s == 0 || s % kBlock != 0) Die(fmt::format("object size {} is not a positive multiple of 4 KiB", part));
      cfg.sizes.push_back(s);
    }
    if (cfg.sizes.empty()) Die("--sizes is empty");
  }
  if (cfg.total < cfg.sizes.front()) Die("--total is smaller than an object");

  // Space: a drive never needs more than every object's chunks that can land on
  // it, and under round-robin drive 0 takes chunk 0 of every object.
  uint64_t data_needed = 0, buffer_bytes = 0, max_objects = 0;
  for (uint64_t s : cfg.sizes) {
    uint64_t n = std::max<uint64_t>(1, cfg.total / s);
    uint64_t k = (s + cfg.chunk - 1) / cfg.chunk;
    data_needed = std::max(data_needed, n * ((k + cfg.drives - 1) / cfg.drives) * cfg.chunk);
    buffer_bytes = std::max(buffer_bytes, n * s);
    max_objects = std::max(max_objects, n);
  }
  data_needed = RoundUp(data_needed + cfg.chunk, kPreconditionStep);
  uint64_t drive_size = kDataOffset + data_needed;
  if (!devices.empty() && drive_size_text.empty()) drive_size = SmallestDevice(devices);
  if (!drive_size_text.empty()) {
    drive_size = Take(ParseSize(drive_size_text), "--drive-size");
    if (drive_size < kDataOffset + data_needed) {
      Die(fmt::format("--drive-size {} is too small: the round-robin layout needs {} per drive for --total {} "
                      "(every object starts on drive 0); lower --total or raise --drive-size",
                      drive_size_text, Bytes(kDataOffset + data_needed), Bytes(cfg.total)));
    }
  }
  const uint64_t data_bytes = (drive_size - kDataOffset) / cfg.chunk * cfg.chunk;
  // fio's range: about what the striped layout puts on each drive, at least 256 MiB.
  const uint64_t fio_region =
      std::min(data_bytes, RoundUp(std::max(cfg.total / cfg.drives, 256 * kMiB), kPreconditionStep));

  StartSignalThread();

  // The work directory.
  std::error_code ec;
  {
    std::lock_guard lock(Cleanup().mu);
    if (!fs::exists(dir, ec)) {
      fs::create_directories(dir, ec);
      if (ec) Die(fmt::format("cannot create {}: {}", dir, ec.message()));
      Cleanup().made_dir = dir;
    }
  }
  std::string tmpl = (fs::path(dir) / "stripe_bench.XXXXXX").string();
  if (!mkdtemp(tmpl.data())) Die(fmt::format("mkdtemp in {}: {}", dir, std::strerror(errno)));
  {
    std::lock_guard lock(Cleanup().mu);
    Cleanup().workdir = tmpl;
  }
  const std::string workdir = tmpl;
  Backing backing = DetectBacking(workdir);
  if (!devices.empty()) {  // the drives are the devices; workdir holds the metadata only
    backing.tmpfs = false;
    backing.o_direct = true;  // a block device takes it (the preconditioner's open says so if not)
  }

  // Peak space of the drive files: drive 0 holds the round-robin layout's
  // first chunks, every drive fio's range and a striped share.
  uint64_t striped_share = 0;
  for (uint64_t s : cfg.sizes) {
    uint64_t n = std::max<uint64_t>(1, cfg.total / s);
    uint64_t k = (s + cfg.chunk - 1) / cfg.chunk;
    striped_share = std::max(striped_share, n * k * cfg.chunk / cfg.drives * 5 / 4);
  }
  const uint64_t estimate =
      data_needed + (cfg.drives - 1) * std::min(data_bytes, RoundUp(std::max(fio_region, striped_share), kPreconditionStep));
  if (devices.empty() && estimate + 256 * kMiB > backing.free_bytes) {
    Die(fmt::format("{} has {} free; the drive files will take about {} (lower --total)", dir, Bytes(backing.free_bytes),
                    Bytes(estimate)));
  }

  std::vector<std::string> drive_paths = devices;
  if (devices.empty()) {
    for (uint32_t d = 0; d < cfg.drives; ++d) drive_paths.push_back((fs::path(workdir) / fmt::format("drive{}.img", d)).string());
  }
  const std::string meta_dir = (fs::path(workdir) / "meta").string();
  {
    FormatOptions fo;
    fo.meta_dir = meta_dir;
    for (const auto& p : drive_paths) fo.drives.push_back({p, drive_size});
    fo.chunk_size = static_cast<uint32_t>(cfg.chunk);
    fo.strategy = "striped";  // the pool default; every object names its own strategy
    fo.replicas = 1;
    Check(FormatPool(fo, getuid(), getgid()), "format pool");
  }
  auto pool = Take(Pool::Open(meta_dir, Pool::Mode::kMount), "open pool");

  FioSetup fio;
  fio.binary = fio_binary;
  fio.files = drive_paths;
  fio.bs = cfg.chunk;
  fio.region = fio_region;
  fio.direct = backing.o_direct;
  fio.runtime_s = fio_runtime;
  fio.workdir = workdir;

  const std::string backing_text =
      !devices.empty()
          ? fmt::format("block devices {}", fmt::join(devices, ","))
          : fmt::format("{}{}", backing.fs_type, backing.source.empty() || backing.source == backing.fs_type
                                                     ? std::string()
                                                     : " on " + backing.source);
  fmt::print(stderr, "stripe_bench: {} drives of {} in {} ({}), O_DIRECT {}\n", cfg.drives, Bytes(drive_size), workdir,
             backing_text, backing.o_direct ? "accepted" : "refused (buffered)");

  // Buffers: every object of a measurement has its own source and destination,
  // filled (so faulted in) before any timing.
  auto t_fill = Clock::now();
  Region src(buffer_bytes, hugepages), dst(buffer_bytes, hugepages);
  FillPattern(src.data(), src.size(), cfg.seed);
  std::memset(dst.data(), 0, dst.size());
  Preconditioner pre(drive_paths, data_bytes, backing.o_direct);
  for (uint32_t d = 0; d < cfg.drives; ++d) pre.extend(d, fio_region);
  fmt::print(stderr, "stripe_bench: buffers ({} x 2) and fio's {} per drive written in {:.1f} s\n", Bytes(buffer_bytes),
             Bytes(fio_region), Seconds(t_fill, Clock::now()));

  Workers workers(cfg.threads);
  Bench bench(cfg, pool.get(), &pre, &workers, src.data(), dst.data());

  // Warm-up, not recorded: creates the io_uring rings and malloc arenas of every worker.
  {
    uint64_t s = cfg.sizes.back();
    (void)bench.measure(1, s, std::min<size_t>(bench.objects(s), 2 * static_cast<size_t>(cfg.threads)));
  }

  // The schedule: every cell's runs and fio's runs, shuffled together.
  struct Item {
    int kind;  // 0: cell, 1: fio
    int layout;
    size_t size_index;  // cell: object size; fio: engine
    int write;          // fio: 0 read, 1 write
    int run;
  };
  std::vector<Item> items;
  for (int r = 0; r < cfg.runs; ++r) {
    for (size_t si = 0; si < cfg.sizes.size(); ++si) {
      for (int l = 0; l < 2; ++l) items.push_back({0, l, si, 0, r});
    }
    for (size_t e = 0; e < fio_engines.size(); ++e) {
      for (int w = 0; w < 2; ++w) items.push_back({1, 0, e, w, r});
    }
  }
  std::mt19937_64 rng(cfg.seed);
  std::shuffle(items.begin(), items.end(), rng);

  struct FioSeries {
    std::vector<double> mbps, cpu_s_per_gb, idle;
  };
  const char* const kRw[] = {"read", "write"};
  std::vector<std::array<FioSeries, 2>> fio_series(fio_engines.size());  // [engine][read, write]
  const size_t cells = cfg.sizes.size() * 2;
  std::vector<std::vector<CellResult>> results(cells);
  json order = json::array();
  const double load_before = LoadAverage();
  auto t_all = Clock::now();
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    if (it.kind == 0) {
      uint64_t s = cfg.sizes[it.size_index];
      CellResult r = bench.measure(it.layout, s, bench.objects(s));
      results[it.size_index * 2 + it.layout].push_back(r);
      fmt::print(stderr,
                 "[{:2}/{}] {:>6} {:<11} run {}: store {:6.0f} MB/s ({:.2f} CPU s/GB, {:3.0f} % idle)  load {:6.0f} "
                 "MB/s ({:.2f} CPU s/GB, {:3.0f} % idle)  sync {:.3f} s\n",
                 i + 1, items.size(), Bytes(s), kLayouts[it.layout], it.run + 1, r.store_mbps, r.store_cpu_s_per_gb,
                 100 * r.store_idle, r.load_mbps, r.load_cpu_s_per_gb, 100 * r.load_idle, r.sync_s);
      order.push_back(fmt::format("{} {}", Bytes(s), kLayouts[it.layout]));
    } else {
      const std::string& engine = fio_engines[it.size_index];
      auto jiffies0 = MachineJiffies();
      FioResult f = RunFio(fio, engine, kRw[it.write]);
      const double idle = IdleShare(jiffies0, MachineJiffies());
      FioSeries& series = fio_series[it.size_index][it.write];
      series.mbps.push_back(f.mbps);
      series.cpu_s_per_gb.push_back(f.cpu_s_per_gb);
      series.idle.push_back(idle);
      fmt::print(stderr, "[{:2}/{}] fio {:<8} {:<5} run {}: {:6.0f} MB/s ({:.2f} CPU s/GB, {:3.0f} % idle)\n", i + 1,
                 items.size(), engine, kRw[it.write], it.run + 1, f.mbps, f.cpu_s_per_gb, 100 * idle);
      order.push_back(fmt::format("fio {} {}", engine, kRw[it.write]));
    }
  }
  const double elapsed = Seconds(t_all, Clock::now());
  const double load_after = LoadAverage();

  // Space the drive files took at their peak (they are never shrunk).
  uint64_t used = 0;
  for (const auto& p : drive_paths) {
    struct stat st;
    if (stat(p.c_str(), &st) == 0) used += static_cast<uint64_t>(st.st_blocks) * 512;
  }

  // The tables. The % columns are against the first fio engine.
  const double fr = Median(fio_series[0][0].mbps), fw = Median(fio_series[0][1].mbps);
  const int per_file = kInFlight / static_cast<int>(cfg.drives);
  fmt::print("stripe_bench: {} drive files of {} in {} ({}), chunk {}, {} objects in flight ({} threads), about {} of "
             "objects per measurement in buffers of {} pages, median of {} runs in shuffled order (seed {})\n",
             cfg.drives, Bytes(drive_size), dir, backing_text, Bytes(cfg.chunk), cfg.threads, cfg.threads,
             Bytes(cfg.total), hugepages ? "2 MiB (THP)" : "4 KiB", cfg.runs, cfg.seed);
  fmt::print("fio raw on the same drive files ({}, bs {}, {} s after a {} s ramp):\n",
             backing.o_direct ? (backing.tmpfs ? "direct=1; tmpfs takes O_DIRECT but serves it from the page cache"
                                               : "direct=1")
                              : "buffered: the backing refuses O_DIRECT",
             Bytes(cfg.chunk), fio_runtime, fio.ramp_s);
  for (size_t e = 0; e < fio_engines.size(); ++e) {
    fmt::print("  {:<8} ({}): read {:.0f} MB/s, write {:.0f} MB/s{}\n", fio_engines[e],
               fio_engines[e] == "psync" ? fmt::format("{} jobs per file, each on its own slice", per_file)
                                         : fmt::format("{} jobs x iodepth {}", cfg.drives, per_file),
               Median(fio_series[e][0].mbps), Median(fio_series[e][1].mbps), e == 0 ? "  <- the % columns" : "");
  }
  fmt::print("{} CPUs, load average {:.1f} before and {:.1f} after the {:.0f} s of measurements\n\n",
             std::thread::hardware_concurrency(), load_before, load_after, elapsed);
  fmt::print("| Object size | Layout | Objects | Store MB/s | Load MB/s | Store % of fio write | Load % of fio read | "
             "Busiest drive |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
  json jcells = json::array();
  for (size_t si = 0; si < cfg.sizes.size(); ++si) {
    for (int l = 0; l < 2; ++l) {
      const auto& rs = results[si * 2 + l];
      std::vector<double> st, ld, sy, share, stc, ldc, sti, ldi;
      for (const auto& r : rs) {
        st.push_back(r.store_mbps);
        ld.push_back(r.load_mbps);
        sy.push_back(r.sync_s);
        share.push_back(r.max_drive_share);
        stc.push_back(r.store_cpu_s_per_gb);
        ldc.push_back(r.load_cpu_s_per_gb);
        sti.push_back(r.store_idle);
        ldi.push_back(r.load_idle);
      }
      const double ms = Median(st), ml = Median(ld);
      fmt::print("| {} | {} | {} | {:.0f} | {:.0f} | {:.1f} % | {:.1f} % | {:.0f} % |\n", Bytes(cfg.sizes[si]),
                 l == 0 ? "round-robin (old: chunk 0 on drive 0)" : "striped (hash start)",
                 bench.objects(cfg.sizes[si]), ms, ml, 100 * ms / fw, 100 * ml / fr, 100 * Median(share));
      jcells.push_back({{"object_size", cfg.sizes[si]},
                        {"layout", kLayouts[l]},
                        {"objects", bench.objects(cfg.sizes[si])},
                        {"store_mbps", st},
                        {"load_mbps", ld},
                        {"sync_s", sy},
                        {"store_cpu_s_per_gb", stc},
                        {"load_cpu_s_per_gb", ldc},
                        {"store_machine_idle", sti},
                        {"load_machine_idle", ldi},
                        {"store_mbps_median", ms},
                        {"load_mbps_median", ml},
                        {"store_pct_of_fio_write", 100 * ms / fw},
                        {"load_pct_of_fio_read", 100 * ml / fr},
                        {"store_cpu_s_per_gb_median", Median(stc)},
                        {"load_cpu_s_per_gb_median", Median(ldc)},
                        {"busiest_drive_share", Median(share)}});
    }
  }
  fmt::print("\nhash start vs old layout, median load and store:");
  for (size_t si = 0; si < cfg.sizes.size(); ++si) {
    auto ratio = [&](const char* key) {
      return jcells[si * 2 + 1][key].get<double>() / jcells[si * 2][key].get<double>();
    };
    fmt::print("{} {} x{:.2f}, x{:.2f}", si ? ";" : "", Bytes(cfg.sizes[si]), ratio("load_mbps_median"),
               ratio("store_mbps_median"));
  }
  fmt::print("\n");
  for (size_t e = 0; e < fio_engines.size(); ++e) {
    fmt::print("fio {} runs, MB/s: read {:.0f}; write {:.0f}\n", fio_engines[e], fmt::join(fio_series[e][0].mbps, ", "),
               fmt::join(fio_series[e][1].mbps, ", "));
  }
  for (size_t e = 1; e < fio_engines.size(); ++e) {
    double lo_s = 1e300, hi_s = 0, lo_l = 1e300, hi_l = 0;
    const double er = Median(fio_series[e][0].mbps), ew = Median(fio_series[e][1].mbps);
    for (const auto& c : jcells) {
      const double s = 100 * c["store_mbps_median"].get<double>() / ew, l = 100 * c["load_mbps_median"].get<double>() / er;
      lo_s = std::min(lo_s, s), hi_s = std::max(hi_s, s), lo_l = std::min(lo_l, l), hi_l = std::max(hi_l, l);
    }
    fmt::print("against fio {} instead: store {:.0f}-{:.0f} % of its write, load {:.0f}-{:.0f} % of its read\n",
               fio_engines[e], lo_s, hi_s, lo_l, hi_l);
  }

  // CPU per byte does not depend on what else the machine runs as much as MB/s does.
  fmt::print("\nCPU seconds per GB moved (user+sys of the process, io_uring workers included; median):");
  for (size_t e = 0; e < fio_engines.size(); ++e) {
    fmt::print("{} fio {} read {:.2f}, write {:.2f}", e ? ";" : "", fio_engines[e],
               Median(fio_series[e][0].cpu_s_per_gb), Median(fio_series[e][1].cpu_s_per_gb));
  }
  fmt::print("\n\n| Object size | Layout | Store CPU s/GB | Load CPU s/GB |\n|---|---|---:|---:|\n");
  for (size_t si = 0; si < cfg.sizes.size(); ++si) {
    for (int l = 0; l < 2; ++l) {
      const json& c = jcells[si * 2 + l];
      fmt::print("| {} | {} | {:.2f} | {:.2f} |\n", Bytes(cfg.sizes[si]), kLayouts[l],
                 c["store_cpu_s_per_gb_median"].get<double>(), c["load_cpu_s_per_gb_median"].get<double>());
    }
  }
  const std::string peak = devices.empty() ? fmt::format("drive files took {} at their peak; ", Bytes(used)) : "";
  fmt::print("\n{}{} measurements in {:.0f} s\n", peak, items.size(), elapsed);

  if (!json_path.empty()) {
    json jfio = json::object();
    for (size_t e = 0; e < fio_engines.size(); ++e) {
      json je = {{"command", ShellJoin(fio.args(fio_engines[e], "read|write"))}};
      for (int w = 0; w < 2; ++w) {
        const FioSeries& fs = fio_series[e][w];
        je[kRw[w]] = {{"mbps", fs.mbps},
                      {"mbps_median", Median(fs.mbps)},
                      {"cpu_s_per_gb", fs.cpu_s_per_gb},
                      {"machine_idle", fs.idle}};
      }
      jfio[fio_engines[e]] = je;
    }
    jfio["region_per_file"] = fio_region;
    jfio["percent_columns_against"] = fio_engines[0];
    json j = {{"benchmark", "stripe_bench"},
              {"command", ShellJoin(std::vector<std::string>(argv, argv + argc))},
              {"backing",
               {{"dir", dir},
                {"fs_type", backing.fs_type},
                {"source", backing.source},
                {"mount_point", backing.mount_point},
                {"statfs_magic", backing.magic},
                {"tmpfs", backing.tmpfs},
                {"o_direct", backing.o_direct}}},
              {"cpus", std::thread::hardware_concurrency()},
              {"load_average", {load_before, load_after}},
              {"drives", cfg.drives},
              {"drive_size", drive_size},
              {"chunk_size", cfg.chunk},
              {"threads", cfg.threads},
              {"hugepages", hugepages},
              {"objects_in_flight", cfg.threads},
              {"total", cfg.total},
              {"runs", cfg.runs},
              {"seed", cfg.seed},
              {"fio", jfio},
              {"cells", jcells},
              {"order", order},
              {"drive_bytes_used", used},
              {"elapsed_s", elapsed}};
    std::ofstream out(json_path);
    out << j.dump(2) << "\n";
    if (!out) fmt::print(stderr, "stripe_bench: cannot write {}\n", json_path);
  }

  pool.reset();
  RemoveWorkdir();
  return 0;
}
