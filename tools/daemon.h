// SPDX-License-Identifier: Apache-2.0
// The mount daemon: what `stripefs mount` does once its arguments are parsed.
// It forks (unless -f) and reports readiness back through a pipe, sets up the
// daemon's logging, opens the pool and applies the mount options to it, keeps
// DIR/daemon.pid, serves the mount and exits cleanly once it is unmounted.
#pragma once

#include "fs/fuse_fs.h"

namespace stripefs {

// Mounts the pool options.meta_dir on options.mountpoint. Without
// options.foreground the calling process returns as soon as the mount answers
// (its forked daemon serves it); with it, it serves the mount itself until it
// is unmounted. Returns the process's exit status: 0, or 1 after printing
// "stripefs: WHAT WENT WRONG" on stderr.
int RunMount(fs::MountOptions options);

}  // namespace stripefs
