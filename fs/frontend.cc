// SPDX-License-Identifier: Apache-2.0
// The replies every op shares (see frontend.h).
#include "fs/frontend.h"

namespace stripefs::fs {

const char* Version() { return STRIPEFS_VERSION; }


using meta::InodeRecord;

namespace {

struct timespec ToTimespec(int64_t ns) {
  int64_t sec = ns / 1000000000, rem = ns % 1000000000;
  if (rem < 0) {  // times before 1970: tv_nsec must stay in [0, 1e9)
    --sec;
    rem += 1000000000;
  }
  return {static_cast<time_t>(sec), static_cast<long>(rem)};
}

}  // namespace

struct stat ToStat(const InodeRecord& r) {
  struct stat st {};
  st.st_ino = r.ino;
  st.st_mode = r.mode;
  st.st_nlink = r.nlink;
  st.st_uid = r.uid;
  st.st_gid = r.gid;
  st.st_rdev = r.rdev;
  st.st_size = S_ISDIR(r.mode) ? 4096 : static_cast<off_t>(r.size);
  st.st_blksize = 1 << 20;
  st.st_blocks = static_cast<blkcnt_t>((S_ISDIR(r.mode) ? 4096 : r.allocated) / 512);
  st.st_atim = ToTimespec(r.atime_ns);
  st.st_mtim = ToTimespec(r.mtime_ns);
  st.st_ctim = ToTimespec(r.ctime_ns);
  return st;
}

fuse_entry_param ToEntry(const InodeRecord& r, double timeout) {
  fuse_entry_param e{};
  e.ino = r.ino;
  e.generation = 1;
  e.attr = ToStat(r);
  e.attr_timeout = timeout;
  e.entry_timeout = timeout;
  return e;
}

// Replies with the errno of s, logging what the user cannot see from errno alone.
void ReplyError(fuse_req_t req, const Status& s, const char* op) {
  int err = ToErrno(s);
  F(req)->count_error(err);
  if (err == EIO || err == ENOSPC) spdlog::error("{}: {}", op, s.message());
  fuse_reply_err(req, err);
}

void ReplyEntry(fuse_req_t req, const Result<InodeRecord>& r, const char* op) {
  if (Failed(req, r, op)) return;
  fuse_entry_param e = ToEntry(r.value(), F(req)->cache_timeout());
  fuse_reply_entry(req, &e);
}

}  // namespace stripefs::fs
