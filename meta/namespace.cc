// SPDX-License-Identifier: Apache-2.0
// Namespace operations. Each one reads what it needs (cache first), builds one
// Transaction, commits it, and only then updates the cache. This file: the
// shared record helpers, reads (get, lookup, list), attributes and xattrs,
// the data path's commits, and orphans. The operations on directory
// entries (create, link, unlink, rmdir, rename) are in namespace_entries.cc.
#include "meta/namespace.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

#include <algorithm>

namespace stripefs::meta {

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

namespace {
// The data path's change to an inode, as InodeChange (namespace.h) describes it.
void Apply(const InodeChange& c, InodeRecord* r) {
  if (c.size) r->size = *c.size;
  r->size = std::max(r->size, c.size_at_least);
  if (c.mtime_ns) r->mtime_ns = r->ctime_ns = *c.mtime_ns;
  r->allocated = static_cast<uint64_t>(static_cast<int64_t>(r->allocated) + c.allocated_delta);
}

}  // namespace

void Namespace::Format(Transaction* txn, uint32_t uid, uint32_t gid) {
  InodeRecord root;
  root.ino = kRootIno;
  root.mode = S_IFDIR | 0755;
  root.uid = uid;
  root.gid = gid;
  root.nlink = 2;
  root.parent = kRootIno;
  root.atime_ns = root.mtime_ns = root.ctime_ns = NowNs();
  txn->put(InodeKey(kRootIno), EncodeInode(root));
  txn->put(NextInoKey(), EncodeU64(kRootIno + 1));
}

Result<std::unique_ptr<Namespace>> Namespace::Open(KvStore* kv, std::string pool_uuid) {
  std::string v;
  SFS_RETURN_IF_ERROR(kv->get(NextInoKey(), &v));
  SFS_ASSIGN_OR_RETURN(uint64_t next, DecodeU64Value(v));
  return std::unique_ptr<Namespace>(new Namespace(kv, std::move(pool_uuid), next));
}

Result<InodeRecord> Namespace::load(uint64_t ino) {
  auto it = cache_.find(ino);
  if (it != cache_.end()) return it->second;
  std::string v;
  Status s = kv_->get(InodeKey(ino), &v);
  if (!s.ok()) {
    if (s.code() == Code::kNotFound) return Status::NotFound(fmt::format("inode {} not found", ino));
    return s;
  }
  SFS_ASSIGN_OR_RETURN(InodeRecord r, DecodeInode(v));
  if (!read_through_) cache_[ino] = r;
  return r;
}

Result<InodeRecord> Namespace::load_dir(uint64_t ino) {
  SFS_ASSIGN_OR_RETURN(InodeRecord r, load(ino));
  if (!S_ISDIR(r.mode)) return Status(Code::kNotDirectory, "not a directory");
  return r;
}

Result<std::optional<DirEntry>> Namespace::find(uint64_t parent, std::string_view name) {
  std::string v;
  Status s = kv_->get(DirEntryKey(parent, name), &v);
  if (s.code() == Code::kNotFound) return std::optional<DirEntry>();
  SFS_RETURN_IF_ERROR(s);
  SFS_ASSIGN_OR_RETURN(DirEntry e, DecodeDirEntry(v));
  return std::optional<DirEntry>(e);
}

Result<bool> Namespace::is_empty_dir(uint64_t ino) {
  bool empty = true;
  SFS_RETURN_IF_ERROR(kv_->scan(DirPrefix(ino), [&](std::string_view, std::string_view) {
    empty = false;
    return false;
  }));
  return empty;
}

void Namespace::put_inode(Transaction* txn, const InodeRecord& r) {
  txn->put(InodeKey(r.ino), EncodeInode(r));
}

Status Namespace::commit(Transaction* txn, const std::vector<InodeRecord>& changed, bool sync) {
  SFS_RETURN_IF_ERROR(kv_->commit(*txn, sync));
  for (const auto& r : changed) cache_[r.ino] = r;
  return Status::OK();
}

void Namespace::delete_xattrs(Transaction* txn, uint64_t ino) {
  auto names = listxattr(ino);
  if (!names.ok()) return;  // an unreadable xattr row is left for fsck to report
  for (const auto& n : names.value()) txn->del(XattrKey(ino, n));
}

Result<InodeRecord> Namespace::get(uint64_t ino) {
  std::lock_guard lock(mu_);
  return load(ino);
}

Result<Namespace::Brief> Namespace::brief(uint64_t ino) {
  auto of = [](const InodeRecord& r) { return Brief{r.mode, r.size, r.atime_ns, r.mtime_ns, r.ctime_ns}; };
  std::lock_guard lock(mu_);
  if (auto it = cache_.find(ino); it != cache_.end()) return of(it->second);
  SFS_ASSIGN_OR_RETURN(InodeRecord r, load(ino));
  return of(r);
}

Result<InodeRecord> Namespace::lookup(uint64_t parent, std::string_view name) {
  if (name.size() > kNameMax) return Status(Code::kNameTooLong, "name longer than 255 bytes");
  std::lock_guard lock(mu_);
  SFS_RETURN_IF_ERROR(load_dir(parent).status());
  SFS_ASSIGN_OR_RETURN(auto e, find(parent, name));
  if (!e) return Status::NotFound("no such entry");
  return load(e->ino);
}

Result<InodeRecord> Namespace::setattr(uint64_t ino, const AttrChange& c) {
  ChangeLock lock(this);
  SFS_ASSIGN_OR_RETURN(InodeRecord r, load(ino));
  if (c.mode) r.mode = (r.mode & S_IFMT) | (*c.mode & 07777);
  if (c.uid) r.uid = *c.uid;
  if (c.gid) r.gid = *c.gid;
  if (c.atime_ns) r.atime_ns = *c.atime_ns;
  if (c.mtime_ns) r.mtime_ns = *c.mtime_ns;
  if (!c.keep_ctime) r.ctime_ns = NowNs();
  Transaction txn;
  put_inode(&txn, r);
  SFS_RETURN_IF_ERROR(commit(&txn, {r}));
  return r;
}

Result<std::vector<Listing>> Namespace::list(uint64_t dir) {
  {
    std::lock_guard lock(mu_);
    SFS_RETURN_IF_ERROR(load_dir(dir).status());
  }
  std::vector<Listing> out;
  Status decode_error;
  SFS_RETURN_IF_ERROR(kv_->scan(DirPrefix(dir), [&](std::string_view k, std::string_view v) {
    auto e = DecodeDirEntry(v);
    if (!e.ok()) {
      decode_error = e.status();
      return false;
    }
    out.push_back({std::string(NameFromKey(k)), e.value()});
    return true;
  }));
  SFS_RETURN_IF_ERROR(decode_error);
  return out;
}

Result<std::string> Namespace::getxattr(uint64_t ino, std::string_view name) {
  std::lock_guard lock(mu_);
  SFS_RETURN_IF_ERROR(load(ino).status());
  std::string v;
  Status s = kv_->get(XattrKey(ino, name), &v);
  if (s.code() == Code::kNotFound) return Status(Code::kNoData, "no such attribute");
  SFS_RETURN_IF_ERROR(s);
  return v;
}

Status Namespace::setxattr(uint64_t ino, std::string_view name, std::string_view value, int flags) {
  if (name.size() > kNameMax) return Status(Code::kRange, "attribute name too long");
  if (value.size() > kXattrValueMax) return Status(Code::kTooBig, "attribute value too large");
  ChangeLock lock(this);
  SFS_ASSIGN_OR_RETURN(InodeRecord r, load(ino));
  std::string old;
  Status s = kv_->get(XattrKey(ino, name), &old);
  if (!s.ok() && s.code() != Code::kNotFound) return s;
  bool exists = s.ok();
  if ((flags & XATTR_CREATE) && exists) return Status::Exists("attribute exists");
  if ((flags & XATTR_REPLACE) && !exists) return Status(Code::kNoData, "no such attribute");
  r.ctime_ns = NowNs();
  Transaction txn;
  txn.put(XattrKey(ino, name), std::string(value));
  put_inode(&txn, r);
  return commit(&txn, {r});
}

Result<std::vector<std::string>> Namespace::listxattr(uint64_t ino) {
  std::vector<std::string> names;
  SFS_RETURN_IF_ERROR(kv_->scan(XattrPrefix(ino), [&](std::string_view k, std::string_view) {
    names.emplace_back(NameFromKey(k));
    return true;
  }));
  return names;
}

Status Namespace::removexattr(uint64_t ino, std::string_view name) {
  ChangeLock lock(this);
  SFS_ASSIGN_OR_RETURN(InodeRecord r, load(ino));
  std::string old;
  Status s = kv_->get(XattrKey(ino, name), &old);
  if (s.code() == Code::kNotFound) return Status(Code::kNoData, "no such attribute");
  SFS_RETURN_IF_ERROR(s);
  r.ctime_ns = NowNs();
  Transaction txn;
  txn.del(XattrKey(ino, name));
  put_inode(&txn, r);
  return commit(&txn, {r});
}

Result<InodeRecord> Namespace::commit_with_inode(InodeWrite w, bool sync) {
  ChangeLock lock(this);
  SFS_ASSIGN_OR_RETURN(InodeRecord r, load(w.ino));
  Apply(w.change, &r);
  put_inode(&w.records, r);
  SFS_RETURN_IF_ERROR(commit(&w.records, {r}, sync));
  return r;
}

void Namespace::commit_with_inodes(std::span<InodeUpdate> updates) {
  // Hundreds of inodes: readers (and reserve()) are held up only while the
  // records are copied, not while the batch is built and written. write_mu_
  // keeps every other change of these inodes, and of the directories that
  // get new entries, out until the cache has the new records.
  std::lock_guard writing(write_mu_);
  std::unordered_map<uint64_t, InodeRecord> dirs;  // of the new entries
  {
    std::lock_guard lock(mu_);
    for (InodeUpdate& u : updates) {
      if (!u.entry) {
        u.result = load(u.write.ino);
        continue;
      }
      auto dir = load_dir(u.entry->parent);
      if (dir.ok() && dir->nlink == 0) dir = Status::NotFound("directory was removed");
      u.result = dir.ok() ? Result<InodeRecord>(u.entry->record) : Result<InodeRecord>(dir.status());
      if (dir.ok()) dirs.try_emplace(dir->ino, std::move(dir).value());
    }
  }
  Transaction txn;
  std::vector<InodeRecord> changed;
  const int64_t now = NowNs();
  for (InodeUpdate& u : updates) {
    if (!u.result.ok()) continue;
    if (u.entry) add_entry(&txn, *u.entry, &dirs.at(u.entry->parent), now);
    txn.append(std::move(u.write.records));
    Apply(u.write.change, &u.result.value());
    put_inode(&txn, u.result.value());
    changed.push_back(u.result.value());
  }
  if (changed.empty()) return;
  for (auto& [ino, dir] : dirs) {
    put_inode(&txn, dir);
    changed.push_back(std::move(dir));
  }
  Status s = kv_->commit(txn, false);
  std::lock_guard lock(mu_);
  if (!s.ok()) {
    for (InodeUpdate& u : updates) u.result = s;
    return;
  }
  for (InodeRecord& r : changed) cache_[r.ino] = std::move(r);
}

Result<InodeRecord> Namespace::change_uncommitted(uint64_t ino, const InodeChange& change) {
  std::lock_guard lock(mu_);
  SFS_ASSIGN_OR_RETURN(InodeRecord r, load(ino));
  Apply(change, &r);
  cache_[ino] = r;
  return r;
}

Status Namespace::reclaim(uint64_t ino, Transaction* txn) {
  ChangeLock lock(this);
  txn->del(InodeKey(ino));
  txn->del(LogFloorKey(ino));
  txn->del(OrphanKey(ino));
  txn->del(VolatileKey(ino));
  delete_xattrs(txn, ino);
  SFS_RETURN_IF_ERROR(kv_->commit(*txn, false));
  cache_.erase(ino);
  return Status::OK();
}

Result<std::vector<uint64_t>> Namespace::orphans() {
  std::vector<uint64_t> out;
  SFS_RETURN_IF_ERROR(kv_->scan(OrphanPrefixAll(), [&](std::string_view k, std::string_view) {
    out.push_back(InoFromKey(k));
    return true;
  }));
  return out;
}

}  // namespace stripefs::meta
