// SPDX-License-Identifier: Apache-2.0
// Namespace operations on directory entries: create (and reserve/add, its
// two halves for the write-back buffer), link, unlink, rmdir and rename.
// Like the rest of the namespace (namespace.cc), each reads what it needs,
// builds one Transaction, commits it, and only then updates the cache.
#include "meta/namespace.h"

#include <fmt/format.h>
#include <linux/fs.h>
#include <sys/stat.h>

namespace stripefs::meta {

namespace {
Status CheckName(std::string_view name) {
  if (name.size() > kNameMax) return Status(Code::kNameTooLong, "name longer than 255 bytes");
  if (name.empty() || name.find('/') != std::string_view::npos) return Status::Invalid("bad name");
  return Status::OK();
}
bool IsDir(uint32_t mode) { return S_ISDIR(mode); }
}  // namespace

// One link of r goes away; at zero the inode is an orphan (a directory is deleted outright).
void Namespace::drop_link(Transaction* txn, InodeRecord* r, int64_t now) {
  r->ctime_ns = now;
  if (IsDir(r->mode)) {
    r->nlink = 0;
    txn->del(InodeKey(r->ino));
    delete_xattrs(txn, r->ino);
    return;
  }
  r->nlink = r->nlink > 0 ? r->nlink - 1 : 0;
  put_inode(txn, *r);
  if (r->nlink == 0) txn->put(OrphanKey(r->ino), "");
}

Result<InodeRecord> Namespace::dir_for_new(uint64_t parent, std::string_view name) {
  SFS_RETURN_IF_ERROR(CheckName(name));
  SFS_ASSIGN_OR_RETURN(InodeRecord dir, load_dir(parent));
  if (dir.nlink == 0) return Status::NotFound("directory was removed");
  SFS_ASSIGN_OR_RETURN(auto existing, find(parent, name));
  if (existing) return Status::Exists("entry exists");
  return dir;
}

Result<NewEntry> Namespace::new_entry(uint64_t parent, std::string_view name, NewInode n) {
  // The stored counter is a bound, raised a batch at a time: most creates
  // then write no counter at all. A crash only leaves numbers unused.
  if (next_ino_ + 1 > ino_bound_) {
    Transaction txn;
    txn.put(NextInoKey(), EncodeU64(next_ino_ + kInoBatch));
    SFS_RETURN_IF_ERROR(kv_->commit(txn, false));
    ino_bound_ = next_ino_ + kInoBatch;
  }
  NewEntry e;
  e.parent = parent;
  e.name = name;
  e.xattrs = std::move(n.xattrs);
  InodeRecord& r = e.record;
  r.ino = next_ino_++;
  // A fresh number: nothing is stored under it yet, which a caching store can use.
  kv_->known_empty(XattrPrefix(r.ino));
  if (IsDir(n.mode)) kv_->known_empty(DirPrefix(r.ino));
  if (S_ISREG(n.mode)) {
    kv_->known_empty(ChunkPrefix(r.ino));
    kv_->known_empty(ChecksumPrefix(r.ino));
  }
  r.mode = n.mode;
  r.uid = n.uid;
  r.gid = n.gid;
  r.rdev = n.rdev;
  r.atime_ns = r.mtime_ns = r.ctime_ns = NowNs();
  r.nlink = IsDir(n.mode) ? 2 : 1;
  if (IsDir(n.mode)) r.parent = parent;
  if (S_ISLNK(n.mode)) {
    r.symlink = std::move(n.symlink);
    r.size = r.symlink.size();
  }
  if (S_ISREG(n.mode)) {
    r.uri = fmt::format("stripefs://{}/{:016x}", uuid_, r.ino);
    r.chunk_size = n.chunk_size;
    r.strategy = std::move(n.strategy);
    r.replicas = n.replicas;
  }
  return e;
}

void Namespace::put_new_inode(Transaction* txn, const NewEntry& e) {
  const InodeRecord& r = e.record;
  put_inode(txn, r);
  for (const auto& [xname, value] : e.xattrs) txn->put(XattrKey(r.ino, xname), value);
  if (S_ISREG(r.mode) && r.strategy == kRamStrategyName) txn->put(VolatileKey(r.ino), "");
}

void Namespace::add_entry(Transaction* txn, const NewEntry& e, InodeRecord* dir, int64_t now) {
  const InodeRecord& r = e.record;
  put_new_inode(txn, e);
  txn->put(DirEntryKey(e.parent, e.name), EncodeDirEntry({r.ino, r.mode & S_IFMT}));
  if (IsDir(r.mode)) dir->nlink++;
  dir->mtime_ns = dir->ctime_ns = std::max(dir->mtime_ns, now);
}

Status Namespace::store_entry(const NewEntry& e, InodeRecord dir, int64_t now) {
  Transaction txn;
  add_entry(&txn, e, &dir, now);
  put_inode(&txn, dir);
  return commit(&txn, {e.record, dir});
}

Result<InodeRecord> Namespace::create(uint64_t parent, std::string_view name, const NewInode& n) {
  ChangeLock lock(this);
  SFS_ASSIGN_OR_RETURN(InodeRecord dir, dir_for_new(parent, name));
  SFS_ASSIGN_OR_RETURN(NewEntry e, new_entry(parent, name, n));
  SFS_RETURN_IF_ERROR(store_entry(e, std::move(dir), e.record.ctime_ns));
  return std::move(e.record);
}

Result<InodeRecord> Namespace::create_unnamed(uint64_t parent, const NewInode& n) {
  if (!S_ISREG(n.mode)) return Status::Invalid("only a regular file can be created without a name");
  ChangeLock lock(this);
  SFS_ASSIGN_OR_RETURN(InodeRecord dir, load_dir(parent));
  if (dir.nlink == 0) return Status::NotFound("directory was removed");
  SFS_ASSIGN_OR_RETURN(NewEntry e, new_entry(parent, "", n));
  e.record.nlink = 0;
  Transaction txn;
  put_new_inode(&txn, e);
  txn.put(OrphanKey(e.record.ino), "");
  SFS_RETURN_IF_ERROR(commit(&txn, {e.record}));
  return std::move(e.record);
}

Result<NewEntry> Namespace::reserve(uint64_t parent, std::string_view name, NewInode n) {
  std::lock_guard lock(mu_);
  SFS_RETURN_IF_ERROR(dir_for_new(parent, name).status());
  return new_entry(parent, name, std::move(n));
}

Result<InodeRecord> Namespace::add(const NewEntry& e) {
  ChangeLock lock(this);
  SFS_ASSIGN_OR_RETURN(InodeRecord dir, dir_for_new(e.parent, e.name));
  SFS_RETURN_IF_ERROR(store_entry(e, std::move(dir), NowNs()));
  return e.record;
}

Result<InodeRecord> Namespace::link(uint64_t ino, uint64_t parent, std::string_view name) {
  SFS_RETURN_IF_ERROR(CheckName(name));
  ChangeLock lock(this);
  SFS_ASSIGN_OR_RETURN(InodeRecord r, load(ino));
  if (IsDir(r.mode)) return Status(Code::kPermission, "cannot hard-link a directory");
  SFS_ASSIGN_OR_RETURN(InodeRecord dir, load_dir(parent));
  SFS_ASSIGN_OR_RETURN(auto existing, find(parent, name));
  if (existing) return Status::Exists("entry exists");
  int64_t now = NowNs();
  Transaction txn;
  if (r.nlink == 0) txn.del(OrphanKey(ino));  // linkat(AT_EMPTY_PATH) of an open, unlinked file
  r.nlink++;
  r.ctime_ns = now;
  dir.mtime_ns = dir.ctime_ns = now;
  put_inode(&txn, r);
  put_inode(&txn, dir);
  txn.put(DirEntryKey(parent, name), EncodeDirEntry({ino, r.mode & S_IFMT}));
  SFS_RETURN_IF_ERROR(commit(&txn, {r, dir}));
  return r;
}

Result<InodeRecord> Namespace::unlink(uint64_t parent, std::string_view name) {
  ChangeLock lock(this);
  SFS_ASSIGN_OR_RETURN(InodeRecord dir, load_dir(parent));
  SFS_ASSIGN_OR_RETURN(auto e, find(parent, name));
  if (!e) return Status::NotFound("no such entry");
  SFS_ASSIGN_OR_RETURN(InodeRecord r, load(e->ino));
  if (IsDir(r.mode)) return Status(Code::kIsDirectory, "is a directory");
  int64_t now = NowNs();
  Transaction txn;
  txn.del(DirEntryKey(parent, name));
  drop_link(&txn, &r, now);
  dir.mtime_ns = dir.ctime_ns = now;
  put_inode(&txn, dir);
  SFS_RETURN_IF_ERROR(commit(&txn, {r, dir}));
  return r;
}

Status Namespace::rmdir(uint64_t parent, std::string_view name) {
  ChangeLock lock(this);
  SFS_ASSIGN_OR_RETURN(InodeRecord dir, load_dir(parent));
  SFS_ASSIGN_OR_RETURN(auto e, find(parent, name));
  if (!e) return Status::NotFound("no such entry");
  SFS_ASSIGN_OR_RETURN(InodeRecord r, load(e->ino));
  if (!IsDir(r.mode)) return Status(Code::kNotDirectory, "not a directory");
  SFS_ASSIGN_OR_RETURN(bool empty, is_empty_dir(r.ino));
  if (!empty) return Status(Code::kNotEmpty, "directory not empty");
  int64_t now = NowNs();
  Transaction txn;
  txn.del(DirEntryKey(parent, name));
  txn.del(InodeKey(r.ino));
  delete_xattrs(&txn, r.ino);
  dir.nlink--;
  dir.mtime_ns = dir.ctime_ns = now;
  put_inode(&txn, dir);
  SFS_RETURN_IF_ERROR(commit(&txn, {dir}));
  cache_.erase(r.ino);
  return Status::OK();
}

Result<std::optional<InodeRecord>> Namespace::rename(uint64_t parent, std::string_view name,
                                                     uint64_t new_parent, std::string_view new_name,
                                                     unsigned flags, uint32_t uid, uint32_t gid) {
  if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) {
    return Status::Invalid("unsupported rename flags");
  }
  if ((flags & RENAME_EXCHANGE) && (flags & (RENAME_NOREPLACE | RENAME_WHITEOUT))) {
    return Status::Invalid("conflicting rename flags");
  }
  SFS_RETURN_IF_ERROR(CheckName(new_name));
  ChangeLock lock(this);
  SFS_RETURN_IF_ERROR(load_dir(parent).status());
  SFS_RETURN_IF_ERROR(load_dir(new_parent).status());
  SFS_ASSIGN_OR_RETURN(auto src_entry, find(parent, name));
  if (!src_entry) return Status::NotFound("no such entry");
  SFS_ASSIGN_OR_RETURN(auto dst_entry, find(new_parent, new_name));
  if (dst_entry && dst_entry->ino == src_entry->ino) return std::optional<InodeRecord>();
  if ((flags & RENAME_NOREPLACE) && dst_entry) return Status::Exists("target exists");
  if ((flags & RENAME_EXCHANGE) && !dst_entry) return Status::NotFound("target does not exist");

  SFS_ASSIGN_OR_RETURN(InodeRecord src, load(src_entry->ino));
  std::optional<InodeRecord> dst;
  if (dst_entry) {
    SFS_ASSIGN_OR_RETURN(InodeRecord d, load(dst_entry->ino));
    dst = d;
  }
  // A directory may not move below itself (for an exchange, neither may the target).
  auto moves_below_itself = [&](const InodeRecord& moved, uint64_t dest_dir) -> Result<bool> {
    if (!IsDir(moved.mode)) return false;
    for (uint64_t at = dest_dir;; ) {
      if (at == moved.ino) return true;
      if (at == kRootIno) return false;
      SFS_ASSIGN_OR_RETURN(InodeRecord d, load(at));
      at = d.parent;
    }
  };
  SFS_ASSIGN_OR_RETURN(bool loop, moves_below_itself(src, new_parent));
  if (loop) return Status::Invalid("cannot move a directory below itself");
  if (flags & RENAME_EXCHANGE) {
    SFS_ASSIGN_OR_RETURN(bool loop2, moves_below_itself(*dst, parent));
    if (loop2) return Status::Invalid("cannot move a directory below itself");
  } else if (dst) {
    if (IsDir(src.mode) && !IsDir(dst->mode)) return Status(Code::kNotDirectory, "target is not a directory");
    if (!IsDir(src.mode) && IsDir(dst->mode)) return Status(Code::kIsDirectory, "target is a directory");
    if (IsDir(dst->mode)) {
      SFS_ASSIGN_OR_RETURN(bool empty, is_empty_dir(dst->ino));
      if (!empty) return Status(Code::kNotEmpty, "target directory not empty");
    }
  }

  int64_t now = NowNs();
  Transaction txn;
  std::unordered_map<uint64_t, InodeRecord> changed;  // by ino, so a shared parent is updated once
  auto touch = [&](uint64_t ino) -> Result<InodeRecord*> {
    auto it = changed.find(ino);
    if (it == changed.end()) {
      SFS_ASSIGN_OR_RETURN(InodeRecord r, load(ino));
      it = changed.emplace(ino, r).first;
    }
    return &it->second;
  };
  SFS_ASSIGN_OR_RETURN(InodeRecord* from_dir, touch(parent));
  from_dir->mtime_ns = from_dir->ctime_ns = now;
  SFS_ASSIGN_OR_RETURN(InodeRecord* to_dir, touch(new_parent));
  to_dir->mtime_ns = to_dir->ctime_ns = now;
  from_dir = &changed.at(parent);  // rehash-safe re-fetch
  SFS_ASSIGN_OR_RETURN(InodeRecord* moved, touch(src.ino));
  moved->ctime_ns = now;
  std::optional<InodeRecord> displaced;
  std::optional<NewEntry> whiteout;

  if (flags & RENAME_EXCHANGE) {
    SFS_ASSIGN_OR_RETURN(InodeRecord* other, touch(dst->ino));
    moved = &changed.at(src.ino);
    other->ctime_ns = now;
    txn.put(DirEntryKey(parent, name), EncodeDirEntry(*dst_entry));
    txn.put(DirEntryKey(new_parent, new_name), EncodeDirEntry(*src_entry));
    if (parent != new_parent) {
      if (IsDir(moved->mode)) {
        moved->parent = new_parent;
        changed.at(parent).nlink--;
        changed.at(new_parent).nlink++;
      }
      if (IsDir(other->mode)) {
        other->parent = parent;
        changed.at(new_parent).nlink--;
        changed.at(parent).nlink++;
      }
    }
  } else {
    if (flags & RENAME_WHITEOUT) {
      NewInode n;
      n.mode = S_IFCHR;  // device 0/0, no permissions: a whiteout
      n.uid = uid;
      n.gid = gid;
      SFS_ASSIGN_OR_RETURN(whiteout, new_entry(parent, name, n));
      add_entry(&txn, *whiteout, &changed.at(parent), now);  // replaces the old name's entry
    } else {
      txn.del(DirEntryKey(parent, name));
    }
    txn.put(DirEntryKey(new_parent, new_name), EncodeDirEntry(*src_entry));
    if (IsDir(moved->mode) && parent != new_parent) {
      moved->parent = new_parent;
      changed.at(parent).nlink--;
      changed.at(new_parent).nlink++;
    }
    if (dst) {
      SFS_ASSIGN_OR_RETURN(InodeRecord* gone, touch(dst->ino));
      drop_link(&txn, gone, now);
      if (IsDir(gone->mode)) changed.at(new_parent).nlink--;
      displaced = *gone;
    }
  }
  std::vector<InodeRecord> to_cache;
  for (auto& [ino, r] : changed) {
    if (IsDir(r.mode) && r.nlink == 0) continue;  // deleted by drop_link
    if (r.nlink > 0 || !IsDir(r.mode)) put_inode(&txn, r);
    to_cache.push_back(r);
  }
  if (whiteout) to_cache.push_back(whiteout->record);
  SFS_RETURN_IF_ERROR(commit(&txn, to_cache));
  if (displaced && IsDir(displaced->mode)) cache_.erase(displaced->ino);
  return displaced;
}

}  // namespace stripefs::meta
