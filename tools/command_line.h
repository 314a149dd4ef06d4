// SPDX-License-Identifier: Apache-2.0
// The stripefs command line: the arguments of each subcommand as a struct, and
// the CLI11 declaration that fills it — names, help texts and checks, i.e.
// what `stripefs SUBCOMMAND --help` prints (packaging/man/stripefs.1 and the
// completion follow it; tests/integration/docs.sh checks that they do).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "fs/fuse_fs.h"

namespace stripefs {

struct MkfsArgs {
  std::string meta_dir, ram, chunk = "4M", strategy = "striped";
  std::vector<std::string> drives;
  uint32_t replicas = 1;
  bool force = false;
};

struct MountArgs {
  fs::MountOptions options;    // DIR, MOUNTPOINT and -f; the -o values go through ParseMountOptions
  std::vector<std::string> o;  // the -o values, split at commas
};

struct PlacementArgs {
  std::string path, meta_dir;
  bool json = false;
};

struct DfArgs {
  std::string target;
  bool json = false;
};

struct LayoutArgs {
  std::string dir;
  std::vector<std::string> settings;  // KEY=VALUE (KEY= removes it)
  bool json = false;
};

struct FsckArgs {
  std::string meta_dir;
  bool verify = false;
};

struct StatsArgs {
  std::string mountpoint;
  bool json = false;
  double watch = 0;
};

struct ScrubArgs {
  std::string target;
  bool json = false;
};

struct AddDriveArgs {
  std::string target, drive;
  bool force = false;
};

struct ReplaceDriveArgs {
  std::string meta_dir, drive;
  uint32_t id = 0;
  bool force = false, json = false;
};

// Every subcommand of one invocation, declared on an app by DeclareCommands.
// After app.parse, the subcommand given is the one whose App* is true.
struct CommandLine {
  MkfsArgs mkfs_args;
  MountArgs mount_args;
  PlacementArgs placement_args;
  DfArgs df_args;
  LayoutArgs layout_args;
  FsckArgs fsck_args;
  StatsArgs stats_args;
  ScrubArgs scrub_args;
  AddDriveArgs add_drive_args;
  ReplaceDriveArgs replace_drive_args;
  CLI::App *mkfs = nullptr, *mount = nullptr, *placement = nullptr, *df = nullptr, *layout = nullptr, *fsck = nullptr, *stats = nullptr,
           *scrub = nullptr, *add_drive = nullptr, *replace_drive = nullptr;
};

// Adds the subcommands to app, in the order --help lists them, bound to cl's
// argument structs. cl must outlive app's parse.
void DeclareCommands(CLI::App& app, CommandLine& cl);

}  // namespace stripefs
