// SPDX-License-Identifier: Apache-2.0
// The `-o` options of `stripefs mount`: each option checked and turned into its
// field of fs::MountOptions. No printing and no exit here; the command prints
// the message of a refused option and exits 2.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "fs/fuse_fs.h"

namespace stripefs {

// opts: the -o values, already split at commas, in command-line order. base
// holds what the other arguments set (DIR, MOUNTPOINT, -f); the options are
// applied on top of it. Options stripefs does not know go to fuse_options in
// order; a known option with a wrong value is refused with kInvalidArgument and
// a message that says what the option takes.
Result<fs::MountOptions> ParseMountOptions(const std::vector<std::string>& opts, fs::MountOptions base);

}  // namespace stripefs
