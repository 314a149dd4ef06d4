// SPDX-License-Identifier: Apache-2.0
// The FUSE session loop stripefs serves requests with (and bench/null_fuse
// measures the transport with).
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

namespace stripefs::fs {

class RequestStats;

// Serves se's requests on `count` threads (the caller's among them) until
// unmounted or signalled; after a signal, unmounts and stops every worker.
// With stats, every request's kind, payload and time are recorded there.
void RunWorkers(fuse_session* se, unsigned count, RequestStats* stats = nullptr);

// Whether the WRITE request the calling worker is serving (called from a write
// op under RunWorkers) carries FUSE_WRITE_KILL_SUIDGID: the kernel left the
// clearing of the file's set-user-ID and set-group-ID bits to the daemon (it
// does so for writes through a direct_io open, by a writer without
// CAP_FSETID). libfuse 3.14 does not pass a write's flags to the op, so the
// loop keeps them from the request's header. False outside a WRITE.
bool WriteKillsSuidgid();

// Whether the CREATE request the calling worker is serving (called from the
// create op under RunWorkers) came from the kernel as FUSE_TMPFILE: a file
// with no name, for open(O_TMPFILE). The loop passes it to libfuse 3.14,
// which has no op for it, as a CREATE. False for any other request.
bool CreatesUnnamed();

}  // namespace stripefs::fs
