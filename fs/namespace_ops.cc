// SPDX-License-Identifier: Apache-2.0
// Names and directories: lookup, attributes, create, link, unlink, rename,
// directory listings (see ops.h).
#include <sys/stat.h>

#include <functional>
#include <string>
#include <vector>

#include "engine/pool/layout.h"
#include "fs/ops.h"
#include "fs/session_loop.h"

namespace stripefs::fs {

using meta::InodeRecord;

namespace {

// Ownership of a new inode: the caller's uid; the gid of a set-group-ID parent, else the caller's.
Result<meta::NewInode> NewFor(fuse_req_t req, fuse_ino_t parent, uint32_t mode) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  Frontend* f = F(req);
  meta::NewInode n;
  n.mode = mode;
  n.uid = ctx->uid;
  n.gid = ctx->gid;
  auto dir = f->ns().get(parent);
  if (dir.ok() && (dir->mode & S_ISGID)) {
    n.gid = dir->gid;
    if (S_ISDIR(mode)) n.mode |= S_ISGID;
  }
  if (S_ISREG(mode)) {
    SFS_ASSIGN_OR_RETURN(FileLayout layout, LayoutForNewFile(f->ns(), parent, f->pool().config()));
    n.chunk_size = layout.chunk_size;
    n.strategy = layout.strategy;
    n.replicas = layout.replicas;
  } else if (S_ISDIR(mode)) {
    SFS_ASSIGN_OR_RETURN(n.xattrs, InheritedLayoutXattrs(f->ns(), parent));
  }
  return n;
}

// Creates an inode from NewFor's description, or replies with the error.
Result<InodeRecord> CreateChild(fuse_req_t req, fuse_ino_t parent, const char* name, uint32_t mode,
                                const std::function<void(meta::NewInode&)>& fill = {}) {
  SFS_RETURN_IF_ERROR(F(req)->pool().check_metadata_room());
  SFS_ASSIGN_OR_RETURN(meta::NewInode n, NewFor(req, parent, mode));
  if (fill) fill(n);
  return F(req)->ns().create(parent, name, n);
}

// The same for a file with no name (O_TMPFILE), an orphan until linked.
Result<InodeRecord> CreateUnnamed(fuse_req_t req, fuse_ino_t parent, uint32_t mode) {
  SFS_RETURN_IF_ERROR(F(req)->pool().check_metadata_room());
  SFS_ASSIGN_OR_RETURN(meta::NewInode n, NewFor(req, parent, mode));
  return F(req)->ns().create_unnamed(parent, n);
}

// Cache mode learns every name a regular file gets.
void Named(fuse_req_t req, const Result<InodeRecord>& r, fuse_ino_t parent, const char* name) {
  if (Evictor* e = F(req)->evictor(); e && r.ok() && S_ISREG(r->mode)) e->named(r->ino, parent, name, meta::NowNs());
}

// The directory's entries now, "." and ".." first.
Status ListInto(Frontend* f, const InodeRecord& dir, DirHandle* h) {
  SFS_ASSIGN_OR_RETURN(auto list, f->ns().list(dir.ino));
  h->entries.clear();
  h->entries.push_back({".", {dir.ino, S_IFDIR}});
  h->entries.push_back({"..", {dir.parent ? dir.parent : dir.ino, S_IFDIR}});
  for (auto& l : list) h->entries.push_back(std::move(l));
  h->read_since_listed = false;
  return Status::OK();
}

void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi, bool plus) {
  auto* h = reinterpret_cast<DirHandle*>(fi->fh);
  if (off == 0 && h->read_since_listed) {  // rewinddir: POSIX wants the entries as they are now
    auto dir = F(req)->ns().get(ino);
    if (!dir.ok() && dir.status().code() == Code::kNotFound) {
      h->entries.clear();  // removed while open: nothing is left in it
    } else if (Failed(req, dir, "readdir")) {
      return;
    } else if (Status s = ListInto(F(req), dir.value(), h); !s.ok()) {
      return ReplyError(req, s, "readdir");
    }
  }
  h->read_since_listed = true;
  std::vector<char> buf(size);
  size_t used = 0;
  for (size_t i = static_cast<size_t>(off); i < h->entries.size(); ++i) {
    const auto& l = h->entries[i];
    size_t n;
    if (plus) {
      fuse_entry_param e{};
      bool dots = l.name == "." || l.name == "..";
      if (!dots) {
        auto r = F(req)->ns().get(l.entry.ino);
        if (!r.ok()) continue;  // removed since opendir
        e = ToEntry(r.value(), F(req)->cache_timeout());
      } else {
        e.attr.st_ino = l.entry.ino;
        e.attr.st_mode = S_IFDIR;
      }
      n = fuse_add_direntry_plus(req, buf.data() + used, size - used, l.name.c_str(), &e, static_cast<off_t>(i + 1));
    } else {
      struct stat st {};
      st.st_ino = l.entry.ino;
      st.st_mode = l.entry.type;
      n = fuse_add_direntry(req, buf.data() + used, size - used, l.name.c_str(), &st, static_cast<off_t>(i + 1));
    }
    if (n > size - used) break;
    used += n;
  }
  fuse_reply_buf(req, buf.data(), used);
}

}  // namespace

void OpLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  // "." and "..": only the kernel's decoding of a file handle asks for them
  // (open_by_handle_at, an NFS export), for a node it no longer has cached:
  // the node itself, or its parent. Node ids are inode numbers, never
  // reused, so they hold across a forget.
  if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) {
    auto self = F(req)->ns().get(parent);
    if (self.ok() && name[1] == '.') self = F(req)->ns().get(self->parent ? self->parent : self->ino);
    return ReplyEntry(req, self, "lookup");  // a node gone answers ENOENT: the kernel makes it ESTALE
  }
  auto r = F(req)->ns().lookup(parent, name);
  if (!r.ok() && r.status().code() == Code::kNotFound) {
    // A negative entry, cached like a positive one: every change goes through
    // the writer (for a reader, another process: the same short bound).
    fuse_entry_param e{};
    e.entry_timeout = F(req)->cache_timeout();
    fuse_reply_entry(req, &e);
    return;
  }
  ReplyEntry(req, r, "lookup");
}

void OpGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  auto r = F(req)->ns().get(ino);
  if (!r.ok() && r.status().code() == Code::kNotFound) {
    if (auto removed = F(req)->removed_open_dir(ino)) r = std::move(*removed);
  }
  if (Failed(req, r, "getattr")) return;
  struct stat st = ToStat(r.value());
  fuse_reply_attr(req, &st, F(req)->cache_timeout());
}

void OpReadlink(fuse_req_t req, fuse_ino_t ino) {
  auto r = F(req)->ns().get(ino);
  if (Failed(req, r, "readlink")) return;
  if (!S_ISLNK(r->mode)) return (void)fuse_reply_err(req, EINVAL);
  fuse_reply_readlink(req, r->symlink.c_str());
}

void OpMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  auto r = CreateChild(req, parent, name, mode, [&](meta::NewInode& n) { n.rdev = rdev; });
  Named(req, r, parent, name);
  ReplyEntry(req, r, "mknod");
}

void OpMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  ReplyEntry(req, CreateChild(req, parent, name, S_IFDIR | (mode & 07777)), "mkdir");
}

void OpSymlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  ReplyEntry(req, CreateChild(req, parent, name, S_IFLNK | 0777, [&](meta::NewInode& n) { n.symlink = target; }),
             "symlink");
}

void OpLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char* name) {
  if (Status room = F(req)->pool().check_metadata_room(); !room.ok()) return ReplyError(req, room, "link");
  auto r = F(req)->ns().link(ino, parent, name);
  Named(req, r, parent, name);
  ReplyEntry(req, r, "link");
}

void OpUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto r = F(req)->ns().unlink(parent, name);
  if (Failed(req, r, "unlink")) return;
  if (Evictor* e = F(req)->evictor()) e->unnamed(parent, name);
  F(req)->maybe_reclaim(r.value());
  fuse_reply_err(req, 0);
}

void OpRmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Status s = F(req)->ns().rmdir(parent, name);
  fuse_reply_err(req, ToErrno(s));
}

void OpRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
              unsigned int flags) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  auto r = F(req)->ns().rename(parent, name, newparent, newname, flags, ctx->uid, ctx->gid);
  if (Failed(req, r, "rename")) return;
  if (Evictor* e = F(req)->evictor()) e->renamed(parent, name, newparent, newname, flags & RENAME_EXCHANGE);
  if (r.value()) F(req)->maybe_reclaim(*r.value());
  fuse_reply_err(req, 0);
}

void OpCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  if (CreatesUnnamed()) {  // open(O_TMPFILE): name is a placeholder
    auto r = CreateUnnamed(req, parent, S_IFREG | (mode & 07777));
    if (Failed(req, r, "create (O_TMPFILE)")) return;
    return OpenFile(req, r.value(), fi, true);
  }
  auto r = CreateChild(req, parent, name, S_IFREG | (mode & 07777));
  if (Failed(req, r, "create")) return;
  Named(req, r, parent, name);
  OpenFile(req, r.value(), fi, true);
}

void OpOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Frontend* f = F(req);
  auto dir = f->ns().get(ino);
  if (Failed(req, dir, "opendir")) return;
  auto* h = new DirHandle;
  if (Status s = ListInto(f, dir.value(), h); !s.ok()) {
    delete h;
    return ReplyError(req, s, "opendir");
  }
  fi->fh = reinterpret_cast<uint64_t>(h);
  f->dir_opened(dir.value());
  if (fuse_reply_open(req, fi) != 0) {
    f->dir_closed(ino);
    delete h;
  }
}

void OpReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  ReadDir(req, ino, size, off, fi, false);
}

void OpReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  ReadDir(req, ino, size, off, fi, true);
}

void OpReleasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  F(req)->dir_closed(ino);
  delete reinterpret_cast<DirHandle*>(fi->fh);
  fuse_reply_err(req, 0);
}

void OpFsyncdir(fuse_req_t req, fuse_ino_t, int, fuse_file_info*) {
  Status s = F(req)->pool().kv().sync();
  fuse_reply_err(req, ToErrno(s));
}

}  // namespace stripefs::fs
