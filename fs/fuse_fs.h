// SPDX-License-Identifier: Apache-2.0
// The FUSE low-level frontend: inode and handle bookkeeping, each request
// turned into a namespace or object-store call, Status turned into errno.
// No placement and no I/O here. The ops are in ops.h, the state they share
// in frontend.h, the control names the admin commands read in control.h.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <spdlog/common.h>

#include "engine/pool/pool.h"
#include "fs/evictor.h"

#include "fs/session_loop.h"

namespace stripefs::fs {

// How reads move atime: -o noatime, the default relatime, -o strictatime.
enum class AtimeMode { kNever, kRelative, kEveryRead };

struct MountOptions {
  std::string meta_dir;
  std::string mountpoint;
  bool foreground = false;
  bool degraded = false;  // -o degraded: mount with missing drives left out
  std::vector<std::string> fuse_options;  // passed through to libfuse / the kernel
  AtimeMode atime = AtimeMode::kRelative;  // -o noatime|relatime|strictatime, ranked as the kernel does
  bool remount = false;                    // -o remount: change the running mount (see RunMount)
  bool nonempty = false;                   // -o nonempty: mount over a directory that holds files
  std::optional<bool> read_only;           // -o ro / -o rw, the last one given
  // Set by the daemon for -o ro on an etcd pool: a reader beside the pool's
  // writer, which takes no lock and keeps what the kernel caches short (see
  // kReaderTimeout in fs/frontend.h).
  bool reader = false;
  unsigned workers = 8;  // -o workers=N: threads serving requests
  // -o transport=uring|dev; unset: uring where the kernel offers it (see RingAvailable), else dev.
  std::optional<Transport> transport;
  std::optional<uint64_t> meta_reserve;  // -o meta_reserve=SIZE (see Pool::check_metadata_room)
  std::string ram_cache = "s3fifo";      // -o ram_cache=s3fifo|lru|off: the RAM tier's read cache
  bool evict = false;         // -o on_full=evict: cache mode (see fs/evictor.h)
  EvictorOptions evictor;     // -o evict_high=PCT,evict_low=PCT
  std::string metrics_file;   // -o metrics=FILE: Prometheus text, refreshed every 5 s
  std::string metrics_listen;  // -o metrics_listen=[HOST:]PORT as HOST:PORT: the metrics over HTTP
  std::string log_file;       // -o log=FILE (default STATE/stripefs.log)
  // -o state=DIR: where the daemon keeps its pid file (and log). Default: the
  // metadata directory, or for an etcd pool /run/stripefs/ and a name made
  // from its address, and for a reader a directory in that one named after
  // its mountpoint (see DefaultStateDir in tools/daemon.cc).
  std::string state_dir;
  spdlog::level::level_enum log_level = spdlog::level::info;  // -o log_level=LEVEL
};

// What a frontend served beside the mount (the object channel, which tools/
// starts) tells the mount of the changes it makes to the pool.
struct MountNotices {
  // ino's data or attributes changed: the kernel drops its cached pages and attributes.
  std::function<void(uint64_t ino)> data_changed;
  // The name in parent was made or removed: the kernel drops its cached entry.
  std::function<void(uint64_t parent, std::string_view name)> entry_changed;
  // r lost a link: reclaimed now unless a handle of the mount holds it.
  std::function<void(const meta::InodeRecord& r)> unlinked;
};

// Mounts pool at options.mountpoint and serves requests until unmounted or
// signalled. on_ready is called once the kernel mount exists (before
// serving); what it returns is kept while the mount serves and dropped
// before the mount's session goes, so the notices stay valid while it lives.
// Returns the error that stopped it from mounting, or OK after a clean unmount.
Status Serve(Pool* pool, const MountOptions& options,
             const std::function<std::shared_ptr<void>(const MountNotices&)>& on_ready);

}  // namespace stripefs::fs
