// The stripefs command: mkfs, mount, placement, df, fsck, stats, scrub, add-drive, replace-drive.
#include <CLI/CLI.hpp>
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
#include "fs/fuse_fs.h"
#include "tools/command_line.h"
#include "tools/daemon.h"
#include "tools/mount_options.h"

namespace stripefs {
namespace {

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

// ---- mkfs ----

int RunMkfs(const std::string& meta_dir, const std::vector<std::string>& drives, const std::string& ram,
            const std::string& chunk, const std::string& strategy, uint32_t replicas, bool force) {
  FormatOptions o;
  o.meta_dir = meta_dir;
  o.strategy = strategy;
  o.replicas = replicas;
  o.force = force;
  for (const auto& d : drives) {
    auto spec = ParseDriveSpec(d);
    if (!spec.ok()) return Fail("--drive " + spec.status().message());
    o.drives.push_back(spec.value());
  }
  if (!ram.empty()) {
    auto size = ParseSize(ram);
    if (!size.ok()) return Fail("--ram: " + size.status().message());
    o.ram_size = size.value();
  }
  auto cs = ParseSize(chunk);
  if (!cs.ok()) return Fail("--chunk-size: " + cs.status().message());
  if (!CheckChunkSize(cs.value()).ok()) {
    return Fail(fmt::format("--chunk-size {}: must be a power of two from 1M to 64M", chunk));
  }
  o.chunk_size = static_cast<uint32_t>(cs.value());
  Status s = FormatPool(o, getuid(), getgid());
  if (!s.ok()) return Fail(s);
  auto pool = Pool::Open(meta_dir, Pool::Mode::kInspect);
  if (!pool.ok()) return Fail(pool.status());
  const auto& cfg = pool.value()->config();
  fmt::print("formatted pool {} in {}\n", cfg.uuid, meta_dir);
  fmt::print("  chunk size {}, strategy {}, replicas {}\n", cfg.chunk_size, cfg.strategy, cfg.replicas);
  for (const auto& seg : cfg.segments) {
    fmt::print("  segment {} {:5} {} ({} bytes)\n", seg.id, seg.kind, seg.path, seg.capacity);
  }
  return 0;
}

// ---- placement and df: through a live mount's virtual xattrs, or an unmounted pool ----

// name: NUL-terminated (a fs/control.h name). initial: the first buffer size;
// answers that are costly to compute (a scrub) must fit in it, so the daemon
// is asked only once.
Result<std::string> LiveXattr(const std::string& path, std::string_view name, size_t initial = 4096) {
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

void PrintPlacement(const nlohmann::json& j, bool json) {
  if (json) {
    fmt::print("{}\n", j.dump());
    return;
  }
  fmt::print("{}\n  uri {}\n  size {}  chunk size {}  chunks {}\n", j["path"].get<std::string>(),
             j["uri"].get<std::string>(), j["size"].get<uint64_t>(), j["chunk_size"].get<uint64_t>(), j["chunks"].size());
  // One line per replica; a replica in several extents gets a line for each further one.
  fmt::print("  {:>6} {:>12} {:>10}  {:>7}  {:>12} {:>10}  {}\n", "chunk", "file offset", "length", "segment",
             "drive offset", "extent", "drive");
  for (const auto& c : j["chunks"]) {
    for (const auto& r : c["replicas"]) {
      bool first = true;
      for (const auto& e : r["extents"]) {
        if (first) {
          fmt::print("  {:>6} {:>12} {:>10}  {:>7}  {:>12} {:>10}  {}\n", c["index"].get<uint64_t>(),
                     c["offset"].get<uint64_t>(), c["length"].get<uint64_t>(), r["segment"].get<uint32_t>(),
                     e["offset"].get<uint64_t>(), e["length"].get<uint64_t>(), r["path"].get<std::string>());
        } else {
          fmt::print("  {:>6} {:>12} {:>10}  {:>7}  {:>12} {:>10}\n", "", "", "", "", e["offset"].get<uint64_t>(),
                     e["length"].get<uint64_t>());
        }
        first = false;
      }
    }
  }
}

int RunPlacement(const std::string& path, const std::string& meta_dir, bool json) {
  if (meta_dir.empty()) {
    std::error_code ec;
    std::string abs = std::filesystem::absolute(path, ec).string();
    if (!std::filesystem::exists(path, ec)) return Fail(fmt::format("{}: no such file", path));
    // In pages, so a file of any size fits the kernel's 64 KiB per xattr.
    auto j = fs::ReadPlacementPages([&](const std::string& name) { return LiveXattr(path, name); });
    if (!j.ok() && j.status().code() == Code::kBusy) return Fail(fmt::format("{}: {}", path, j.status().message()));
    if (!j.ok()) {  // a daemon from before the pages answers only the whole document
      auto v = LiveXattr(path, fs::kPlacementXattr);
      if (!v.ok()) {
        return Fail(fmt::format("{} is not a regular file on a mounted stripefs pool ({}); "
                                "for an unmounted pool give --meta DIR and the path inside the pool",
                                path, j.status().message()));
      }
      j = nlohmann::json::parse(v.value(), nullptr, false);
      if (j->is_discarded()) return Fail("the daemon's placement answer is not JSON");
    }
    j.value()["path"] = abs;
    PrintPlacement(j.value(), json);
    return 0;
  }
  auto pool = Pool::Open(meta_dir, Pool::Mode::kInspect);
  if (!pool.ok()) return Fail(pool.status());
  auto inode = pool.value()->resolve(path);
  if (!inode.ok()) return Fail(fmt::format("{} in pool {}: {}", path, meta_dir, inode.status().message()));
  auto j = pool.value()->placement(inode.value(), path);
  if (!j.ok()) return Fail(j.status());
  PrintPlacement(j.value(), json);
  return 0;
}

int RunDf(const std::string& target, bool json) {
  std::error_code ec;
  if (!std::filesystem::exists(target, ec)) return Fail(fmt::format("{}: no such file or directory", target));
  nlohmann::json j;
  if (std::filesystem::exists(std::filesystem::path(target) / "CURRENT", ec)) {
    auto pool = Pool::Open(target, Pool::Mode::kInspect);
    if (!pool.ok()) return Fail(pool.status());
    auto usage = pool.value()->usage_json();
    if (!usage.ok()) return Fail(usage.status());
    j = std::move(usage).value();
  } else {
    auto v = LiveXattr(target, fs::kDfXattr);
    if (!v.ok()) {
      return Fail(fmt::format("{} is neither a stripefs mountpoint nor a pool's metadata directory", target));
    }
    j = nlohmann::json::parse(v.value(), nullptr, false);
    if (j.is_discarded()) return Fail("the daemon's df answer is not JSON");
  }
  if (json) {
    fmt::print("{}\n", j.dump());
    return 0;
  }
  fmt::print("{:>3} {:5} {:>9} {:>9} {:>9} {:>6}  {}\n", "id", "kind", "capacity", "used", "free", "free%", "path");
  for (const auto& s : j["segments"]) {
    uint64_t cap = s["capacity"], used = s["used"];
    fmt::print("{:>3} {:5} {:>9} {:>9} {:>9} {:>5.1f}%  {}\n", s["id"].get<uint32_t>(), s["kind"].get<std::string>(),
               Human(cap), Human(used), Human(cap - used), cap ? 100.0 * static_cast<double>(cap - used) / static_cast<double>(cap) : 0.0,
               s["path"].get<std::string>());
  }
  if (j.contains("metadata")) {
    const auto& m = j["metadata"];
    fmt::print("metadata {} used, {} free on its file system ({} kept for deletes)  {}\n",
               Human(m["used"].get<uint64_t>()), Human(m["free"].get<uint64_t>()), Human(m["reserve"].get<uint64_t>()),
               m["path"].get<std::string>());
  }
  return 0;
}

// ---- scrub and replace-drive ----

// Running totals on stderr when it is a terminal; nothing otherwise.
class Progress {
 public:
  explicit Progress(const char* what) : what_(what), on_(isatty(STDERR_FILENO) == 1) {}
  void show(std::string_view status) {
    if (!on_) return;
    fmt::print(stderr, "\r{}: {}   ", what_, status);
    shown_ = true;
  }
  void show(uint64_t files, const ScrubReport& r) {
    if (on_) show(fmt::format("{} files, {} checked, {} blocks repaired", files, Human(r.bytes), r.repaired_blocks));
  }
  ~Progress() {
    if (shown_) fmt::print(stderr, "\n");
  }

 private:
  const char* what_;
  bool on_;
  bool shown_ = false;
};

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

int RunScrub(const std::string& target, bool json) {
  std::error_code ec;
  if (!std::filesystem::exists(target, ec)) return Fail(fmt::format("{}: no such file or directory", target));
  if (std::filesystem::exists(std::filesystem::path(target) / "CURRENT", ec)) {  // an unmounted pool
    auto pool = Pool::Open(target, Pool::Mode::kMount);
    if (!pool.ok()) {
      if (pool.status().code() == Code::kBusy) return Fail(pool.status().message() + "; give its mountpoint instead");
      return Fail(fmt::format("cannot scrub {}: {}", target, pool.status().message()));
    }
    uint64_t files = 0;
    Progress progress("scrub");
    auto r = pool.value()->scrub([&](const ScrubReport& so_far) { progress.show(++files, so_far); });
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
  uint64_t files = 0;
  std::set<ino_t> seen;  // a file with several links is scrubbed once
  Progress progress("scrub");
  auto opts = std::filesystem::directory_options::skip_permission_denied;
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
  if (ec) return Fail(fmt::format("walking {}: {}", target, ec.message()));
  return PrintScrub(total, files, json);
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

int RunAddDrive(const std::string& target, const std::string& drive, bool force) {
  auto spec = ParseDriveSpec(drive);
  if (!spec.ok()) return Fail(spec.status());
  std::error_code ec;
  if (!std::filesystem::exists(target, ec)) return Fail(fmt::format("{}: no such file or directory", target));
  if (!std::filesystem::exists(std::filesystem::path(target) / "CURRENT", ec)) {
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

// ---- stats ----

void PrintStats(const nlohmann::json& j) {
  fmt::print("up {:.0f} s\n", j["uptime_s"].get<double>());
  fmt::print("{:<12} {:>10} {:>10} {:>9} {:>9} {:>9} {:>10}\n", "request", "count", "bytes", "p50 us", "p90 us",
             "p99 us", "max us");
  for (const auto& [kind, r] : j["requests"].items()) {
    fmt::print("{:<12} {:>10} {:>10} {:>9.1f} {:>9.1f} {:>9.1f} {:>10.1f}\n", kind, r["count"].get<uint64_t>(),
               Human(r["bytes"].get<uint64_t>()), r["p50_us"].get<double>(), r["p90_us"].get<double>(),
               r["p99_us"].get<double>(), r["max_us"].get<double>());
  }
  const auto& c = j["cache"];
  fmt::print("RAM tier: {} of {} in {} chunks; hits {}, misses {}, evictions {}\n", Human(c["bytes"].get<uint64_t>()),
             Human(c["capacity"].get<uint64_t>()), c["entries"].get<uint64_t>(), c["hits"].get<uint64_t>(),
             c["misses"].get<uint64_t>(), c["evictions"].get<uint64_t>());
  const auto& e = j["eviction"];
  fmt::print("on full: {}; files evicted {} ({}); dirty bytes {}; blocks repaired {}; errors EIO {}, ENOSPC {}\n",
             e["mode"].get<std::string>(), e["objects"].get<uint64_t>(), Human(e["bytes"].get<uint64_t>()),
             j["dirty_bytes"].get<uint64_t>(), j["repaired_blocks"].get<uint64_t>(), j["errors"]["EIO"].get<uint64_t>(),
             j["errors"]["ENOSPC"].get<uint64_t>());
  for (const auto& seg : j["segments"]) {
    fmt::print("segment {} {:5} {:>9} used of {:>9}  {}\n", seg["id"].get<uint32_t>(), seg["kind"].get<std::string>(),
               Human(seg["used"].get<uint64_t>()), Human(seg["capacity"].get<uint64_t>()),
               seg["path"].get<std::string>());
  }
}

int RunStats(const std::string& mountpoint, bool json, double watch) {
  for (;;) {
    auto v = LiveXattr(mountpoint, fs::kStatsXattr, 64 << 10);
    if (!v.ok()) {
      std::error_code ec;
      if (!std::filesystem::exists(mountpoint, ec)) return Fail(fmt::format("{}: no such file or directory", mountpoint));
      return Fail(fmt::format("{} is not a stripefs mountpoint ({})", mountpoint, v.status().message()));
    }
    auto j = nlohmann::json::parse(v.value(), nullptr, false);
    if (j.is_discarded()) return Fail("the daemon's stats answer is not JSON");
    if (json) {
      fmt::print("{}\n", j.dump());
    } else {
      PrintStats(j);
    }
    if (watch <= 0) return 0;
    std::fflush(stdout);
    usleep(static_cast<useconds_t>(watch * 1e6));
    if (!json) fmt::print("\n");
  }
}

int RunFsck(const std::string& meta_dir, bool verify) {
  auto pool = Pool::Open(meta_dir, Pool::Mode::kCheck);
  if (!pool.ok()) {
    if (pool.status().code() == Code::kBusy) return Fail(pool.status().message() + "; unmount it before fsck");
    return Fail(fmt::format("cannot check {}: {}", meta_dir, pool.status().message()));
  }
  std::vector<std::string> notes;
  Result<std::vector<std::string>> problems = std::vector<std::string>{};
  {
    Progress progress("fsck --verify");
    problems = pool.value()->fsck(verify, &notes, [&](uint64_t bytes) { progress.show(Human(bytes) + " checked"); });
  }
  if (!problems.ok()) return Fail(problems.status());
  for (const auto& n : notes) fmt::print("{}\n", n);
  for (const auto& p : problems.value()) fmt::print("PROBLEM: {}\n", p);
  if (!problems.value().empty()) {
    fmt::print(stderr, "stripefs: fsck found {} problem(s) in {}\n", problems.value().size(), meta_dir);
    return 1;
  }
  fmt::print("pool {} is clean\n", pool.value()->config().uuid);
  return 0;
}

// A refused -o option exits 2, before anything is touched.
int RunMountCommand(const MountArgs& args) {
  auto options = ParseMountOptions(args.o, args.options);
  if (!options.ok()) {
    std::cerr << "stripefs: " << options.status().message() << "\n";
    return 2;
  }
  return RunMount(std::move(options).value());
}

}  // namespace
}  // namespace stripefs

int main(int argc, char** argv) {
  using namespace stripefs;
  CLI::App app{"stripefs: a FUSE filesystem that stripes files over NVMe drives"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(STRIPEFS_VERSION));
  CommandLine cl;
  DeclareCommands(app, cl);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*cl.mkfs) {
      const MkfsArgs& a = cl.mkfs_args;
      return RunMkfs(a.meta_dir, a.drives, a.ram, a.chunk, a.strategy, a.replicas, a.force);
    }
    if (*cl.mount) return RunMountCommand(cl.mount_args);
    if (*cl.placement) return RunPlacement(cl.placement_args.path, cl.placement_args.meta_dir, cl.placement_args.json);
    if (*cl.df) return RunDf(cl.df_args.target, cl.df_args.json);
    if (*cl.fsck) return RunFsck(cl.fsck_args.meta_dir, cl.fsck_args.verify);
    if (*cl.scrub) return RunScrub(cl.scrub_args.target, cl.scrub_args.json);
    if (*cl.stats) return RunStats(cl.stats_args.mountpoint, cl.stats_args.json, cl.stats_args.watch);
    if (*cl.add_drive) return RunAddDrive(cl.add_drive_args.target, cl.add_drive_args.drive, cl.add_drive_args.force);
    if (*cl.replace_drive) {
      const ReplaceDriveArgs& a = cl.replace_drive_args;
      return RunReplaceDrive(a.meta_dir, a.id, a.drive, a.force, a.json);
    }
  } catch (const std::exception& e) {
    std::cerr << "stripefs: " << e.what() << "\n";
    return 1;
  }
  return 1;
}
