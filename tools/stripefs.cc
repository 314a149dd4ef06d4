// SPDX-License-Identifier: Apache-2.0
// The stripefs command: main() and the subcommands that own a pool's whole
// life (mkfs, mount, fsck); the others are in tools/report_commands.cc and
// tools/repair_commands.cc (see tools/commands.h).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "engine/pool/pool.h"
#include "fs/fuse_fs.h"
#include "tools/command_line.h"
#include "tools/commands.h"
#include "tools/daemon.h"
#include "tools/mount_options.h"

namespace stripefs {
namespace {

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

int RunFsck(const std::string& meta_dir, bool verify) {
  auto pool = Pool::Open(meta_dir, Pool::Mode::kCheck);
  if (!pool.ok()) {
    if (pool.status().code() == Code::kBusy) return Fail(pool.status().message() + "; unmount it before fsck");
    return Fail(fmt::format("cannot check {}: {}", meta_dir, pool.status().message()));
  }
  std::vector<std::string> notes;
  Result<std::vector<std::string>> problems = std::vector<std::string>{};
  {
    Progress progress(verify ? "fsck --verify" : "fsck");
    problems = pool.value()->fsck(verify, &notes,
                                  [&](uint64_t bytes, uint64_t about) { progress.show(bytes, about, "checked"); });
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
    // --help and --version print and succeed. Every other error is a usage
    // error: exit status 2, as for the other tools (0 ok, 1 failure, 2 usage).
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "stripefs: " << e.what() << "\nRun 'stripefs --help' (or 'stripefs SUBCOMMAND --help') for the usage.\n";
    return 2;
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
    if (*cl.layout) return RunLayout(cl.layout_args.dir, cl.layout_args.settings, cl.layout_args.json);
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
