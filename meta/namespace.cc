// Namespace operations. Each one reads what it needs (cache first), builds one
// Transaction, commits it, and only then updates the cache.
#include "meta/namespace.h"

#include <fmt/format.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

namespace stripefs::meta {

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

namespace {
Status CheckName(std::string_view name) {
  if (name.size() > kNameMax) return Status(Code::kNameTooLong, "name longer than 255 bytes");
  if (name.empty() || name.find('/') != std::string_view::npos) return Status::Invalid("bad name");
  return Status::OK();
}
bool IsDir(uint32_t mode) { return S_ISDIR(mode); }

// The data path's change to an inode, as InodeChange (namespace.h) describes it.
void Apply(const InodeChange& c, InodeRecord* r) {
  if (c.size) r->size = *c.size;
  r->size = std::max(r->size, c.size_at_least);
  if (c.mtime_ns) r->mtime_ns = r->ctime_ns = *c.mtime_ns;
  r->allocated = static_cast<uint64_t>(static_cast<int64_t>(r->allocated) + c.allocated_delta);
}

// Adds every put and delete of from to txn, in order.
void AddOps(const Transaction& from, Transaction* txn) {
  for (const Transaction::Op& op : from.ops()) {
    if (op.is_delete) {
      txn->del(op.key);
    } else {
      txn->put(op.key, op.value);
    }
  }
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
  cache_[ino] = r;
  return r;
}

Result<InodeRecord> Namespace::load_dir(uint64_t ino) {
  SFS_ASSIGN_OR_RETURN(InodeRecord r, load(ino));
  if (!IsDir(r.mode)) return Status(Code::kNotDirectory, "not a directory");
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

void Namespace::add_entry(Transaction* txn, const NewEntry& e, InodeRecord* dir, int64_t now) {
  const InodeRecord& r = e.record;
  put_inode(txn, r);
  txn->put(DirEntryKey(e.parent, e.name), EncodeDirEntry({r.ino, r.mode & S_IFMT}));
  for (const auto& [xname, value] : e.xattrs) txn->put(XattrKey(r.ino, xname), value);
  if (S_ISREG(r.mode) && r.strategy == kRamStrategyName) txn->put(VolatileKey(r.ino), "");
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
                                                     unsigned flags) {
  if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) return Status::Invalid("unsupported rename flags");
  if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE)) return Status::Invalid("conflicting rename flags");
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
    txn.del(DirEntryKey(parent, name));
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
  SFS_RETURN_IF_ERROR(commit(&txn, to_cache));
  if (displaced && IsDir(displaced->mode)) cache_.erase(displaced->ino);
  return displaced;
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
    AddOps(u.write.records, &txn);
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

Status Namespace::reclaim(uint64_t ino, Transaction* txn) {
  ChangeLock lock(this);
  txn->del(InodeKey(ino));
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
