// stripefs-stress: random file operations on a mount from several threads,
// every result checked against an exact in-memory model (DESIGN invariants
// 4-6 are what --state / --verify-state check after a crash).
//
// Each thread owns the directory DIR/t<k> and a fixed set of names in it
// (f<i>, sub/g<i> and the empty directories d<j>), so its model is exact
// without any cross-thread ordering. --overwriters adds threads that mostly
// overwrite data in place (a crash in the middle of one is the hard case).
//
// A run that finds files of an earlier run takes them over: it reads and
// checks them, then rewrites one byte per MiB with the value it already has
// and re-reads everything, since the state a crash left must survive writes.
//
// Data can be checked without its history: byte p written by operation n of
// thread t to object o (an inode; hard links share it, and its id is also in
// the xattr user.obj) has a high nibble that depends on (t, o, p) only and a
// low nibble that depends on n as well. The model compares exact bytes; after
// a crash every non-zero byte of a file must have the high nibble of its own
// object at its own offset, so garbage, stale bytes of another file and bytes
// at the wrong offset are caught (each wrong byte with probability 15/16).
//
// With --state FILE, after each successful fsync (of the file and then of its
// directory) the file's size, sha256 and xattrs are recorded as "clean", and
// before any later operation on that name or its inode the record is dropped
// again; FILE is replaced atomically (FILE.tmp, fsync, rename) each time.
// --verify-state FILE then checks, on the remounted pool: every clean file
// reads exactly as recorded; every other file reads without error and holds
// only bytes that writes to its own object could have made, or zeros.
#include <CLI/CLI.hpp>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pattern.h"
#include "state_file.h"

namespace stress {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kChunk = 4 * kMiB;  // the default chunk size: writes aim at its boundaries
constexpr uint32_t kMaxObj = 1u << 30;
constexpr uint32_t kGuessLimit = 1u << 20;  // object ids tried for a file without user.obj and no state file
constexpr int kDirSlots = 3;
constexpr int kXattrNames = 4;
constexpr size_t kRecentOps = 20;

int g_files = 12;  // file slots per thread (their names: SlotName in state_file.h)
StateFile g_state;  // --state

// ---------------------------------------------------------------------------
// Run-wide settings and the op log.

uint64_t g_seed = 0;
std::string g_command;  // how this run was started, for the divergence report
uint64_t g_max_size = 12 * kMiB;
std::atomic<bool> g_stop{false};
std::atomic<bool> g_disconnected{false};
std::mutex g_print_mu;
FILE* g_log = nullptr;  // --log

// Thrown when the mount went away (the daemon died): the run ends there.
struct Disconnected {};

bool IsDisconnect(int e) { return e == ENOTCONN || e == ECONNABORTED; }

// A mapped file whose mount went away (the daemon was killed) faults with
// SIGBUS instead of returning ENOTCONN: that is the same disconnection. A
// SIGBUS while the mount still answers is a real failure.
int g_sigbus_root_fd = -1;
int g_sigbus_exit_code = 3;
void OnSigbus(int) {
  struct statfs st;
  const bool gone = ::fstatfs(g_sigbus_root_fd, &st) != 0 && IsDisconnect(errno);
  const char* msg = gone ? "stripefs-stress: the mount went away (SIGBUS on a mapping); stopped\n"
                         : "stripefs-stress: DIVERGENCE: SIGBUS on a mapping while the mount answers\n";
  (void)!::write(gone ? STDOUT_FILENO : STDERR_FILENO, msg, std::strlen(msg));
  std::_Exit(gone ? g_sigbus_exit_code : 1);
}

enum Kind {
  kCreate, kWrite, kAppend, kTruncate, kRename, kLink, kUnlink, kMkdir, kRmdir, kFsync,
  kSetxattr, kRemovexattr, kGetxattr, kRead, kStat, kReaddir, kKinds
};
constexpr std::array<const char*, kKinds> kKindNames = {
    "create", "write", "append", "truncate", "rename", "link", "unlink", "mkdir", "rmdir", "fsync",
    "setxattr", "removexattr", "getxattr", "read", "stat", "readdir"};

struct Stats {
  std::array<uint64_t, kKinds> ok{}, expected_errors{};
  uint64_t bytes_written = 0, bytes_read = 0, ops = 0;
  void add(const Stats& o) {
    for (int k = 0; k < kKinds; ++k) ok[k] += o.ok[k], expected_errors[k] += o.expected_errors[k];
    bytes_written += o.bytes_written, bytes_read += o.bytes_read, ops += o.ops;
  }
};

// ---------------------------------------------------------------------------
// One thread's model and operations.

struct Obj {
  uint32_t id = 0;
  std::vector<uint8_t> data;
  std::map<std::string, std::string> xattrs;
  int nlink = 0;
};

class Worker {
 public:
  // An overwriter works on few files and mostly overwrites their data in
  // place, so that a kill often lands inside an overwrite.
  Worker(uint32_t t, int root_fd, bool overwriter)
      : t_(t), root_fd_(root_fd), overwriter_(overwriter), nslots_(overwriter ? std::min(4, g_files) : g_files),
        rng_(Mix(g_seed ^ Mix(t + 1))) {
    slots_.resize(g_files);
    dirs_.resize(kDirSlots);
  }
  ~Worker() {
    if (dir_fd_ >= 0) ::close(dir_fd_);
  }

  // Makes DIR/t<k> (and sub) or takes over what an earlier run left there.
  void setup(ThreadState* persisted);
  // Run after setup: recovered state must survive further writes. Rewrites
  // one byte of every MiB of each adopted file with the value it has, then
  // re-reads the whole file past the page cache. Returns the files probed.
  int probe_adopted();
  void run(uint64_t max_ops, Clock::time_point deadline);
  const Stats& stats() const { return stats_; }

 private:
  // --- helpers
  uint64_t rnd(uint64_t n) { return n ? rng_() % n : 0; }  // [0, n)
  bool chance(unsigned pct) { return rnd(100) < pct; }
  int pick_file_slot(bool want_present, bool hot = false);
  std::vector<int> slots_of(const std::shared_ptr<Obj>& o) const;

  void note(const std::string& what);
  [[noreturn]] void diverge(const std::string& what);
  // An error no model predicts: the end of the run if the mount is gone,
  // otherwise a divergence.
  [[noreturn]] void unexpected(const std::string& call, int err);
  bool mount_gone();
  // The errno of a failed call (0 on success); throws Disconnected.
  int err_of(long rc);
  void expect_ok(long rc, const std::string& call) {
    int e = err_of(rc);
    if (e) unexpected(call, e);
  }
  void expect_err(long rc, int want, const std::string& call);
  int open_slot(int slot, int flags, mode_t mode = 0);
  int open_parent(int slot);
  void close_fd(int fd, const std::string& call);
  void pwrite_all(int fd, const uint8_t* p, size_t len, uint64_t off, const std::string& call);
  std::vector<uint8_t> read_all(int fd, uint64_t size, const std::string& call);
  std::map<std::string, std::string> read_xattrs(int fd, const std::string& name);

  uint32_t new_obj_id();
  // Drops clean records of these slots before an operation may change them.
  void touch(const std::vector<int>& slots);
  void record_clean(int slot, bool with_xattrs);
  void compare(const std::string& name, uint64_t off, const uint8_t* want, const uint8_t* got, size_t len);

  // --- operations
  void op_create();
  void op_write(bool append);
  void op_truncate();
  void op_rename();
  void op_link();
  void op_unlink();
  void op_dir();
  void op_fsync();
  void op_setxattr();
  void op_removexattr();
  void op_getxattr();
  void op_read();
  void op_stat();
  void op_readdir();

  uint32_t t_;
  int root_fd_;
  bool overwriter_;
  int nslots_;  // names it picks from: the first nslots_
  int dir_fd_ = -1;
  std::mt19937_64 rng_;
  std::vector<std::shared_ptr<Obj>> slots_;
  std::vector<bool> dirs_;
  uint32_t next_obj_ = 1;
  uint32_t opno_ = 0;
  std::deque<std::string> recent_;
  Stats stats_;
  uint64_t clean_slots_ = 0;  // bitmask mirror of g_state's clean records of this thread
};

void Worker::note(const std::string& what) {
  std::string line = fmt::format("#{} {}", opno_, what);
  if (g_log) {
    std::lock_guard lock(g_print_mu);
    std::fprintf(g_log, "t%u %s\n", t_, line.c_str());
  }
  recent_.push_back(std::move(line));
  if (recent_.size() > kRecentOps) recent_.pop_front();
}

// statfs always reaches the daemon; a stat may be answered from the kernel's
// attribute cache even after the connection died.
bool Worker::mount_gone() {
  struct statfs st;
  return ::fstatfs(root_fd_, &st) != 0 && IsDisconnect(errno);
}

void Worker::diverge(const std::string& what) {
  if (mount_gone()) throw Disconnected{};
  std::lock_guard lock(g_print_mu);
  std::fprintf(stderr, "\nstripefs-stress: DIVERGENCE (seed %llu, thread %u, op %u)\n  %s\n  last %zu operations of thread %u:\n",
               static_cast<unsigned long long>(g_seed), t_, opno_, what.c_str(), recent_.size(), t_);
  for (const auto& r : recent_) std::fprintf(stderr, "    %s\n", r.c_str());
  std::fprintf(stderr,
               "  command: %s\n  (each thread's operations follow from the seed alone: the same command on the same\n"
               "  starting files, e.g. an empty directory, repeats them)\n",
               g_command.c_str());
  std::fflush(stderr);
  if (g_log) std::fflush(g_log);
  std::_Exit(1);
}

void Worker::unexpected(const std::string& call, int err) {
  if (IsDisconnect(err) || mount_gone()) throw Disconnected{};
  diverge(fmt::format("{} failed: {} ({})", call, std::strerror(err), err));
}

int Worker::err_of(long rc) {
  if (rc >= 0) return 0;
  int e = errno;
  if (IsDisconnect(e)) throw Disconnected{};
  return e;
}

void Worker::expect_err(long rc, int want, const std::string& call) {
  int e = err_of(rc);
  if (e == want) return;
  if (e == 0) diverge(fmt::format("{} succeeded, the model expected {}", call, std::strerror(want)));
  unexpected(fmt::format("{} (expected {})", call, std::strerror(want)), e);
}

int Worker::open_slot(int slot, int flags, mode_t mode) {
  int fd = ::openat(dir_fd_, SlotName(slot).c_str(), flags | O_CLOEXEC, mode);
  int e = err_of(fd);
  if (e) unexpected(fmt::format("open {} flags {:#o}", SlotName(slot), flags), e);
  return fd;
}

int Worker::open_parent(int slot) {
  const char* dir = slot % 3 == 2 ? "sub" : ".";
  int fd = ::openat(dir_fd_, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int e = err_of(fd);
  if (e) unexpected(fmt::format("open directory {}", dir), e);
  return fd;
}

void Worker::close_fd(int fd, const std::string& call) { expect_ok(::close(fd), "close " + call); }

void Worker::pwrite_all(int fd, const uint8_t* p, size_t len, uint64_t off, const std::string& call) {
  size_t done = 0;
  while (done < len) {
    ssize_t w = ::pwrite(fd, p + done, len - done, static_cast<off_t>(off + done));
    int e = err_of(w);
    if (e) unexpected(fmt::format("{} (after {} bytes)", call, done), e);
    if (w == 0) diverge(call + ": pwrite returned 0");
    done += static_cast<size_t>(w);
  }
  stats_.bytes_written += len;
}

std::vector<uint8_t> Worker::read_all(int fd, uint64_t size, const std::string& call) {
  std::vector<uint8_t> out(size + 1);  // one more: the read must stop at the model's size
  uint64_t done = 0;
  while (done < out.size()) {
    ssize_t r = ::pread(fd, out.data() + done, std::min<uint64_t>(out.size() - done, 4 * kMiB), static_cast<off_t>(done));
    int e = err_of(r);
    if (e) unexpected(fmt::format("{} at {}", call, done), e);
    if (r == 0) break;
    done += static_cast<uint64_t>(r);
  }
  out.resize(done);
  stats_.bytes_read += done;
  return out;
}

std::map<std::string, std::string> Worker::read_xattrs(int fd, const std::string& name) {
  std::map<std::string, std::string> out;
  std::vector<char> names(65536);
  ssize_t n = ::flistxattr(fd, names.data(), names.size());
  if (int e = err_of(n)) unexpected("listxattr " + name, e);
  for (ssize_t i = 0; i < n;) {
    std::string x(names.data() + i);
    i += static_cast<ssize_t>(x.size()) + 1;
    if (x.rfind("user.", 0) != 0) continue;
    std::vector<char> v(65536);
    ssize_t l = ::fgetxattr(fd, x.c_str(), v.data(), v.size());
    if (int e = err_of(l)) unexpected(fmt::format("getxattr {} {}", name, x), e);
    out[x] = std::string(v.data(), static_cast<size_t>(l));
  }
  return out;
}

int Worker::pick_file_slot(bool want_present, bool hot) {
  // Changes go mostly to the first half of the names, so files in the other
  // half, once fsynced, often stay untouched until the crash.
  auto one = [&] {
    return static_cast<int>(hot && chance(80) ? rnd((nslots_ + 1) / 2) : rnd(nslots_));
  };
  for (int tries = 0; tries < 4; ++tries) {
    int s = one();
    if (static_cast<bool>(slots_[s]) == want_present) return s;
  }
  return one();
}

std::vector<int> Worker::slots_of(const std::shared_ptr<Obj>& o) const {
  std::vector<int> out;
  for (int s = 0; s < g_files; ++s)
    if (o && slots_[s] == o) out.push_back(s);
  return out;
}

uint32_t Worker::new_obj_id() {
  if (next_obj_ >= kMaxObj) diverge("object ids exhausted");
  std::lock_guard lock(g_state.mu);
  auto& ts = g_state.state.t[t_];
  if (next_obj_ >= ts.obj_reserved) {  // ids are reserved durably in blocks, never reused after a crash
    ts.obj_reserved = next_obj_ + 256;
    g_state.save_locked();
  }
  return next_obj_++;
}

void Worker::touch(const std::vector<int>& slots) {
  uint64_t mask = 0;
  for (int s : slots) mask |= uint64_t{1} << s;
  if (!(clean_slots_ & mask)) return;
  std::lock_guard lock(g_state.mu);
  for (int s : slots) g_state.state.t[t_].clean.erase(s);
  clean_slots_ &= ~mask;
  g_state.save_locked();
}

void Worker::record_clean(int slot, bool with_xattrs) {
  if (!g_state.enabled()) return;
  const Obj& o = *slots_[slot];
  CleanRecord r;
  r.obj = o.id;
  r.size = o.data.size();
  r.sha256 = Sha256(o.data.data(), o.data.size());
  r.has_xattrs = with_xattrs;
  if (with_xattrs) r.xattrs = o.xattrs;
  std::lock_guard lock(g_state.mu);
  g_state.state.t[t_].clean[slot] = std::move(r);
  clean_slots_ |= uint64_t{1} << slot;
  g_state.save_locked();
}

void Worker::compare(const std::string& name, uint64_t off, const uint8_t* want, const uint8_t* got, size_t len) {
  if (std::memcmp(want, got, len) == 0) return;
  size_t i = 0;
  while (want[i] == got[i]) ++i;
  size_t n = std::min<size_t>(16, len - i);
  diverge(fmt::format("{}: content differs at offset {} (read [{}, +{}))\n    expected: {}\n    actual:   {}",
                      name, off + i, off, len, Hex(want + i, n), Hex(got + i, n)));
}

// --- setup ------------------------------------------------------------------

void Worker::setup(ThreadState* persisted) {
  std::string td = ThreadDir(t_);
  int e = err_of(::mkdirat(root_fd_, td.c_str(), 0755));
  if (e && e != EEXIST) unexpected("mkdir " + td, e);
  dir_fd_ = ::openat(root_fd_, td.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (int e2 = err_of(dir_fd_)) unexpected("open " + td, e2);
  e = err_of(::mkdirat(dir_fd_, "sub", 0755));
  if (e && e != EEXIST) unexpected(td + "/sub: mkdir", e);
  // The directories must outlive a crash for clean records below them to mean anything.
  for (const char* d : {".", "sub"}) {
    int fd = ::openat(dir_fd_, d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (int e2 = err_of(fd)) unexpected(fmt::format("open {}/{}", td, d), e2);
    expect_ok(::fsync(fd), fmt::format("fsync {}/{}", td, d));
    ::close(fd);
  }
  int rfd = ::openat(root_fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rfd >= 0) {
    expect_ok(::fsync(rfd), "fsync DIR");
    ::close(rfd);
  }

  // Take over files an earlier run left: the model is what they hold now.
  note("setup: adopt existing files");
  std::map<ino_t, std::shared_ptr<Obj>> by_ino;
  std::map<ino_t, nlink_t> nlinks;
  uint32_t max_obj = 0;
  for (int s = 0; s < g_files; ++s) {
    std::string name = SlotName(s);
    struct stat st;
    int se = err_of(::fstatat(dir_fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW));
    if (se == ENOENT) continue;
    if (se) unexpected("stat " + name, se);
    if (!S_ISREG(st.st_mode)) diverge(fmt::format("{}/{} is not a regular file (mode {:o})", td, name, st.st_mode));
    if (auto it = by_ino.find(st.st_ino); it != by_ino.end()) {
      slots_[s] = it->second;
      it->second->nlink++;
      continue;
    }
    int fd = open_slot(s, O_RDONLY);
    auto o = std::make_shared<Obj>();
    o->data = read_all(fd, static_cast<uint64_t>(st.st_size) + 16 * kMiB, "adopt read " + name);
    o->xattrs = read_xattrs(fd, name);
    close_fd(fd, name);
    if (o->data.size() != static_cast<uint64_t>(st.st_size))
      diverge(fmt::format("{}: stat size {} but {} bytes read", name, st.st_size, o->data.size()));
    std::string bad;
    uint32_t limit = persisted ? persisted->obj_reserved : kMaxObj;
    std::optional<uint32_t> id = IdentityOf(t_, o->xattrs, limit, &bad);
    if (!bad.empty()) diverge(fmt::format("{}/{}: {}", td, name, bad));
    if (!id) id = GuessObject(t_, o->data.data(), o->data.size(), std::min(limit, kGuessLimit));
    bool nonzero = std::any_of(o->data.begin(), o->data.end(), [](uint8_t b) { return b != 0; });
    if (!id && nonzero) diverge(fmt::format("{}/{}: data that no object of thread {} was written", td, name, t_));
    if (id) {
      if (auto at = FirstForeignByte(t_, *id, o->data.data(), 0, o->data.size()))
        diverge(fmt::format("{}/{}: byte at offset {} was never written to object {}: {}", td, name, *at, *id,
                            Hex(o->data.data() + *at, std::min<size_t>(16, o->data.size() - *at))));
    }
    o->id = id.value_or(0);  // 0: empty or all zeros, a new identity below
    o->nlink = 1;
    max_obj = std::max(max_obj, o->id);
    slots_[s] = o;
    by_ino[st.st_ino] = o;
    nlinks[st.st_ino] = st.st_nlink;
  }
  for (auto& [ino, o] : by_ino)
    if (nlinks[ino] != static_cast<nlink_t>(o->nlink))
      diverge(fmt::format("inode {} has st_nlink {} but {} names in {}", ino, nlinks[ino], o->nlink, td));
  for (int j = 0; j < kDirSlots; ++j) {
    struct stat st;
    int se = err_of(::fstatat(dir_fd_, DirSlotName(j).c_str(), &st, AT_SYMLINK_NOFOLLOW));
    if (se == ENOENT) continue;
    if (se) unexpected("stat " + DirSlotName(j), se);
    if (!S_ISDIR(st.st_mode)) diverge(DirSlotName(j) + " is not a directory");
    dirs_[j] = true;
  }

  std::lock_guard lock(g_state.mu);
  ThreadState& ts = g_state.state.t[t_];
  next_obj_ = std::max({uint32_t{1}, max_obj + 1, persisted ? persisted->obj_reserved : 0u});
  ts.obj_reserved = next_obj_;
  if (persisted) {  // clean records stay clean while their files are untouched
    for (auto& [s, r] : persisted->clean) {
      auto& o = slots_[s];
      if (!o || o->id != r.obj || o->data.size() != r.size || Sha256(o->data.data(), o->data.size()) != r.sha256 ||
          (r.has_xattrs && o->xattrs != r.xattrs))
        diverge(fmt::format("{}/{}: fsynced content recorded in the state file is gone (run --verify-state)", td,
                            SlotName(s)));
      ts.clean[s] = r;
      clean_slots_ |= uint64_t{1} << s;
    }
  }
  for (auto& [ino, o] : by_ino)
    if (o->id == 0) o->id = next_obj_++;  // nothing in it names an object yet
  ts.obj_reserved = next_obj_;
}

int Worker::probe_adopted() {
  std::set<Obj*> done;
  for (int s = 0; s < g_files; ++s) {
    auto o = slots_[s];
    if (!o || !done.insert(o.get()).second) continue;
    std::string name = SlotName(s);
    uint64_t size = o->data.size();
    // The content stays the same, so clean records stay valid.
    note(fmt::format("setup: rewrite 1 byte per MiB of {} (obj {}, size {}) with its own value, re-read it", name,
                     o->id, size));
    int fd = open_slot(s, O_RDWR);
    for (uint64_t off = 0; off < size; off += kMiB) pwrite_all(fd, o->data.data() + off, 1, off, "probe pwrite " + name);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // read from the daemon, not the page cache
    auto got = read_all(fd, size, "probe re-read " + name);
    if (got.size() != size) diverge(fmt::format("{}: re-read {} bytes, the model has {}", name, got.size(), size));
    compare(name, 0, o->data.data(), got.data(), size);
    close_fd(fd, name);
  }
  return static_cast<int>(done.size());
}

// --- operations -----------------------------------------------------------

void Worker::op_create() {
  int s = pick_file_slot(false);
  std::string name = SlotName(s);
  if (slots_[s]) {
    note("create (exists) " + name);
    expect_err(::openat(dir_fd_, name.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644), EEXIST, "create " + name);
    stats_.expected_errors[kCreate]++;
    return;
  }
  uint32_t id = new_obj_id();
  size_t len = overwriter_ ? 1 + rnd(g_max_size) : chance(50) ? rnd(256 * 1024) : 0;
  note(fmt::format("create {} obj {} initial {}", name, id, len));
  int fd = ::openat(dir_fd_, name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0644);
  if (int e = err_of(fd)) unexpected("create " + name, e);
  auto o = std::make_shared<Obj>();
  o->id = id;
  o->nlink = 1;
  slots_[s] = o;
  std::string idv = fmt::format("t{}.o{}.", t_, id);
  expect_ok(::fsetxattr(fd, kObjXattr, idv.data(), idv.size(), XATTR_CREATE), "setxattr user.obj " + name);
  o->xattrs[kObjXattr] = idv;
  if (len) {
    o->data.resize(len);
    Fill(t_, id, opno_, 0, len, o->data.data());
    pwrite_all(fd, o->data.data(), len, 0, "initial write " + name);
  }
  close_fd(fd, name);
  stats_.ok[kCreate]++;
}

void Worker::op_write(bool append) {
  int s = pick_file_slot(true, true);
  std::string name = SlotName(s);
  auto o = slots_[s];
  if (!o) {
    note("write (missing) " + name);
    expect_err(::openat(dir_fd_, name.c_str(), O_WRONLY | O_CLOEXEC), ENOENT, "open " + name);
    stats_.expected_errors[append ? kAppend : kWrite]++;
    return;
  }
  uint64_t size = o->data.size();
  if (size >= g_max_size) append = false;  // O_APPEND would go past the cap
  uint64_t len;
  switch (rnd(10)) {
    case 0: case 1: len = 1 + rnd(16); break;
    case 2: case 3: case 4: len = 1 + rnd(8192); break;
    case 5: case 6: len = 4096 * (1 + rnd(64)); break;   // whole blocks
    case 7: case 8: len = 1 + rnd(256 * 1024); break;
    default: len = 1 + rnd(2 * kMiB + 512 * 1024); break;  // several 1 MiB FUSE writes
  }
  uint64_t off;
  if (append) {
    off = size;
  } else if (overwriter_ && size > 0) {  // in place: within the data there is
    off = chance(50) ? rnd(size) : (rnd(size) / 4096) * 4096;
    len = std::min(len, size - off);
  } else {
    switch (rnd(4)) {
      case 0: off = rnd(size + 1); break;
      case 1: off = (rnd(size + kMiB) / 4096) * 4096; break;  // aligned, maybe past EOF
      case 2: {  // across a chunk boundary
        uint64_t b = kChunk * (1 + rnd(std::max<uint64_t>(1, g_max_size / kChunk)));
        off = b - std::min<uint64_t>(b, 1 + rnd(std::min<uint64_t>(len, 64 * 1024)));
        break;
      }
      default: off = rnd(std::min(g_max_size, size + 2 * kMiB)); break;
    }
  }
  if (off >= g_max_size) off = rnd(g_max_size);
  len = std::min(len, g_max_size - off);
  if (len == 0) len = 1, off = g_max_size - 1;
  std::vector<int> affected = slots_of(o);
  touch(affected);
  note(fmt::format("{} {} obj {} off {} len {} (size {})", append ? "append" : "write", name, o->id, off, len, size));
  std::vector<uint8_t> buf(len);
  Fill(t_, o->id, opno_, off, len, buf.data());
  if (!append && off + len <= size && chance(15)) {  // through a shared mapping: only inside the file
    const uint64_t map_off = off / 4096 * 4096, map_len = off + len - map_off;
    const bool sync = chance(50);
    note(fmt::format("  via mmap [{}, {}){}", map_off, map_off + map_len, sync ? " + msync" : ""));
    int fd = open_slot(s, O_RDWR);
    void* m = ::mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(map_off));
    if (m == MAP_FAILED) unexpected("mmap " + name, errno);
    std::memcpy(static_cast<uint8_t*>(m) + (off - map_off), buf.data(), len);
    if (sync) expect_ok(::msync(m, map_len, MS_SYNC), "msync " + name);
    expect_ok(::munmap(m, map_len), "munmap " + name);
    close_fd(fd, name);
    std::memcpy(o->data.data() + off, buf.data(), len);
    stats_.bytes_written += len;
    stats_.ok[kWrite]++;
    return;
  }
  int fd = open_slot(s, append ? O_WRONLY | O_APPEND : (chance(50) ? O_WRONLY : O_RDWR));
  if (append) {
    size_t done = 0;
    while (done < len) {
      ssize_t w = ::write(fd, buf.data() + done, len - done);
      if (int e = err_of(w)) unexpected(fmt::format("append {} (after {} bytes)", name, done), e);
      done += static_cast<size_t>(w);
    }
    stats_.bytes_written += len;
  } else {
    pwrite_all(fd, buf.data(), len, off, "pwrite " + name);
  }
  close_fd(fd, name);
  if (o->data.size() < off + len) o->data.resize(off + len);
  std::memcpy(o->data.data() + off, buf.data(), len);
  stats_.ok[append ? kAppend : kWrite]++;
}

void Worker::op_truncate() {
  int s = pick_file_slot(true, true);
  std::string name = SlotName(s);
  auto o = slots_[s];
  if (!o) {
    note("truncate (missing) " + name);
    expect_err(::openat(dir_fd_, name.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC), ENOENT, "open O_TRUNC " + name);
    stats_.expected_errors[kTruncate]++;
    return;
  }
  uint64_t size = o->data.size(), to;
  switch (rnd(6)) {
    case 0: to = 0; break;
    case 1: to = rnd(size + 1); break;                                  // down
    case 2: to = size + 1 + rnd(2 * kMiB); break;                       // up: a hole
    case 3: to = kChunk * (1 + rnd(g_max_size / kChunk)) + rnd(3) - 1; break;  // at a chunk boundary
    case 4: to = (rnd(size + 1) / 4096) * 4096; break;
    default: to = size > 0 ? size - 1 - rnd(std::min<uint64_t>(size, 5000)) : 1 + rnd(5000); break;
  }
  to = std::min(to, g_max_size);
  touch(slots_of(o));
  bool via_otrunc = to == 0 && chance(50);
  note(fmt::format("truncate {} obj {} {} -> {}{}", name, o->id, size, to, via_otrunc ? " (O_TRUNC)" : ""));
  if (via_otrunc) {
    int fd = open_slot(s, O_WRONLY | O_TRUNC);
    close_fd(fd, name);
  } else {
    int fd = open_slot(s, O_WRONLY);
    expect_ok(::ftruncate(fd, static_cast<off_t>(to)), fmt::format("ftruncate {} to {}", name, to));
    close_fd(fd, name);
  }
  o->data.resize(to);  // growth reads as zeros
  stats_.ok[kTruncate]++;
}

void Worker::op_rename() {
  int a = pick_file_slot(true, true), b = static_cast<int>(chance(80) ? rnd((nslots_ + 1) / 2) : rnd(nslots_));
  if (a == b) b = (b + 1) % nslots_;
  std::string an = SlotName(a), bn = SlotName(b);
  bool noreplace = chance(15);
  unsigned flags = noreplace ? RENAME_NOREPLACE : 0;
  if (!slots_[a]) {
    note(fmt::format("rename (missing) {} -> {}", an, bn));
    expect_err(::renameat2(dir_fd_, an.c_str(), dir_fd_, bn.c_str(), flags), ENOENT, "rename " + an);
    stats_.expected_errors[kRename]++;
    return;
  }
  if (noreplace && slots_[b]) {
    note(fmt::format("rename NOREPLACE (exists) {} -> {}", an, bn));
    expect_err(::renameat2(dir_fd_, an.c_str(), dir_fd_, bn.c_str(), flags), EEXIST, "rename NOREPLACE " + an + " " + bn);
    stats_.expected_errors[kRename]++;
    return;
  }
  touch({a, b});
  note(fmt::format("rename{} {} (obj {}) -> {} ({})", noreplace ? " NOREPLACE" : "", an, slots_[a]->id, bn,
                   slots_[b] ? fmt::format("obj {}", slots_[b]->id) : "absent"));
  expect_ok(::renameat2(dir_fd_, an.c_str(), dir_fd_, bn.c_str(), flags), fmt::format("rename {} {}", an, bn));
  if (slots_[a] != slots_[b]) {  // two links to one inode: rename does nothing (POSIX)
    if (slots_[b]) slots_[b]->nlink--;
    slots_[b] = std::move(slots_[a]);
    slots_[a] = nullptr;
  }
  stats_.ok[kRename]++;
}

void Worker::op_link() {
  int a = pick_file_slot(true), b = pick_file_slot(false);
  if (a == b || !slots_[a]) return op_stat();
  std::string an = SlotName(a), bn = SlotName(b);
  if (slots_[b]) {
    note(fmt::format("link (exists) {} -> {}", an, bn));
    expect_err(::linkat(dir_fd_, an.c_str(), dir_fd_, bn.c_str(), 0), EEXIST, "link " + an + " " + bn);
    stats_.expected_errors[kLink]++;
    return;
  }
  note(fmt::format("link {} (obj {}) -> {}", an, slots_[a]->id, bn));
  expect_ok(::linkat(dir_fd_, an.c_str(), dir_fd_, bn.c_str(), 0), fmt::format("link {} {}", an, bn));
  slots_[b] = slots_[a];
  slots_[b]->nlink++;
  stats_.ok[kLink]++;
}

void Worker::op_unlink() {
  int s = pick_file_slot(true, true);
  std::string name = SlotName(s);
  if (!slots_[s]) {
    note("unlink (missing) " + name);
    expect_err(::unlinkat(dir_fd_, name.c_str(), 0), ENOENT, "unlink " + name);
    stats_.expected_errors[kUnlink]++;
    return;
  }
  touch({s});
  note(fmt::format("unlink {} (obj {})", name, slots_[s]->id));
  expect_ok(::unlinkat(dir_fd_, name.c_str(), 0), "unlink " + name);
  slots_[s]->nlink--;
  slots_[s] = nullptr;
  stats_.ok[kUnlink]++;
}

void Worker::op_dir() {
  int j = static_cast<int>(rnd(kDirSlots));
  std::string name = DirSlotName(j);
  bool mk = !dirs_[j] ? !chance(10) : chance(20);
  Kind k = mk ? kMkdir : kRmdir;
  bool fails = mk == dirs_[j];  // mkdir of an existing or rmdir of a missing directory
  note(fmt::format("{} {}{}", mk ? "mkdir" : "rmdir", name, fails ? (mk ? " (exists)" : " (missing)") : ""));
  long rc = mk ? ::mkdirat(dir_fd_, name.c_str(), 0755) : ::unlinkat(dir_fd_, name.c_str(), AT_REMOVEDIR);
  std::string call = (mk ? "mkdir " : "rmdir ") + name;
  if (fails) {
    expect_err(rc, mk ? EEXIST : ENOENT, call);
    stats_.expected_errors[k]++;
    return;
  }
  expect_ok(rc, call);
  dirs_[j] = mk;
  stats_.ok[k]++;
}

void Worker::op_fsync() {
  int s = pick_file_slot(true);
  std::string name = SlotName(s);
  if (!slots_[s]) return op_stat();
  bool data_only = chance(25);
  note(fmt::format("{} {} (obj {}, size {}) and its directory", data_only ? "fdatasync" : "fsync", name,
                   slots_[s]->id, slots_[s]->data.size()));
  int fd = open_slot(s, chance(50) ? O_RDONLY : O_WRONLY);
  expect_ok(data_only ? ::fdatasync(fd) : ::fsync(fd), (data_only ? "fdatasync " : "fsync ") + name);
  close_fd(fd, name);
  int dfd = open_parent(s);
  expect_ok(::fsync(dfd), "fsync directory of " + name);
  close_fd(dfd, "directory of " + name);
  record_clean(s, !data_only);
  stats_.ok[kFsync]++;
}

void Worker::op_setxattr() {
  int s = pick_file_slot(true, true);
  std::string name = SlotName(s);
  auto o = slots_[s];
  if (!o) return op_stat();
  std::string x = fmt::format("user.s{}", rnd(kXattrNames));
  bool exists = o->xattrs.count(x) > 0;
  int flags = 0;
  if (chance(20)) flags = XATTR_CREATE;
  else if (chance(20)) flags = XATTR_REPLACE;
  std::string v = XattrValue(t_, o->id, opno_, rnd(300));
  int fd = open_slot(s, O_RDONLY);
  if ((flags == XATTR_CREATE && exists) || (flags == XATTR_REPLACE && !exists)) {
    int want = exists ? EEXIST : ENODATA;
    note(fmt::format("setxattr {} {} flags {} (expect {})", name, x, flags, std::strerror(want)));
    expect_err(::fsetxattr(fd, x.c_str(), v.data(), v.size(), flags), want, "setxattr " + name + " " + x);
    close_fd(fd, name);
    stats_.expected_errors[kSetxattr]++;
    return;
  }
  touch(slots_of(o));
  note(fmt::format("setxattr {} (obj {}) {} len {} flags {}", name, o->id, x, v.size(), flags));
  expect_ok(::fsetxattr(fd, x.c_str(), v.data(), v.size(), flags), "setxattr " + name + " " + x);
  close_fd(fd, name);
  o->xattrs[x] = v;
  stats_.ok[kSetxattr]++;
}

void Worker::op_removexattr() {
  int s = pick_file_slot(true, true);
  std::string name = SlotName(s);
  auto o = slots_[s];
  if (!o) return op_stat();
  std::string x = fmt::format("user.s{}", rnd(kXattrNames));
  int fd = open_slot(s, O_RDONLY);
  if (!o->xattrs.count(x)) {
    note(fmt::format("removexattr (missing) {} {}", name, x));
    expect_err(::fremovexattr(fd, x.c_str()), ENODATA, "removexattr " + name + " " + x);
    close_fd(fd, name);
    stats_.expected_errors[kRemovexattr]++;
    return;
  }
  touch(slots_of(o));
  note(fmt::format("removexattr {} (obj {}) {}", name, o->id, x));
  expect_ok(::fremovexattr(fd, x.c_str()), "removexattr " + name + " " + x);
  close_fd(fd, name);
  o->xattrs.erase(x);
  stats_.ok[kRemovexattr]++;
}

void Worker::op_getxattr() {
  int s = pick_file_slot(true);
  std::string name = SlotName(s);
  auto o = slots_[s];
  if (!o) return op_stat();
  note(fmt::format("getxattr/listxattr {} (obj {})", name, o->id));
  int fd = open_slot(s, O_RDONLY);
  auto got = read_xattrs(fd, name);
  if (got != o->xattrs) {
    std::string w, g;
    for (auto& [k, v] : o->xattrs) w += fmt::format(" {}={}", k, v.substr(0, 24));
    for (auto& [k, v] : got) g += fmt::format(" {}={}", k, v.substr(0, 24));
    diverge(fmt::format("{}: xattrs differ\n    expected:{}\n    actual:  {}", name, w, g));
  }
  std::string absent = fmt::format("user.s{}", kXattrNames + rnd(2));
  char v[8];
  expect_err(::fgetxattr(fd, absent.c_str(), v, sizeof v), ENODATA, "getxattr " + name + " " + absent);
  close_fd(fd, name);
  stats_.ok[kGetxattr]++;
}

void Worker::op_read() {
  int s = pick_file_slot(true);
  std::string name = SlotName(s);
  auto o = slots_[s];
  if (!o) {
    note("read (missing) " + name);
    expect_err(::openat(dir_fd_, name.c_str(), O_RDONLY | O_CLOEXEC), ENOENT, "open " + name);
    stats_.expected_errors[kRead]++;
    return;
  }
  uint64_t size = o->data.size();
  int fd = open_slot(s, O_RDONLY);
  if (size > 0 && chance(8)) {  // the whole file through a shared mapping
    note(fmt::format("read {} (obj {}) whole via mmap, size {}", name, o->id, size));
    void* m = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) unexpected("mmap " + name, errno);
    compare(name, 0, o->data.data(), static_cast<const uint8_t*>(m), size);
    expect_ok(::munmap(m, size), "munmap " + name);
    stats_.bytes_read += size;
  } else if (chance(25)) {  // the whole file, and nothing past its end
    note(fmt::format("read {} (obj {}) whole, size {}", name, o->id, size));
    auto got = read_all(fd, size, "read " + name);
    if (got.size() != size)
      diverge(fmt::format("{}: read {} bytes of the whole file, the model has {}", name, got.size(), size));
    compare(name, 0, o->data.data(), got.data(), size);
  } else {
    uint64_t off = chance(10) ? size + rnd(8192) : rnd(size + 1);
    if (chance(30)) off = (off / 4096) * 4096;
    uint64_t len = chance(50) ? 1 + rnd(8192) : 1 + rnd(3 * kMiB);
    note(fmt::format("read {} (obj {}) off {} len {} (size {})", name, o->id, off, len, size));
    std::vector<uint8_t> got(len);
    uint64_t done = 0;
    while (done < len) {
      ssize_t r = ::pread(fd, got.data() + done, len - done, static_cast<off_t>(off + done));
      if (int e = err_of(r)) unexpected(fmt::format("pread {} at {}", name, off + done), e);
      if (r == 0) break;
      done += static_cast<uint64_t>(r);
    }
    stats_.bytes_read += done;
    uint64_t want = off >= size ? 0 : std::min(len, size - off);
    if (done != want) diverge(fmt::format("{}: pread at {} len {} returned {} bytes, the model has {}", name, off, len, done, want));
    if (want) compare(name, off, o->data.data() + off, got.data(), want);
  }
  close_fd(fd, name);
  stats_.ok[kRead]++;
}

void Worker::op_stat() {
  int s = static_cast<int>(rnd(g_files));
  std::string name = SlotName(s);
  auto o = slots_[s];
  note(fmt::format("stat {}{}", name, o ? "" : " (missing)"));
  struct stat st;
  long rc = ::fstatat(dir_fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW);
  if (!o) {
    expect_err(rc, ENOENT, "stat " + name);
    stats_.expected_errors[kStat]++;
    return;
  }
  expect_ok(rc, "stat " + name);
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != o->data.size() ||
      st.st_nlink != static_cast<nlink_t>(o->nlink))
    diverge(fmt::format("{}: stat says mode {:o} size {} nlink {}; the model: a file of {} bytes, {} links", name,
                        st.st_mode, st.st_size, st.st_nlink, o->data.size(), o->nlink));
  stats_.ok[kStat]++;
}

void Worker::op_readdir() {
  note("readdir");
  std::set<std::string> want_top{"sub"}, want_sub, got_top, got_sub;
  for (int s = 0; s < g_files; ++s)
    if (slots_[s]) (s % 3 == 2 ? want_sub : want_top).insert(SlotName(s).substr(s % 3 == 2 ? 4 : 0));
  for (int j = 0; j < kDirSlots; ++j)
    if (dirs_[j]) want_top.insert(DirSlotName(j));
  for (auto [d, out] : {std::pair{".", &got_top}, std::pair{"sub", &got_sub}}) {
    int fd = ::openat(dir_fd_, d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (int e = err_of(fd)) unexpected(fmt::format("open {}", d), e);
    DIR* dir = ::fdopendir(fd);
    if (!dir) unexpected("fdopendir", errno);
    errno = 0;
    while (dirent* de = ::readdir(dir)) {
      std::string n = de->d_name;
      if (n != "." && n != "..") out->insert(n);
    }
    if (errno) {
      int e = errno;
      ::closedir(dir);
      unexpected(fmt::format("readdir {}", d), e);
    }
    ::closedir(dir);
  }
  auto show = [](const std::set<std::string>& s) {
    std::string r;
    for (auto& n : s) r += " " + n;
    return r;
  };
  if (got_top != want_top || got_sub != want_sub)
    diverge(fmt::format("readdir differs\n    expected:{} | sub:{}\n    actual:  {} | sub:{}", show(want_top),
                        show(want_sub), show(got_top), show(got_sub)));
  stats_.ok[kReaddir]++;
}

void Worker::run(uint64_t max_ops, Clock::time_point deadline) {
  // Weights of the operations; reads and writes dominate.
  static constexpr std::array<std::pair<int, int>, 15> kMix = {{
      {kCreate, 6}, {kWrite, 22}, {kAppend, 6}, {kTruncate, 5}, {kRename, 5}, {kLink, 3}, {kUnlink, 4},
      {kMkdir, 3}, {kFsync, 6}, {kSetxattr, 4}, {kRemovexattr, 1}, {kGetxattr, 3}, {kRead, 14}, {kStat, 3},
      {kReaddir, 1}}};
  static constexpr std::array<std::pair<int, int>, 15> kOverwriterMix = {{
      {kCreate, 3}, {kWrite, 80}, {kAppend, 0}, {kTruncate, 0}, {kRename, 0}, {kLink, 0}, {kUnlink, 1},
      {kMkdir, 0}, {kFsync, 4}, {kSetxattr, 0}, {kRemovexattr, 0}, {kGetxattr, 0}, {kRead, 12}, {kStat, 0},
      {kReaddir, 0}}};
  const auto& mix = overwriter_ ? kOverwriterMix : kMix;
  int total = 0;
  for (auto& [k, w] : mix) total += w;
  try {
    for (uint64_t i = 0; (max_ops == 0 || i < max_ops) && !g_stop.load(std::memory_order_relaxed); ++i) {
      if ((i & 7) == 0 && Clock::now() >= deadline) break;
      ++opno_;
      int r = static_cast<int>(rnd(total));
      int kind = kReaddir;
      for (auto& [k, w] : mix) {
        if (r < w) {
          kind = k;
          break;
        }
        r -= w;
      }
      switch (kind) {
        case kCreate: op_create(); break;
        case kWrite: op_write(false); break;
        case kAppend: op_write(true); break;
        case kTruncate: op_truncate(); break;
        case kRename: op_rename(); break;
        case kLink: op_link(); break;
        case kUnlink: op_unlink(); break;
        case kMkdir: op_dir(); break;
        case kFsync: op_fsync(); break;
        case kSetxattr: op_setxattr(); break;
        case kRemovexattr: op_removexattr(); break;
        case kGetxattr: op_getxattr(); break;
        case kRead: op_read(); break;
        case kStat: op_stat(); break;
        default: op_readdir(); break;
      }
      stats_.ops++;
    }
  } catch (const Disconnected&) {
    g_disconnected = true;
    g_stop = true;
  }
}

// ---------------------------------------------------------------------------
// --verify-state: check a pool after a crash.

struct VerifyTotals {
  uint64_t clean_files = 0, clean_bytes = 0, other_files = 0, other_bytes = 0;
  uint64_t lost = 0, garbage = 0, errors = 0;
};

int Verify(const std::string& dir, const std::string& state_path) {
  std::string err;
  auto st = LoadState(state_path, &err);
  if (!st) {
    std::fprintf(stderr, "stripefs-stress: %s\n", err.c_str());
    return 2;
  }
  g_files = st->files;
  VerifyTotals v;
  auto problem = [&](uint64_t& counter, const std::string& what) {
    counter++;
    std::printf("PROBLEM: %s\n", what.c_str());
  };
  int root = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) {
    std::fprintf(stderr, "stripefs-stress: %s: %s\n", dir.c_str(), std::strerror(errno));
    return 2;
  }
  for (int t = 0; t < st->threads; ++t) {
    const ThreadState& ts = st->t[t];
    std::string td = ThreadDir(t);
    int dfd = ::openat(root, td.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
      if (errno != ENOENT || !ts.clean.empty()) problem(v.lost, fmt::format("{}: {}", td, std::strerror(errno)));
      continue;
    }
    // Every entry must be a name this thread uses, of the right type.
    std::set<std::string> allowed_top{"sub"}, allowed_sub, dir_names;
    for (int s = 0; s < g_files; ++s) (s % 3 == 2 ? allowed_sub : allowed_top).insert(SlotName(s).substr(s % 3 == 2 ? 4 : 0));
    for (int j = 0; j < kDirSlots; ++j) allowed_top.insert(DirSlotName(j)), dir_names.insert(DirSlotName(j));
    for (auto [d, allowed] : {std::pair{".", &allowed_top}, std::pair{"sub", &allowed_sub}}) {
      int fd = ::openat(dfd, d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) {
        problem(v.errors, fmt::format("{}/{}: {}", td, d, std::strerror(errno)));
        continue;
      }
      DIR* dd = ::fdopendir(fd);
      while (dirent* de = ::readdir(dd)) {
        std::string n = de->d_name;
        if (n == "." || n == "..") continue;
        if (!allowed->count(n)) problem(v.garbage, fmt::format("{}/{}/{}: a name no operation created", td, d, n));
        struct stat sb;
        if (::fstatat(fd, n.c_str(), &sb, AT_SYMLINK_NOFOLLOW) != 0) {
          problem(v.errors, fmt::format("{}/{}/{}: listed but stat fails: {}", td, d, n, std::strerror(errno)));
          continue;
        }
        bool want_dir = n == "sub" || dir_names.count(n);
        if (want_dir != S_ISDIR(sb.st_mode) || (!want_dir && !S_ISREG(sb.st_mode)))
          problem(v.garbage, fmt::format("{}/{}/{}: unexpected file type (mode {:o})", td, d, n, sb.st_mode));
      }
      ::closedir(dd);
    }
    std::map<ino_t, nlink_t> names_of, nlink_of;
    for (int s = 0; s < g_files; ++s) {
      std::string name = SlotName(s), path = td + "/" + name;
      auto rec = ts.clean.find(s);
      const CleanRecord* clean = rec == ts.clean.end() ? nullptr : &rec->second;
      int fd = ::openat(dfd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd < 0) {
        if (errno != ENOENT) problem(v.errors, fmt::format("{}: open: {}", path, std::strerror(errno)));
        else if (clean) problem(v.lost, fmt::format("{}: fsynced (obj {}, {} bytes) but missing", path, clean->obj, clean->size));
        continue;
      }
      struct stat sb;
      ::fstat(fd, &sb);
      if (!S_ISREG(sb.st_mode)) {
        ::close(fd);
        continue;  // reported above
      }
      names_of[sb.st_ino]++;
      nlink_of[sb.st_ino] = sb.st_nlink;
      if (st->max_size && static_cast<uint64_t>(sb.st_size) > st->max_size)
        problem(v.garbage, fmt::format("{}: size {}, past the largest size the stress makes ({})", path, sb.st_size,
                                       st->max_size));
      std::vector<uint8_t> data;
      bool read_ok = true;
      for (;;) {
        size_t at = data.size();
        data.resize(at + 4 * kMiB);
        ssize_t r = ::pread(fd, data.data() + at, 4 * kMiB, static_cast<off_t>(at));
        if (r < 0) {
          problem(v.errors, fmt::format("{}: read at {}: {}", path, at, std::strerror(errno)));
          read_ok = false;
          data.resize(at);
          break;
        }
        data.resize(at + static_cast<size_t>(r));
        if (r == 0) break;
      }
      std::map<std::string, std::string> xattrs;
      std::vector<char> names(65536), val(65536);
      ssize_t nl = ::flistxattr(fd, names.data(), names.size());
      if (nl < 0) problem(v.errors, fmt::format("{}: listxattr: {}", path, std::strerror(errno)));
      for (ssize_t i = 0; i < nl;) {
        std::string x(names.data() + i);
        i += static_cast<ssize_t>(x.size()) + 1;
        if (x.rfind("user.", 0) != 0) continue;
        ssize_t l = ::fgetxattr(fd, x.c_str(), val.data(), val.size());
        if (l < 0) problem(v.errors, fmt::format("{}: getxattr {}: {}", path, x, std::strerror(errno)));
        else xattrs[x] = std::string(val.data(), static_cast<size_t>(l));
      }
      ::close(fd);
      if (read_ok && data.size() != static_cast<uint64_t>(sb.st_size))
        problem(v.errors, fmt::format("{}: stat size {} but {} bytes read", path, sb.st_size, data.size()));

      // Identity and garbage: the xattrs name this thread and one object, and
      // every non-zero byte is one that a write to that object could have made.
      std::string bad;
      std::optional<uint32_t> id = IdentityOf(static_cast<uint32_t>(t), xattrs, ts.obj_reserved, &bad);
      if (!bad.empty()) problem(v.garbage, fmt::format("{}: {}", path, bad));
      if (!id) id = GuessObject(static_cast<uint32_t>(t), data.data(), data.size(), ts.obj_reserved);
      bool nonzero = std::any_of(data.begin(), data.end(), [](uint8_t b) { return b != 0; });
      if (!id && nonzero) {
        problem(v.garbage, fmt::format("{}: no user.obj and data that no object of thread {} was written", path, t));
      } else if (id) {
        if (auto at = FirstForeignByte(static_cast<uint32_t>(t), *id, data.data(), 0, data.size()))
          problem(v.garbage, fmt::format("{}: garbage at offset {} (size {}): never written to object {}; bytes there: {}",
                                         path, *at, data.size(), *id,
                                         Hex(data.data() + *at, std::min<size_t>(16, data.size() - *at))));
      }

      if (clean) {
        std::string sha = Sha256(data.data(), data.size());
        if (data.size() != clean->size || sha != clean->sha256) {
          problem(v.lost, fmt::format("{}: fsynced content lost: recorded size {} sha256 {}, now size {} sha256 {}", path,
                                      clean->size, clean->sha256.substr(0, 16), data.size(), sha.substr(0, 16)));
        } else if (id && *id != clean->obj) {
          problem(v.lost, fmt::format("{}: fsynced object {} replaced by object {}", path, clean->obj, *id));
        } else if (clean->has_xattrs && xattrs != clean->xattrs) {
          problem(v.lost, fmt::format("{}: fsynced xattrs differ ({} recorded, {} now)", path, clean->xattrs.size(),
                                      xattrs.size()));
        } else {
          v.clean_files++;
          v.clean_bytes += data.size();
        }
      } else {
        v.other_files++;
        v.other_bytes += data.size();
      }
    }
    // All links of a thread's files are among its own names.
    for (auto& [ino, names] : names_of)
      if (nlink_of[ino] != names)
        problem(v.errors, fmt::format("{}: inode {} has st_nlink {} but {} names", td, ino, nlink_of[ino], names));
    ::close(dfd);
  }
  ::close(root);
  std::printf("VERIFY clean_files=%llu clean_bytes=%llu other_files=%llu other_bytes=%llu lost=%llu garbage=%llu errors=%llu\n",
              (unsigned long long)v.clean_files, (unsigned long long)v.clean_bytes, (unsigned long long)v.other_files,
              (unsigned long long)v.other_bytes, (unsigned long long)v.lost, (unsigned long long)v.garbage,
              (unsigned long long)v.errors);
  return v.lost + v.garbage + v.errors ? 1 : 0;
}

// "12M", "4096", "1G"
std::optional<uint64_t> ParseSize(const std::string& s) {
  if (s.empty()) return std::nullopt;
  size_t used = 0;
  uint64_t v;
  try {
    v = std::stoull(s, &used);
  } catch (...) {
    return std::nullopt;
  }
  std::string suffix = s.substr(used);
  if (suffix == "K") v <<= 10;
  else if (suffix == "M") v <<= 20;
  else if (suffix == "G") v <<= 30;
  else if (!suffix.empty()) return std::nullopt;
  return v;
}

}  // namespace
}  // namespace stress

int main(int argc, char** argv) {
  using namespace stress;
  CLI::App app{"stripefs-stress: random operations on a mount, checked against an in-memory model"};
  std::string dir, log_path, state_path, verify_path, max_size = "12M";
  unsigned threads = 4, overwriters = 0;
  uint64_t ops = 0;
  double seconds = 0;
  std::optional<uint64_t> seed;
  bool allow_disconnect = false;
  app.add_option("--dir", dir, "directory on the mount to work in (created if missing)")->required();
  app.add_option("--threads", threads, "worker threads, each with its own names")->check(CLI::Range(1, 64));
  app.add_option("--overwriters", overwriters, "extra threads that mostly overwrite data in place (default 0)")
      ->check(CLI::Range(0, 16));
  auto* ops_opt = app.add_option("--ops", ops, "operations in all (default: run for --seconds)");
  app.add_option("--seconds", seconds, "run time (default 10 when --ops is not given)")->excludes(ops_opt);
  app.add_option("--seed", seed, "random seed (default: from the clock; printed)");
  app.add_option("--files", g_files, "file names per thread")->check(CLI::Range(2, 60));
  app.add_option("--max-size", max_size, "largest file size (K/M/G suffixes)");
  app.add_option("--log", log_path, "write every operation to this file");
  app.add_option("--state", state_path, "record fsynced state here, for --verify-state after a crash");
  app.add_option("--verify-state", verify_path, "check DIR against a state file after a crash, then exit");
  app.add_flag("--allow-disconnect", allow_disconnect, "exit 0 when the mount goes away (the daemon was killed)");
  CLI11_PARSE(app, argc, argv);
  for (int i = 0; i < argc; ++i) g_command += (i ? " " : "") + std::string(argv[i]);

  if (!verify_path.empty()) return Verify(dir, verify_path);

  auto ms = ParseSize(max_size);
  if (!ms || *ms < 8192 || *ms > 1024 * kMiB) {
    std::fprintf(stderr, "stripefs-stress: --max-size %s: want a size from 8K to 1G\n", max_size.c_str());
    return 2;
  }
  g_max_size = *ms;
  g_seed = seed ? *seed : static_cast<uint64_t>(Clock::now().time_since_epoch().count()) % 1000000007;
  if (!seed) g_command += fmt::format(" --seed {}", g_seed);
  if (ops == 0 && seconds <= 0) seconds = 10;
  if (!log_path.empty()) {
    g_log = std::fopen(log_path.c_str(), "w");
    if (!g_log) {
      std::fprintf(stderr, "stripefs-stress: %s: %s\n", log_path.c_str(), std::strerror(errno));
      return 2;
    }
  }

  ::mkdir(dir.c_str(), 0755);
  int root = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) {
    std::fprintf(stderr, "stripefs-stress: %s: %s\n", dir.c_str(), std::strerror(errno));
    return 2;
  }

  std::optional<State> persisted;
  g_state.path = state_path;
  if (!state_path.empty() && ::access(state_path.c_str(), F_OK) == 0) {
    std::string err;
    persisted = LoadState(state_path, &err);
    if (!persisted) {
      std::fprintf(stderr, "stripefs-stress: %s\n", err.c_str());
      return 2;
    }
    if (persisted->threads != static_cast<int>(threads + overwriters) || persisted->files != g_files) {
      std::fprintf(stderr, "stripefs-stress: %s was written with --threads + --overwriters %d, --files %d\n",
                   state_path.c_str(), persisted->threads, persisted->files);
      return 2;
    }
  }
  const unsigned all = threads + overwriters;
  // Start from what is recorded, so that a save before every thread has set
  // up (a kill during setup) loses no reservation and no clean record.
  if (persisted) g_state.state = *persisted;
  g_state.state.threads = static_cast<int>(all);
  g_state.state.files = g_files;
  g_state.state.max_size = g_max_size;
  g_state.state.t.resize(all);

  std::printf("stripefs-stress: seed %llu, %u threads + %u overwriters, %d files each, max size %llu, %s\n",
              static_cast<unsigned long long>(g_seed), threads, overwriters, g_files,
              static_cast<unsigned long long>(g_max_size),
              ops ? fmt::format("{} ops", ops).c_str() : fmt::format("{} s", seconds).c_str());
  std::fflush(stdout);

  g_sigbus_root_fd = root;
  g_sigbus_exit_code = allow_disconnect ? 0 : 3;
  struct sigaction sa {};
  sa.sa_handler = OnSigbus;
  sigaction(SIGBUS, &sa, nullptr);

  std::vector<std::unique_ptr<Worker>> workers;
  for (unsigned t = 0; t < all; ++t) workers.push_back(std::make_unique<Worker>(t, root, t >= threads));
  auto start = Clock::now();
  // Take over what an earlier run left, one thread at a time (files are checked as they are read).
  int probed = 0;
  try {
    for (unsigned t = 0; t < all; ++t) workers[t]->setup(persisted ? &persisted->t[t] : nullptr);
    for (unsigned t = 0; t < all; ++t) probed += workers[t]->probe_adopted();
  } catch (const Disconnected&) {
    g_disconnected = true;
  }
  if (probed)
    std::printf("stripefs-stress: adopted %d files from an earlier run: each read, 1 byte per MiB rewritten, re-read (%.1f s)\n",
                probed, std::chrono::duration<double>(Clock::now() - start).count());
  if (!g_disconnected) {
    std::lock_guard lock(g_state.mu);
    g_state.save_locked();
  }
  auto deadline = ops ? Clock::time_point::max()
                      : start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::thread> pool;
  if (!g_disconnected) {
    for (unsigned t = 0; t < all; ++t) {
      uint64_t mine = ops ? ops / all + (t < ops % all ? 1 : 0) : 0;
      if (ops && mine == 0) continue;
      pool.emplace_back([&, t, mine] { workers[t]->run(mine, deadline); });
    }
  }
  for (auto& th : pool) th.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  Stats total;
  for (auto& w : workers) total.add(w->stats());
  std::string kinds;
  for (int k = 0; k < kKinds; ++k)
    if (total.ok[k] || total.expected_errors[k])
      kinds += fmt::format(" {}={}{}", kKindNames[k], total.ok[k],
                           total.expected_errors[k] ? fmt::format("(+{} expected errors)", total.expected_errors[k]) : "");
  std::printf("stripefs-stress: %llu ops in %.1f s (%.0f/s), written %.1f MiB, read %.1f MiB\n  ops:%s\n",
              static_cast<unsigned long long>(total.ops), elapsed, total.ops / std::max(elapsed, 1e-9),
              total.bytes_written / double(kMiB), total.bytes_read / double(kMiB), kinds.c_str());
  if (g_state.enabled()) {
    std::lock_guard lock(g_state.mu);
    size_t clean = 0;
    uint64_t bytes = 0;
    for (auto& ts : g_state.state.t)
      for (auto& [s, r] : ts.clean) clean++, bytes += r.size;
    std::printf("  state: %zu files clean after fsync (%llu bytes) in %s\n", clean, static_cast<unsigned long long>(bytes),
                state_path.c_str());
  }
  if (g_log) std::fclose(g_log);
  if (g_disconnected) {
    std::printf("stripefs-stress: the mount went away (ENOTCONN); stopped\n");
    std::fflush(stdout);
    return allow_disconnect ? 0 : 3;
  }
  return 0;
}
