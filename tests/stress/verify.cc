// SPDX-License-Identifier: Apache-2.0
// --verify-state of stripefs-stress (see verify.h).
#include "verify.h"

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

#include "pattern.h"
#include "run.h"

namespace stress {
namespace {

struct VerifyTotals {
  uint64_t clean_files = 0, clean_bytes = 0, other_files = 0, other_bytes = 0;
  uint64_t lost = 0, garbage = 0, errors = 0;
};

}  // namespace

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

}  // namespace stress
