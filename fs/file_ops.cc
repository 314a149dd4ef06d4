// SPDX-License-Identifier: Apache-2.0
// File data: open handles, read, write, truncate, fallocate, seek, release,
// fsync (see ops.h).
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "fs/fuse_ring.h"
#include "fs/ops.h"
#include "fs/session_loop.h"

namespace stripefs::fs {

using meta::InodeRecord;

namespace {

// Whether the caller of req has gid as its group or among its supplementary ones.
bool InGroup(fuse_req_t req, uint32_t gid) {
  if (fuse_req_ctx(req)->gid == gid) return true;
  std::vector<gid_t> groups(32);
  int n = fuse_req_getgroups(req, static_cast<int>(groups.size()), groups.data());
  if (n > static_cast<int>(groups.size())) {
    groups.resize(static_cast<size_t>(n));
    n = fuse_req_getgroups(req, n, groups.data());
  }
  if (n <= 0) return false;  // unknown: treated as not a member, so the bit is dropped
  groups.resize(std::min(groups.size(), static_cast<size_t>(n)));
  return std::find(groups.begin(), groups.end(), gid) != groups.end();
}

// What the kernel's VFS does before a file's data or owner changes, here
// because the kernel leaves it to us (FUSE_HANDLE_KILLPRIV_V2; fallocate):
// set-user-ID goes, and set-group-ID when group execute is set or the caller
// is not in the file's group (root counts as in every group). Callers decide
// whether CAP_FSETID spares the file. The kernel's cached mode is dropped so
// stat shows the change.
Status DropSuidgid(fuse_req_t req, fuse_ino_t ino) {
  Frontend* f = F(req);
  auto b = f->ns().brief(ino);
  if (!b.ok()) return b.status();
  if ((b->mode & (S_ISUID | S_ISGID)) == 0) return Status::OK();
  uint32_t drop = b->mode & S_ISUID;
  if (b->mode & S_ISGID) {
    if (b->mode & S_IXGRP) {
      drop |= S_ISGID;
    } else if (fuse_req_ctx(req)->uid == 0) {
      // capable: a set-group-ID without group execute stays
    } else if (auto full = f->ns().get(ino); !full.ok() || !InGroup(req, full->gid)) {
      drop |= S_ISGID;  // rare (sgid without group execute): the full record for its gid
    }
  }
  if (drop == 0) return Status::OK();
  meta::AttrChange c;
  c.mode = b->mode & ~drop & 07777;
  auto r = f->ns().setattr(ino, c);
  if (!r.ok()) return r.status();
  f->attributes_changed(ino);
  return Status::OK();
}

}  // namespace

void OpSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi) {
  Frontend* f = F(req);
  // A chown (always) or a truncate by a caller without CAP_FSETID: the
  // kernel asks us to clear the bits first, as the VFS would.
  if (RequestKillsSuidgid()) {
    if (Status s = DropSuidgid(req, ino); !s.ok()) return ReplyError(req, s, "setattr");
  }
  auto r = f->ns().get(ino);
  if (Failed(req, r, "setattr")) return;
  int64_t now = meta::NowNs();
  if (to_set & FUSE_SET_ATTR_SIZE) {
    if (!S_ISREG(r->mode)) return (void)fuse_reply_err(req, S_ISDIR(r->mode) ? EISDIR : EINVAL);
    std::shared_ptr<ObjectStore::Object> obj;
    if (fi && fi->fh) {
      obj = reinterpret_cast<FileHandle*>(fi->fh)->obj;
    } else {
      auto o = f->store().object(r.value());
      if (Failed(req, o, "truncate")) return;
      obj = o.value();
    }
    r = f->store().truncate(*obj, static_cast<uint64_t>(attr->st_size), now);
    obj.reset();
    f->store().forget_if_unused(ino);
    if (Failed(req, r, "truncate")) return;
  }
  meta::AttrChange c;
  if (to_set & FUSE_SET_ATTR_MODE) c.mode = attr->st_mode;
  if (to_set & FUSE_SET_ATTR_UID) c.uid = attr->st_uid;
  if (to_set & FUSE_SET_ATTR_GID) c.gid = attr->st_gid;
  if (to_set & FUSE_SET_ATTR_ATIME) c.atime_ns = int64_t{attr->st_atim.tv_sec} * 1000000000 + attr->st_atim.tv_nsec;
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) c.atime_ns = now;
  if (to_set & FUSE_SET_ATTR_MTIME) c.mtime_ns = int64_t{attr->st_mtim.tv_sec} * 1000000000 + attr->st_mtim.tv_nsec;
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) c.mtime_ns = now;
  if (c.mode || c.uid || c.gid || c.atime_ns || c.mtime_ns || (to_set & FUSE_SET_ATTR_CTIME)) {
    r = f->ns().setattr(ino, c);
    if (Failed(req, r, "setattr")) return;
  }
  struct stat st = ToStat(r.value());
  fuse_reply_attr(req, &st, f->cache_timeout());
}

void OpenFile(fuse_req_t req, const InodeRecord& r, fuse_file_info* fi, bool created) {
  Frontend* f = F(req);
  auto obj = f->store().object(r, /*just_created=*/created);  // a new file has no chunks to load
  if (Failed(req, obj, "open")) return;
  auto* h = new FileHandle{obj.value()};
  fi->fh = reinterpret_cast<uint64_t>(h);
  // Cached pages stay valid across opens: all writes pass through here, and
  // the kernel drops them itself when it sees size or mtime change. Not with
  // -o strictatime: reads the page cache answers never reach us to move
  // atime, so each open reads through the daemon at least once.
  // Not on a reader either: the writer, another process, may have changed
  // the file since, so each open reads it afresh.
  fi->keep_cache = !f->reader() && f->atime() != AtimeMode::kEveryRead;
  // An O_DIRECT open is answered with direct_io: its I/O skips the page cache
  // either way, but on the kernel's direct_io path a write no longer goes
  // through file_remove_privs, which asks us for security.capability before
  // every write (a GETXATTR round trip). The kernel then leaves clearing
  // suid/sgid to us (OpWrite). Only O_DIRECT opens: a direct_io open cannot be
  // mmapped shared, and buffered opens keep the page cache.
  if (fi->flags & O_DIRECT) fi->direct_io = 1;
  f->opened(r.ino);
  if (created) {
    fuse_entry_param e = ToEntry(r, f->cache_timeout());
    if (fuse_reply_create(req, &e, fi) != 0) {
      f->closed(r.ino);
      delete h;
    }
  } else if (fuse_reply_open(req, fi) != 0) {
    f->closed(r.ino);
    delete h;
  }
}

void OpOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto r = F(req)->ns().get(ino);
  if (Failed(req, r, "open")) return;
  if (S_ISDIR(r->mode)) return (void)fuse_reply_err(req, EISDIR);
  if (!S_ISREG(r->mode)) return (void)fuse_reply_err(req, ENXIO);
  if (RequestKillsSuidgid()) {  // O_TRUNC by a caller without CAP_FSETID
    if (Status s = DropSuidgid(req, ino); !s.ok()) return ReplyError(req, s, "open");
    r = F(req)->ns().get(ino);
    if (Failed(req, r, "open")) return;
  }
  if ((fi->flags & O_TRUNC) && r->size > 0) {  // atomic O_TRUNC: the kernel leaves the cut to us
    auto obj = F(req)->store().object(r.value());
    if (Failed(req, obj, "open")) return;
    r = F(req)->store().truncate(*obj.value(), 0, meta::NowNs());
    if (Failed(req, r, "open")) return;  // the handle opened below keeps the cached state
  }
  OpenFile(req, r.value(), fi, false);
}

void OpRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  Frontend* f = F(req);
  auto r = f->ns().brief(ino);
  if (Failed(req, r, "read")) return;
  uint64_t file_size = r->size;
  if (static_cast<uint64_t>(off) >= file_size) return (void)fuse_reply_buf(req, nullptr, 0);
  size = static_cast<size_t>(std::min<uint64_t>(size, file_size - static_cast<uint64_t>(off)));
  auto* h = reinterpret_cast<FileHandle*>(fi->fh);
  const char* bytes = nullptr;
  if (char* ring_payload = FuseRing::ReplyBuffer(size)) {
    // Over io_uring the drives read straight into the reply's ring buffer
    // (aligned reads; others through one copy, as below).
    Status s = f->store().read(*h->obj, static_cast<uint64_t>(off), size, ring_payload);
    if (!s.ok()) return ReplyError(req, s, "read");
    bytes = ring_payload;
  } else {
    thread_local AlignedBuffer buf;  // one per worker, reused: the reply is sent from it
    auto read = f->store().read(*h->obj, static_cast<uint64_t>(off), size, buf);
    if (Failed(req, read, "read")) return;
    bytes = read.value();
  }
  // Before the reply: once the reader has its bytes, its next stat may be
  // answered by another worker, and must already see the new atime.
  f->maybe_touch_atime(ino, r.value());
  fuse_reply_buf(req, bytes, size);
  if (Evictor* e = f->evictor()) e->accessed(ino);
}


void OpWrite(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
  if (Status room = F(req)->pool().check_metadata_room(); !room.ok()) return ReplyError(req, room, "write");
  if (RequestKillsSuidgid()) {
    if (Status s = DropSuidgid(req, ino); !s.ok()) return ReplyError(req, s, "write");
  }
  auto* h = reinterpret_cast<FileHandle*>(fi->fh);
  auto r = F(req)->store().write(*h->obj, static_cast<uint64_t>(off), buf, size);
  // Cache mode: no room is a reason to evict, not to fail. Room for a whole
  // chunk on every replica, as a write reserves.
  Evictor* e = F(req)->evictor();
  for (int attempt = 0; e && attempt < 3 && !r.ok() && r.status().code() == Code::kNoSpace; ++attempt) {
    if (!e->make_room(size + uint64_t{h->obj->chunk_size} * h->obj->replicas)) break;
    r = F(req)->store().write(*h->obj, static_cast<uint64_t>(off), buf, size);
  }
  if (Failed(req, r, "write")) return;
  if (e) e->accessed(ino);
  fuse_reply_write(req, size);
}

void OpFallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length, fuse_file_info* fi) {
  if (offset < 0 || length <= 0) return (void)fuse_reply_err(req, EINVAL);
  auto* h = reinterpret_cast<FileHandle*>(fi->fh);
  const auto off = static_cast<uint64_t>(offset), len = static_cast<uint64_t>(length);
  // fallocate changes what the file holds (its size, or zeros where data
  // was), and the kernel leaves suid/sgid to us here too. Root stands for
  // CAP_FSETID, as with default_permissions elsewhere.
  if (fuse_req_ctx(req)->uid != 0) {
    if (Status s = DropSuidgid(req, ino); !s.ok()) return ReplyError(req, s, "fallocate");
  }
  Status s;
  if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)) {
    s = F(req)->store().punch_hole(*h->obj, off, len);
  } else if (mode == 0 || mode == FALLOC_FL_KEEP_SIZE) {
    s = F(req)->pool().check_metadata_room();
    if (s.ok()) s = F(req)->store().allocate(*h->obj, off, len, mode == FALLOC_FL_KEEP_SIZE);
  } else if ((mode & ~FALLOC_FL_KEEP_SIZE) == FALLOC_FL_ZERO_RANGE) {
    // Zeros over the range, its space allocated: a punch (whole chunks go,
    // the rest is written with zeros), then an allocation of what the punch
    // dropped (and of the size past the end, unless KEEP_SIZE).
    s = F(req)->pool().check_metadata_room();
    if (s.ok()) s = F(req)->store().punch_hole(*h->obj, off, len);
    if (s.ok()) s = F(req)->store().allocate(*h->obj, off, len, mode & FALLOC_FL_KEEP_SIZE);
  } else {
    return (void)fuse_reply_err(req, EOPNOTSUPP);  // collapse and insert-range are not offered
  }
  if (!s.ok()) return ReplyError(req, s, "fallocate");
  F(req)->attributes_changed(ino);
  fuse_reply_err(req, 0);
}

void OpLseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, fuse_file_info* fi) {
  if (whence != SEEK_DATA && whence != SEEK_HOLE) return (void)fuse_reply_err(req, EINVAL);  // the kernel does the rest
  auto r = F(req)->ns().get(ino);
  if (Failed(req, r, "lseek")) return;
  auto* h = reinterpret_cast<FileHandle*>(fi->fh);
  auto pos = F(req)->store().seek(*h->obj, static_cast<uint64_t>(std::max<off_t>(off, 0)), whence == SEEK_DATA, r->size);
  if (Failed(req, pos, "lseek")) return;
  fuse_reply_lseek(req, static_cast<off_t>(pos.value()));
}

void OpFlush(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

void OpRelease(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Frontend* f = F(req);
  auto* h = reinterpret_cast<FileHandle*>(fi->fh);
  if (f->closed(ino)) {
    auto trimmed = f->store().trim(*h->obj);
    if (!trimmed.ok()) spdlog::warn("giving back unused space of inode {}: {}", ino, trimmed.status().message());
    auto r = f->ns().get(ino);
    if (r.ok()) f->maybe_reclaim(r.value());
    // The trim changed st_blocks behind the kernel's back. Safe from here: the
    // kernel does not wait for a release while holding the inode.
    if (trimmed.ok() && trimmed.value() && r.ok() && r->nlink > 0) f->attributes_changed(ino);
  }
  delete h;
  f->store().forget_if_unused(ino);
  fuse_reply_err(req, 0);
}

void OpFsync(fuse_req_t req, fuse_ino_t, int, fuse_file_info* fi) {
  // A file of a ram directory has nothing to make durable: it is gone at the
  // next mount whatever is synced, so its fsync does no work.
  auto* h = fi ? reinterpret_cast<FileHandle*>(fi->fh) : nullptr;
  if (h && h->obj->strategy->ram_only()) return (void)fuse_reply_err(req, 0);
  Status s = F(req)->store().sync();
  if (!s.ok()) return ReplyError(req, s, "fsync");
  fuse_reply_err(req, 0);
}

}  // namespace stripefs::fs
