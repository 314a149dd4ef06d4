// SPDX-License-Identifier: Apache-2.0
// A stripefs-stress thread: its checks and bookkeeping, taking over an
// earlier run's files, and the loop that picks operations (see worker.h).
#include "worker.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

namespace stress {

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

}  // namespace stress
