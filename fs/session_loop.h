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

}  // namespace stripefs::fs
