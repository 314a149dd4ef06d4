// SPDX-License-Identifier: Apache-2.0
// The subcommands of `stripefs` and their options, as CLI11 declarations (see command_line.h).
#include "tools/command_line.h"

namespace stripefs {

namespace {

// Arguments that several subcommands take, each with its one help text.
void AddOnlineOrOfflineTarget(CLI::App* cmd, std::string& target) {
  cmd->add_option("TARGET", target, "A mountpoint (online), or an unmounted pool's metadata directory")->required();
}
void AddNewDrivePath(CLI::App* cmd, std::string& drive) {
  cmd->add_option("PATH", drive, "PATH[:SIZE] of the new drive; a file is created or grown to SIZE")->required();
}

}  // namespace

void DeclareCommands(CLI::App& app, CommandLine& cl) {
  MkfsArgs& mkfs = cl.mkfs_args;
  cl.mkfs = app.add_subcommand("mkfs", "Format a pool: drives (files or block devices), a RAM segment, metadata");
  cl.mkfs->add_option("--meta", mkfs.meta_dir, "Where the pool's metadata lives: a directory (RocksDB), or etcd://HOST:PORT[,HOST:PORT...]/PREFIX (an etcd cluster)")->required();
  cl.mkfs->add_option("--drive", mkfs.drives, "PATH[:SIZE] of a drive; a file is created or grown to SIZE (K/M/G/T)")->required();
  cl.mkfs->add_option("--ram", mkfs.ram, "Size of a RAM segment (K/M/G/T)");
  cl.mkfs->add_option("--chunk-size", mkfs.chunk, "Chunk size, a power of two from 1M to 64M")->capture_default_str();
  cl.mkfs->add_option("--strategy", mkfs.strategy, "Placement strategy: striped, random, free-ratio-first, two-choice or round-robin")->capture_default_str();
  cl.mkfs->add_option("--replicas", mkfs.replicas, "Copies of each chunk, on distinct drives (1-3)")->capture_default_str()->check(CLI::Range(1, 3));
  cl.mkfs->add_flag("--force", mkfs.force, "Overwrite drives and a metadata directory that already hold a pool");

  MountArgs& mount = cl.mount_args;
  cl.mount = app.add_subcommand("mount", "Mount a pool; returns once the mount answers");
  cl.mount->add_option("DIR", mount.options.meta_dir, "Where the pool's metadata lives (--meta of mkfs: a directory or an etcd:// address)")->required();
  cl.mount->add_option("MOUNTPOINT", mount.options.mountpoint, "An existing directory to mount on")->required();
  cl.mount->add_flag("-f,--foreground", mount.options.foreground, "Stay in the foreground, logging to stderr");
  cl.mount->add_option("-o", mount.o,
                       "Mount options, comma-separated: degraded (use the pool with a drive missing), "
                       "workers=N (threads serving requests, 1-256, default 8), transport=uring|dev (FUSE over io_uring "
                       "or /dev/fuse; default uring where the kernel offers it), log=FILE (the daemon's log file; default "
                       "STATE/stripefs.log; it logs to syslog too), state=DIR (where the daemon keeps its pid file and log; "
                       "default the metadata directory, or /run/stripefs/NAME for an etcd pool), log_level=LEVEL (default info), metrics=FILE (the stats in Prometheus text format, "
                       "rewritten every 5 s), metrics_listen=[HOST:]PORT (the same over HTTP at /metrics; on 127.0.0.1 unless HOST "
                       "is given), on_full=evict|enospc (cache mode: evict least recently used files "
                       "instead of failing when full; evict_high=PCT and evict_low=PCT set when, default 90 and 80 (evict_high=100: "
                       "only writes that find no room evict); "
                       "a file with xattr user.stripefs.pin=1 stays), ram_cache=s3fifo|lru|off (the RAM segment as a read cache of "
                       "whole chunks; default s3fifo), meta_reserve=SIZE (free space kept on the "
                       "metadata directory's file system, or in the etcd cluster's quota, for deletes; default 64M or a tenth of it), noatime (reads never update "
                       "atime; the default is relatime), strictatime (every read does), or FUSE options such as ro, "
                       "allow_other")
      ->delimiter(',');

  PlacementArgs& placement = cl.placement_args;
  cl.placement = app.add_subcommand("placement", "Show where each chunk of a file lives");
  cl.placement->add_option("PATH", placement.path, "A file on a mounted pool, or a path inside the pool with --meta")->required();
  cl.placement->add_option("--meta", placement.meta_dir, "Read an unmounted pool's metadata directory instead");
  cl.placement->add_flag("--json", placement.json, "Print JSON");

  DfArgs& df = cl.df_args;
  cl.df = app.add_subcommand("df", "Capacity and use of every segment");
  cl.df->add_option("TARGET", df.target, "A mountpoint, or an unmounted pool's metadata directory")->required();
  cl.df->add_flag("--json", df.json, "Print JSON");

  LayoutArgs& layout = cl.layout_args;
  cl.layout = app.add_subcommand("layout", "Show or set the layout that files created in a directory of a mounted "
                                           "pool get (strategy, chunk_size, replicas)");
  cl.layout->add_option("DIR", layout.dir, "A directory on a mounted pool")->required();
  cl.layout->add_option("KEY=VALUE", layout.settings,
                        "strategy=NAME, chunk_size=SIZE (a power of two from 1M to 64M) or replicas=1|2|3; "
                        "KEY= goes back to the pool's default")
      ->check(CLI::Validator(
          [](std::string& kv) -> std::string {
            const std::string key = kv.substr(0, kv.find('='));
            if (kv.find('=') == std::string::npos || (key != "strategy" && key != "chunk_size" && key != "replicas")) {
              return "'" + kv + "' is not KEY=VALUE with KEY one of strategy, chunk_size, replicas";
            }
            return "";
          },
          "KEY=VALUE"));
  cl.layout->add_flag("--json", layout.json, "Print JSON");

  FsckArgs& fsck = cl.fsck_args;
  cl.fsck = app.add_subcommand("fsck", "Check an unmounted pool; lists every problem and exits non-zero if any");
  cl.fsck->add_option("DIR", fsck.meta_dir, "The pool's metadata directory")->required();
  cl.fsck->add_flag("--verify", fsck.verify, "Also read every block and check its checksum");

  StatsArgs& stats = cl.stats_args;
  cl.stats = app.add_subcommand("stats", "Requests, latency percentiles, RAM tier, evictions and space of a mount");
  cl.stats->add_option("MOUNTPOINT", stats.mountpoint, "A stripefs mountpoint")->required();
  cl.stats->add_flag("--json", stats.json, "Print JSON (one document per line with --watch)");
  cl.stats->add_option("--watch", stats.watch, "Then print every SECONDS what the mount did in that interval (rates, p99), until interrupted")->check(CLI::Range(0.1, 3600.0));

  ScrubArgs& scrub = cl.scrub_args;
  cl.scrub = app.add_subcommand("scrub", "Read and verify every replica of every file, rewriting bad blocks "
                                         "from intact replicas; exits non-zero if anything stays bad");
  AddOnlineOrOfflineTarget(cl.scrub, scrub.target);
  cl.scrub->add_flag("--json", scrub.json, "Print the report as JSON");

  AddDriveArgs& add = cl.add_drive_args;
  cl.add_drive = app.add_subcommand("add-drive", "Add a drive to a pool, mounted (new chunks use it at once) or not "
                                                 "(from the next mount)");
  AddOnlineOrOfflineTarget(cl.add_drive, add.target);
  AddNewDrivePath(cl.add_drive, add.drive);
  cl.add_drive->add_flag("--force", add.force, "Overwrite a drive that holds another stripefs pool");

  ReplaceDriveArgs& replace = cl.replace_drive_args;
  cl.replace_drive = app.add_subcommand("replace-drive", "Put a new drive in place of a missing or failing one of an "
                                                         "unmounted pool and rebuild its replicas from the other drives");
  cl.replace_drive->add_option("DIR", replace.meta_dir, "The pool's metadata directory")->required();
  cl.replace_drive->add_option("ID", replace.id, "The drive's segment id (as `stripefs df` shows it)")->required();
  AddNewDrivePath(cl.replace_drive, replace.drive);
  cl.replace_drive->add_flag("--force", replace.force, "Overwrite a new drive that holds another stripefs pool");
  cl.replace_drive->add_flag("--json", replace.json, "Print the rebuild report as JSON");
}

}  // namespace stripefs
