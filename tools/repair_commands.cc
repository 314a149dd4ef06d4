// SPDX-License-Identifier: Apache-2.0
// scrub, add-drive and replace-drive: checking and repairing data, and
// changing a pool's drives, online (through the daemon) or offline.
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>

#include "engine/pool/pool.h"
#include "fs/control.h"
#include "tools/commands.h"

namespace stripefs {
namespace {

// Prints a scrub's outcome; returns the exit status (1 when something stays bad).
int PrintScrub(const ScrubReport& r, uint64_t files, bool json) {
  if (json) {
    nlohmann::json j = ScrubReportJson(r);
    j["files"] = files;
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("checked {} files, {} chunks, {} read: {} blocks repaired from intact replicas\n", files, r.chunks,
               Human(r.bytes), r.repaired_blocks);
    if (r.missing_replicas) {
      fmt::print("{} replicas are on missing drives (not checked; `stripefs replace-drive` rebuilds them)\n",
                 r.missing_replicas);
    }
    for (const auto& line : r.unrepairable) fmt::print("UNREPAIRABLE: {}\n", line);
  }
  if (!r.unrepairable.empty()) {
    fmt::print(stderr, "stripefs: {} chunk(s) have blocks no replica holds intact; reading them fails with EIO\n",
               r.unrepairable.size());
    return 1;
  }
  return 0;
}

// Online (TARGET a mountpoint): the daemon adds the drive through the
// kAddDriveXattr of the mount root and keeps the outcome for this process,
// which reads it back (see fs/control.h).
int AddDriveOnline(const std::string& mountpoint, const DriveSpec& spec, bool force) {
  std::error_code ec;
  // The daemon runs elsewhere (its cwd is /): it gets an absolute path.
  const std::filesystem::path path = std::filesystem::weakly_canonical(std::filesystem::absolute(spec.path, ec), ec);
  struct stat mnt, at;
  const std::filesystem::path probe = std::filesystem::exists(path, ec) ? path : path.parent_path();
  if (stat(mountpoint.c_str(), &mnt) == 0 && stat(probe.c_str(), &at) == 0 && at.st_dev == mnt.st_dev) {
    return Fail(fmt::format("cannot add {} to {}: it is inside the pool's own mount", spec.path, mountpoint));
  }
  const std::string value = nlohmann::json{{"path", path.string()}, {"size", spec.size}, {"force", force}}.dump();
  const int rc = setxattr(mountpoint.c_str(), fs::kAddDriveXattr.data(), value.data(), value.size(), 0);
  const int err = errno;
  auto answer = LiveXattr(mountpoint, fs::kAddDriveXattr);
  nlohmann::json j = answer.ok() ? nlohmann::json::parse(answer.value(), nullptr, false) : nlohmann::json();
  if (rc != 0) {
    if (j.is_object() && j.value("ok", true) == false) {
      return Fail(fmt::format("cannot add {} to {}: {}", spec.path, mountpoint, j.value("error", "")));
    }
    if (err == EROFS) return Fail(fmt::format("cannot add {} to {}: the mount is read-only", spec.path, mountpoint));
    return Fail(fmt::format("cannot add {} to {}: {}", spec.path, mountpoint, strerror(err)));
  }
  if (!j.is_object() || !j.contains("id")) return Fail("the daemon's add-drive answer is not JSON");
  fmt::print("added {} as drive {}; new chunks use it now\n", spec.path, j["id"].get<uint32_t>());
  return 0;
}

}  // namespace

int RunScrub(const std::string& target, bool json) {
  const TargetKind kind = KindOfTarget(target);
  if (kind == TargetKind::kMissing) return FailMissing(target);
  if (kind == TargetKind::kPoolMetadata) {  // an unmounted pool
    auto pool = Pool::Open(target, Pool::Mode::kMount);
    if (!pool.ok()) {
      if (pool.status().code() == Code::kBusy) return Fail(pool.status().message() + "; give its mountpoint instead");
      return Fail(fmt::format("cannot scrub {}: {}", target, pool.status().message()));
    }
    uint64_t files = 0;
    Progress progress("scrub");
    auto r = pool.value()->scrub([&](const ScrubReport& so_far) { progress.show(++files, so_far); });
    progress.finish();
    if (!r.ok()) return Fail(r.status());
    return PrintScrub(r.value(), files, json);
  }
  if (!LiveXattr(target, fs::kDfXattr).ok()) {
    return Fail(fmt::format("{} is neither a stripefs mountpoint nor a pool's metadata directory", target));
  }
  // Online: the daemon scrubs one file per request, so progress is per file
  // and readers and writers of other files are not held up.
  struct stat root;
  if (stat(target.c_str(), &root) != 0) return Fail(fmt::format("{}: {}", target, strerror(errno)));
  ScrubReport total;
  if (auto df = LiveXattr(target, fs::kDfXattr); df.ok()) {  // about what the scrub reads, for the progress line
    auto j = nlohmann::json::parse(df.value(), nullptr, false);
    for (const auto& s : j.is_discarded() ? nlohmann::json::array() : j["segments"]) {
      if (s.value("state", "present") == "present") total.planned_bytes += s["used"].get<uint64_t>();
    }
  }
  uint64_t files = 0;
  std::set<ino_t> seen;  // a file with several links is scrubbed once
  Progress progress("scrub");
  auto opts = std::filesystem::directory_options::skip_permission_denied;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(target, opts, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (lstat(it->path().c_str(), &st) != 0 || st.st_dev != root.st_dev) {
      if (S_ISDIR(st.st_mode)) it.disable_recursion_pending();  // another file system mounted below
      continue;
    }
    if (!S_ISREG(st.st_mode) || !seen.insert(st.st_ino).second) continue;
    auto v = LiveXattr(it->path().string(), fs::kScrubXattr, 64 << 10);
    ++files;
    if (!v.ok()) {
      if (v.status().code() == Code::kNotFound) continue;  // removed meanwhile
      total.unrepairable.push_back(fmt::format("{}: {}", it->path().string(), v.status().message()));
      continue;
    }
    auto j = nlohmann::json::parse(v.value(), nullptr, false);
    if (j.is_discarded()) return Fail("the daemon's scrub answer is not JSON");
    total.chunks += j["chunks"].get<uint64_t>();
    total.bytes += j["bytes"].get<uint64_t>();
    total.repaired_blocks += j["repaired_blocks"].get<uint64_t>();
    total.missing_replicas += j["missing_replicas"].get<uint64_t>();
    for (const auto& line : j["unrepairable"]) {
      total.unrepairable.push_back(fmt::format("{}: {}", it->path().string(), line.get<std::string>()));
    }
    progress.show(files, total);
  }
  progress.finish();
  if (ec) return Fail(fmt::format("walking {}: {}", target, ec.message()));
  return PrintScrub(total, files, json);
}

int RunAddDrive(const std::string& target, const std::string& drive, bool force) {
  auto spec = ParseDriveSpec(drive);
  if (!spec.ok()) return Fail(spec.status());
  const TargetKind kind = KindOfTarget(target);
  if (kind == TargetKind::kMissing) return FailMissing(target);
  if (kind != TargetKind::kPoolMetadata) {
    if (!LiveXattr(target, fs::kDfXattr).ok()) {
      return Fail(fmt::format("{} is neither a stripefs mountpoint nor a pool's metadata directory", target));
    }
    return AddDriveOnline(target, spec.value(), force);
  }
  auto id = Pool::AddDrive(target, spec.value(), force);
  if (!id.ok()) {
    if (id.status().code() == Code::kBusy) {
      return Fail(id.status().message() + "; unmount it before adding a drive, or give its mountpoint to add the "
                                          "drive while it is mounted");
    }
    return Fail(fmt::format("cannot add {} to {}: {}", spec->path, target, id.status().message()));
  }
  fmt::print("added {} as drive {}; new chunks use it from the next mount\n", spec->path, id.value());
  return 0;
}

int RunReplaceDrive(const std::string& meta_dir, uint32_t id, const std::string& drive, bool force, bool json) {
  auto spec = ParseDriveSpec(drive);
  if (!spec.ok()) return Fail(spec.status());
  uint64_t files = 0;
  ScrubReport report;
  {
    Progress progress("rebuild");
    auto r = Pool::ReplaceDrive(meta_dir, id, spec.value(), force,
                                [&](const ScrubReport& so_far) { progress.show(++files, so_far); });
    if (!r.ok()) {
      if (r.status().code() == Code::kBusy) return Fail(r.status().message() + "; unmount it before replacing a drive");
      return Fail(fmt::format("cannot replace drive {} of {}: {}", id, meta_dir, r.status().message()));
    }
    report = std::move(r).value();
  }
  if (!json) fmt::print("drive {} is now {}\n", id, spec->path);
  return PrintScrub(report, files, json);
}

}  // namespace stripefs
