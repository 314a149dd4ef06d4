// SPDX-License-Identifier: Apache-2.0
// What the subcommands share (see tools/commands.h).
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/pool/pool.h"
#include "fs/control.h"
#include "meta/etcd_kv_store.h"
#include "tools/commands.h"

namespace stripefs {

int Fail(const std::string& msg) {
  std::cerr << "stripefs: " << msg << "\n";
  return 1;
}
int Fail(const Status& s) { return Fail(s.message()); }

// PATH or PATH:SIZE.
Result<DriveSpec> ParseDriveSpec(const std::string& text) {
  DriveSpec spec;
  spec.path = text;
  auto colon = text.rfind(':');
  if (colon != std::string::npos) {
    spec.path = text.substr(0, colon);
    auto size = ParseSize(text.substr(colon + 1));
    if (!size.ok()) return Status::Invalid(fmt::format("{}: {}", text, size.status().message()));
    if (size.value() == 0) return Status::Invalid(fmt::format("{}: size must be above zero", text));
    spec.size = size.value();
  }
  if (spec.path.empty()) return Status::Invalid(fmt::format("{}: no path", text));
  return spec;
}

namespace {
// The mount of a stripefs pool that holds path, from /proc/self/mountinfo:
// its mountpoint and its source (the pool's metadata directory). Empty when
// none does.
std::pair<std::string, std::string> StripefsMountOf(const std::string& path) {
  std::pair<std::string, std::string> best;
  FILE* f = fopen("/proc/self/mountinfo", "r");
  if (!f) return best;
  char* line = nullptr;
  size_t cap = 0;
  while (getline(&line, &cap, f) > 0) {
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER_OPTIONS
    std::vector<std::string> fields;
    for (char* tok = strtok(line, " \n"); tok; tok = strtok(nullptr, " \n")) fields.emplace_back(tok);
    auto dash = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 5 || dash == fields.end() || fields.end() - dash < 3 || dash[1] != "fuse.stripefs") continue;
    std::string mnt = fields[4];
    if (path.rfind(mnt, 0) != 0 || (path.size() > mnt.size() && mnt != "/" && path[mnt.size()] != '/')) continue;
    if (mnt.size() >= best.first.size()) best = {mnt, dash[2]};
  }
  free(line);
  fclose(f);
  return best;
}
}  // namespace

std::optional<std::string> DeadMountProblem(const std::string& path) {
  // statfs, not stat: the kernel answers stat of a dead mount's root from its
  // attribute cache for a while, but statfs always asks the (gone) daemon.
  struct statfs st;
  if (statfs(path.c_str(), &st) == 0 || errno != ENOTCONN) return std::nullopt;
  std::error_code ec;
  const std::string abs = std::filesystem::absolute(path, ec).string();
  auto [mnt, meta] = StripefsMountOf(abs);
  if (mnt.empty()) mnt = abs;
  if (meta.rfind("stripefs:", 0) == 0) meta = meta.substr(9);  // the source of mounts made before 0.2
  return fmt::format("{} is on a dead mount: the stripefs daemon serving {} is no longer running. "
                     "Unmount it with `fusermount3 -u {}` (or `umount -l {}`), then mount the pool again "
                     "with `stripefs mount {} {}`",
                     path, mnt, mnt, mnt, meta.empty() ? "META_DIR" : meta, mnt);
}

int FailMissing(const std::string& path) {
  if (auto dead = DeadMountProblem(path)) return Fail(*dead);
  return Fail(fmt::format("{}: no such file or directory", path));
}

TargetKind KindOfTarget(const std::string& target) {
  if (meta::IsEtcdUri(target)) return TargetKind::kPoolMetadata;
  std::error_code ec;
  if (!std::filesystem::exists(target, ec)) return TargetKind::kMissing;
  if (std::filesystem::exists(std::filesystem::path(target) / "CURRENT", ec)) return TargetKind::kPoolMetadata;
  return TargetKind::kOther;
}

Result<std::string> LiveXattr(const std::string& path, std::string_view name, size_t initial) {
  std::string value(initial, '\0');
  for (;;) {
    ssize_t n = getxattr(path.c_str(), name.data(), value.data(), value.size());
    if (n >= 0) {
      value.resize(static_cast<size_t>(n));
      return value;
    }
    if (errno == ERANGE) {
      value.resize(value.size() * 4);
      continue;
    }
    return Status(errno == ENOENT ? Code::kNotFound : Code::kNotSupported, strerror(errno));
  }
}

std::string Human(uint64_t b) {
  const char* units[] = {"B", "K", "M", "G", "T"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{}B", b) : fmt::format("{:.1f}{}", v, units[u]);
}

std::string Clock(double seconds) {
  const auto s = static_cast<uint64_t>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60) : fmt::format("{}:{:02}", s / 60, s % 60);
}

void Progress::show(uint64_t done, uint64_t total, std::string_view more) {
  if (!on_) return;
  const auto now = std::chrono::steady_clock::now();
  if (shown_ && now - drawn_ < std::chrono::milliseconds(200)) return;
  drawn_ = now;
  std::string line = fmt::format("{}: {}", what_, Human(done));
  if (total > 0) {
    // The total is an estimate (used space, not replica bytes), so the line
    // never claims 100 % or a zero ETA before the work is done.
    const double fraction = std::min(0.99, static_cast<double>(done) / static_cast<double>(total));
    const double elapsed = std::chrono::duration<double>(now - started_).count();
    line += fmt::format(" of about {} ({:.0f}%)", Human(total), 100 * fraction);
    if (fraction > 0.01 && elapsed > 1) line += ", ETA " + Clock(elapsed * (1 - fraction) / fraction);
  }
  if (!more.empty()) line += fmt::format(", {}", more);
  fmt::print(stderr, "\r\033[K{}", line);  // \033[K: clear what a longer line left
  shown_ = true;
}

}  // namespace stripefs
