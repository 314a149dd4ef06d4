// SPDX-License-Identifier: Apache-2.0
// The FUSE session loop stripefs serves requests with (and bench/null_fuse
// measures the transport with).
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

namespace stripefs::fs {

class RequestStats;

// How requests travel between the kernel and the daemon: reads and writes of
// /dev/fuse, or FUSE over io_uring (fs/fuse_ring.h) where the kernel offers it.
enum class Transport { kDev, kUring };

// Serves se's requests on `count` threads (the caller's among them) until
// unmounted or signalled; after a signal, unmounts and stops every worker.
// With kUring, as many ring threads again (at least one per CPU) take over
// once INIT has accepted the ring; the /dev/fuse workers stay for what the
// kernel still sends there. With stats, every request's kind, payload and
// time are recorded there.
void RunWorkers(fuse_session* se, unsigned count, RequestStats* stats = nullptr, Transport transport = Transport::kDev);

// The transport the running session's requests come through: "uring" once a
// request has come through the ring, else "dev".
const char* ActiveTransport();

// Whether the request the calling worker is serving (called from an op under
// RunWorkers) asks the daemon to clear the file's set-user-ID and
// set-group-ID bits: a WRITE with FUSE_WRITE_KILL_SUIDGID (by a writer
// without CAP_FSETID), a SETATTR with FATTR_KILL_SUIDGID (a chown, or a
// truncate without CAP_FSETID), an OPEN with FUSE_OPEN_KILL_SUIDGID (O_TRUNC
// without CAP_FSETID). The kernel sends them because the loop negotiates
// FUSE_HANDLE_KILLPRIV_V2. libfuse 3.14 passes none of these flags to the
// ops, so the loop keeps them from the request's header.
bool RequestKillsSuidgid();

// Whether the CREATE request the calling worker is serving (called from the
// create op under RunWorkers) came from the kernel as FUSE_TMPFILE: a file
// with no name, for open(O_TMPFILE). The loop passes it to libfuse 3.14,
// which has no op for it, as a CREATE. False for any other request.
bool CreatesUnnamed();

}  // namespace stripefs::fs
