// SPDX-License-Identifier: Apache-2.0
// The operations of a stripefs-stress thread, each checked against its model
// (see worker.h).
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

}  // namespace stress
