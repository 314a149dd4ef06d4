// SPDX-License-Identifier: Apache-2.0
// The object API (engine/include/stripefs/objects.h) over a Pool opened as a
// mount would open it: names resolve through the namespace, data goes through
// the ObjectStore and its RAM tier.
#include <fmt/format.h>
#include <sys/stat.h>

#include <atomic>
#include <charconv>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

#include "engine/pool/layout.h"
#include "api/name_index.h"
#include "engine/pool/pool.h"
#include "api/write_back.h"
#include "api/beside_mount.h"
#include "api/object_channel.h"
#include "stripefs/objects.h"

namespace stripefs::api {
namespace {

Error ToError(const Status& s) {
  if (s.ok()) return {};
  return {ToErrno(s), s.message()};
}

// "a//b/c/" -> {"a", "b", "c"}.
std::vector<std::string_view> Components(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

bool IsUri(std::string_view name) { return name.starts_with("stripefs://"); }

// The one spelling of a name the API remembers ("/a//b/" -> "a/b"), so that
// every spelling finds the same object, also one not stored yet. A URI, or a
// name already so spelled, is returned as it is; otherwise *storage holds it.
std::string_view Canonical(std::string_view name, std::string* storage) {
  if (IsUri(name) || (!name.starts_with('/') && !name.ends_with('/') && name.find("//") == std::string_view::npos)) {
    return name;
  }
  storage->clear();
  for (std::string_view part : Components(name)) {
    if (!storage->empty()) *storage += '/';
    *storage += part;
  }
  return *storage;
}

class ObjectPoolImpl final : public ObjectPool {
 public:
  // In-process: the pool is this object's alone.
  ObjectPoolImpl(std::unique_ptr<Pool> pool, const Options& o, std::optional<WriteBackOptions> write_back)
      : ObjectPoolImpl(pool.get(), o, write_back, {}) {
    owned_ = std::move(pool);
  }
  // Beside a mount (api/beside_mount.h): the mount changes the namespace too,
  // so nothing is remembered of it, and the mount hears of every change.
  ObjectPoolImpl(Pool* pool, const Options& o, std::optional<WriteBackOptions> write_back, MountHooks mount)
      : pool_(pool), options_(o), mount_(std::move(mount)), beside_mount_(static_cast<bool>(mount_.data_changed)) {
    uri_prefix_ = "stripefs://" + pool_->config().uuid + "/";
    if (write_back) {
      write_back_ = std::make_unique<WriteBackBuffer>(
          &pool_->store(), [pool = pool_] { return pool->drive_free(); }, *write_back);
    }
  }
  Error put(std::string_view name, std::string_view data, std::string* uri) override {
    auto r = put_or_append(name, data, /*append=*/false);
    if (!r.ok()) return ToError(r.status());
    puts_++;
    if (uri) *uri = r->uri;
    return {};
  }

  Error append(std::string_view name, std::string_view data) override {
    auto r = put_or_append(name, data, /*append=*/true);
    if (r.ok()) appends_++;
    return ToError(r.status());
  }

  Error get(std::string_view name, std::string* data) override {
    return read_range(name, 0, UINT64_MAX, [&](uint64_t n) { return data->resize(n), data->data(); });
  }

  Error read(std::string_view name, uint64_t offset, size_t length, std::string* data) override {
    return read_range(name, offset, length, [&](uint64_t n) { return data->resize(n), data->data(); });
  }

  Error read_into(std::string_view name, uint64_t offset, std::span<char> buffer, size_t* got,
                  uint64_t* object_size) override {
    *got = 0;
    return read_range(name, offset, buffer.size(), [&](uint64_t n) { return *got = n, buffer.data(); }, object_size);
  }

  Error size(std::string_view given, uint64_t* size) override {
    std::string storage;
    const std::string_view name = Canonical(given, &storage);
    auto named = resolve(name);
    if (!named.ok()) return counted(ToError(named.status()));
    if (write_back_) {
      if (std::optional<uint64_t> held = write_back_->size(named->ino)) return *size = *held, Error{};
    }
    meta::Namespace::Brief inode;
    if (Error e = stored_object(name, named->ino, &inode)) return e;
    *size = inode.size;
    return {};
  }

  Error remove(std::string_view given) override {
    std::string storage;
    const std::string_view name = Canonical(given, &storage);
    auto parts = Components(name);
    if (parts.empty()) return {EINVAL, "remove: an object name is needed"};
    auto parent = resolve_dir(parts, /*create=*/false);
    if (!parent.ok()) return counted(ToError(parent.status()));
    auto named = resolve(name);
    if (named.ok() && write_back_ && write_back_->discard(named->ino)) {
      forget(name);  // put but never stored: the namespace has nothing of it
      removes_++;
      return {};
    }
    auto r = pool_->ns().unlink(*parent, parts.back());
    if (!r.ok()) return counted(ToError(r.status()));
    forget(name);
    if (beside_mount_) {
      mount_.entry_changed(*parent, parts.back());
      mount_.data_changed(r->ino);
      mount_.unlinked(r.value());  // its space goes when no handle of the mount holds it
    } else if (r->nlink == 0) {
      if (Status s = pool_->store().reclaim(r->ino); !s.ok()) return ToError(s);
    }
    removes_++;
    return options_.sync_writes ? ToError(pool_->store().sync()) : Error{};
  }

  Error list(std::string_view dir, std::vector<std::string>* names) override {
    auto ino = resolve_dir(Components(dir), false, /*whole=*/true);
    if (!ino.ok()) return ToError(ino.status());
    names->clear();
    // Objects put but not stored yet, before the namespace's listing: one
    // stored meanwhile then shows up twice (removed below), never not at all.
    if (write_back_) {
      for (const auto& e : write_back_->unnamed_entries()) {
        if (e->parent == *ino) names->push_back(e->name);
      }
    }
    auto entries = pool_->ns().list(*ino);
    if (!entries.ok()) return ToError(entries.status());
    for (auto& e : entries.value()) names->push_back(std::move(e.name));
    std::sort(names->begin(), names->end());
    names->erase(std::unique(names->begin(), names->end()), names->end());
    return {};
  }

  Error sync() override {
    Status buffered = write_back_ ? write_back_->flush_all() : Status::OK();
    Status synced = pool_->store().sync();
    return ToError(buffered.ok() ? synced : buffered);
  }

  const char* path() const override { return beside_mount_ ? "daemon" : "in-process"; }

  std::unique_ptr<IoBuffer> alloc_buffer(size_t size, Error* error) override {
    // In-process every read fills the caller's memory directly: plain memory, page-aligned.
    struct Plain final : IoBuffer {
      explicit Plain(size_t n) : bytes(static_cast<char*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096))), size(n) {}
      ~Plain() override { std::free(bytes); }
      std::span<char> span() override { return {bytes, size}; }
      char* bytes;
      size_t size;
    };
    auto b = std::make_unique<Plain>(size);
    if (!b->bytes) {
      *error = {ENOMEM, fmt::format("no memory for a buffer of {} bytes", size)};
      return nullptr;
    }
    *error = {};
    return b;
  }

  Stats stats() const override {
    Stats s;
    s.gets = gets_, s.puts = puts_, s.appends = appends_, s.removes = removes_, s.not_found = not_found_;
    s.bytes_read = bytes_read_, s.bytes_written = bytes_written_;
    const CacheStats c = pool_->store().cache_stats();
    s.cache_hits = c.hits, s.cache_misses = c.misses, s.cache_evictions = c.evictions;
    s.cache_bytes = c.bytes, s.cache_capacity = c.capacity;
    if (write_back_) {
      const WriteBackStats w = write_back_->stats();
      s.dirty_bytes = w.dirty_bytes, s.dirty_objects = w.dirty_objects;
    }
    return s;
  }

 private:
  Error counted(Error e) {
    if (e.code == ENOENT) not_found_++;
    return e;
  }

  // What a name resolves to; obj once the object was read through the name.
  struct Named {
    uint64_t ino = 0;
    std::shared_ptr<ObjectStore::Object> obj;
  };

  // The inode a name (as Canonical() spells it) or URI stands for; names are
  // remembered (forget() on remove).
  Result<Named> resolve(std::string_view name) {
    if (name.starts_with(uri_prefix_)) {
      std::string_view hex = name.substr(uri_prefix_.size());
      uint64_t ino = 0;
      auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), ino, 16);
      if (ec != std::errc() || end != hex.data() + hex.size()) return Status::Invalid(fmt::format("bad URI {}", name));
      return Named{ino, nullptr};
    }
    if (IsUri(name)) return Status::NotFound(fmt::format("{} is an object of another pool", name));
    if (auto known = remembered(name)) return *known;
    auto parts = Components(name);
    if (parts.empty()) return Status::Invalid("an object name is needed");
    SFS_ASSIGN_OR_RETURN(uint64_t dir, resolve_dir(parts, false));
    SFS_ASSIGN_OR_RETURN(meta::InodeRecord r, pool_->ns().lookup(dir, parts.back()));
    if (!beside_mount_) {
      std::unique_lock lock(names_mu_);
      names_.insert(name, Named{r.ino, nullptr});
    }
    return Named{r.ino, nullptr};
  }

  // What resolve() or a put remembered of name; no namespace lookup.
  std::optional<Named> remembered(std::string_view name) {
    if (beside_mount_) return std::nullopt;
    std::shared_lock lock(names_mu_);
    if (const Named* known = names_.find(name)) return *known;
    return std::nullopt;
  }

  // Keeps obj with the name, so the next read through it needs no lookup in
  // the namespace or the object table.
  void remember(std::string_view name, const std::shared_ptr<ObjectStore::Object>& obj) {
    if (IsUri(name) || beside_mount_) return;  // a URI needs no lookup
    std::unique_lock lock(names_mu_);
    Named& known = names_.insert(name, Named{obj->ino, obj});
    if (known.ino == obj->ino) known.obj = obj;
  }

  void forget(std::string_view name) {
    std::unique_lock lock(names_mu_);
    names_.erase(name);
  }

  // The directory holding the last component (whole: the directory the whole
  // path names). Directories found are remembered: the API removes only
  // objects, and nothing else changes the pool while it is open (beside a
  // mount, the mount does: nothing is remembered then).
  Result<uint64_t> resolve_dir(const std::vector<std::string_view>& parts, bool create, bool whole = false) {
    const size_t n = whole ? parts.size() : parts.size() - 1;
    std::string path;
    for (size_t i = 0; i < n; ++i) (path += parts[i]) += '/';
    if (!beside_mount_) {
      std::shared_lock lock(names_mu_);
      if (auto it = dirs_.find(path); it != dirs_.end()) return it->second;
    }
    uint64_t at = meta::kRootIno;
    size_t end = 0;  // of parts[i] in path
    for (size_t i = 0; i < n; ++i, ++end) {
      end += parts[i].size();
      auto r = pool_->ns().lookup(at, parts[i]);
      // An object put but not stored yet is not in the namespace, but is no
      // directory either, and must not get one of its name (callers that
      // create hold creating_mu_, as the puts of new objects do).
      if (!r.ok() && r.status().code() == Code::kNotFound && remembered(std::string_view(path).substr(0, end))) {
        return Status(Code::kNotDirectory, fmt::format("{} is not a directory", parts[i]));
      }
      if (!r.ok() && r.status().code() == Code::kNotFound && create) {
        meta::NewInode d;
        d.mode = S_IFDIR | 0755;
        SFS_ASSIGN_OR_RETURN(d.xattrs, InheritedLayoutXattrs(pool_->ns(), at));
        r = pool_->ns().create(at, parts[i], d);
        if (r.ok() && beside_mount_) mount_.entry_changed(at, parts[i]);
        if (!r.ok() && r.status().code() == Code::kExists) r = pool_->ns().lookup(at, parts[i]);  // made meanwhile
      }
      SFS_RETURN_IF_ERROR(r.status());
      if (!S_ISDIR(r->mode)) return Status(Code::kNotDirectory, fmt::format("{} is not a directory", parts[i]));
      at = r->ino;
    }
    if (beside_mount_) return at;
    std::unique_lock lock(names_mu_);
    dirs_.emplace(std::move(path), at);
    return at;
  }

  // The layout of new files in dir (its layout attributes or the pool's), remembered.
  Result<FileLayout> layout_for_files_in(uint64_t dir) {
    if (beside_mount_) return LayoutForNewFile(pool_->ns(), dir, pool_->config());  // the mount may change it
    {
      std::shared_lock lock(names_mu_);
      if (auto it = layouts_.find(dir); it != layouts_.end()) return it->second;
    }
    SFS_ASSIGN_OR_RETURN(FileLayout layout, LayoutForNewFile(pool_->ns(), dir, pool_->config()));
    std::unique_lock lock(names_mu_);
    layouts_.emplace(dir, layout);
    return layout;
  }

  // The record of a name put or read before (or of a URI); nullopt for a
  // name not known yet: the caller creates it, or finds it in the namespace.
  // An object put but not stored yet has the record reserved for it.
  Result<std::optional<meta::InodeRecord>> record_of(std::string_view name) {
    std::optional<Named> known = remembered(name);
    if (!known && IsUri(name)) {
      SFS_ASSIGN_OR_RETURN(known, resolve(name));
    }
    using Found = std::optional<meta::InodeRecord>;
    if (!known) return Found();
    if (write_back_) {
      if (auto entry = write_back_->unnamed(known->ino)) return Found(entry->record);
    }
    auto got = pool_->ns().get(known->ino);
    if (got.ok()) return Found(std::move(got).value());
    if (got.status().code() != Code::kNotFound || IsUri(name)) return got.status();
    forget(name);  // gone from the namespace: made anew
    return Found();
  }

  // A new object name under creating_mu_: created in the namespace, or, for
  // a put the write-back buffer takes, only reserved there and stored with
  // its first flush (then *buffered is set and the put is done). Finds the
  // object instead when the namespace has it already.
  Result<meta::InodeRecord> make_object(std::string_view name, const std::vector<std::string_view>& parts,
                                        std::string_view data, bool append, bool* just_created, bool* buffered) {
    SFS_ASSIGN_OR_RETURN(uint64_t dir, resolve_dir(parts, /*create=*/true));
    SFS_ASSIGN_OR_RETURN(FileLayout layout, layout_for_files_in(dir));
    meta::NewInode n;
    n.mode = S_IFREG | 0644;
    n.chunk_size = layout.chunk_size;
    n.strategy = layout.strategy;
    n.replicas = layout.replicas;
    Result<meta::InodeRecord> made = Status::NotFound("not made");
    if (write_back_ && !append && write_back_->takes(data.size())) {
      // Its entry costs nothing now: the flush stores it with the data, for
      // hundreds of new objects in one commit, on the flusher's thread.
      auto reserved = pool_->ns().reserve(dir, parts.back(), std::move(n));
      if (reserved.ok()) {
        auto entry = std::make_shared<const meta::NewEntry>(std::move(reserved).value());
        SFS_ASSIGN_OR_RETURN(auto obj, pool_->store().object(entry->record, /*just_created=*/true));
        if (write_back_->take(obj, data, entry)) {
          remember(name, obj);  // before creating_mu_ goes: the namespace cannot find it yet
          *buffered = true;
          return entry->record;
        }
        made = pool_->ns().add(*entry);  // refused (a nearly full pool): stored now, written through next
      } else {
        made = reserved.status();
      }
    } else {
      made = pool_->ns().create(dir, parts.back(), n);
    }
    *just_created = made.ok();
    if (made.ok() && beside_mount_) mount_.entry_changed(dir, parts.back());
    if (!made.ok() && made.status().code() == Code::kExists) return pool_->ns().lookup(dir, parts.back());
    return made;
  }

  Result<meta::InodeRecord> put_or_append(std::string_view given, std::string_view data, bool append) {
    SFS_RETURN_IF_ERROR(pool_->check_metadata_room());
    std::string storage;
    const std::string_view name = Canonical(given, &storage);
    auto parts = Components(name);
    if (parts.empty()) return Status::Invalid("an object name is needed");
    SFS_ASSIGN_OR_RETURN(std::optional<meta::InodeRecord> found, record_of(name));
    bool just_created = false;
    if (!found) {
      // One new name at a time, looked up again under the lock: two puts of
      // a name must not both reserve it.
      std::lock_guard creating(creating_mu_);
      SFS_ASSIGN_OR_RETURN(found, record_of(name));
      if (!found) {
        bool buffered = false;
        SFS_ASSIGN_OR_RETURN(found, make_object(name, parts, data, append, &just_created, &buffered));
        if (buffered) {
          bytes_written_ += data.size();
          return std::move(found).value();
        }
      }
    }
    meta::InodeRecord inode = std::move(found).value();
    if (!S_ISREG(inode.mode)) return Status(Code::kIsDirectory, fmt::format("{} is not an object", name));
    SFS_ASSIGN_OR_RETURN(auto obj, pool_->store().object(inode, just_created));
    remember(name, obj);
    if (!append && write_back_ && write_back_->take(obj, data)) {
      bytes_written_ += data.size();
      return inode;  // stored by a later flush (its size and mtime then too)
    }
    if (write_back_ && (append || write_back_->unnamed(inode.ino))) {
      // What is appended to must be on the drives first; so must an object
      // not stored yet that is now written through: that gives it its entry.
      SFS_RETURN_IF_ERROR(write_back_->flush(inode.ino));
      SFS_ASSIGN_OR_RETURN(inode, pool_->ns().get(inode.ino));
    } else if (write_back_) {
      write_back_->discard(inode.ino);  // written through below: an older buffered put must not follow it
    }
    if (!append) {
      SFS_ASSIGN_OR_RETURN(inode, pool_->store().replace(*obj, data.data(), data.size()));
    } else if (!data.empty()) {
      SFS_ASSIGN_OR_RETURN(inode, pool_->store().write(*obj, inode.size, data.data(), data.size()));
      // A write reserves a whole chunk for what follows, as for an open file;
      // an object has no close to give the rest back, so it goes now (the
      // next append grows the chunk in place while the space next to it is free).
      SFS_ASSIGN_OR_RETURN(bool trimmed, pool_->store().trim(*obj));
      if (trimmed) {
        SFS_ASSIGN_OR_RETURN(inode, pool_->ns().get(inode.ino));
      }
    }
    bytes_written_ += data.size();
    if (beside_mount_) mount_.data_changed(inode.ino);  // the kernel's cached pages and size are stale
    if (options_.sync_writes) SFS_RETURN_IF_ERROR(pool_->store().sync());
    return inode;
  }

  // What the namespace holds of the object name resolved to (ino): ENOENT,
  // with the name forgotten, when it is gone; EISDIR for a directory.
  Error stored_object(std::string_view name, uint64_t ino, meta::Namespace::Brief* out) {
    auto inode = pool_->ns().brief(ino);
    if (!inode.ok()) {
      if (inode.status().code() == Code::kNotFound) forget(name);
      return counted(ToError(inode.status()));
    }
    if (!S_ISREG(inode->mode)) return {EISDIR, fmt::format("{} is not an object", name)};
    *out = *inode;
    return {};
  }

  // Reads up to length bytes from offset into place(n), where n is how many
  // there are; place is called once, before any byte is read.
  // *object_size, when given, is set to the whole object's size.
  template <typename Place>
  Error read_range(std::string_view given, uint64_t offset, uint64_t length, Place place,
                   uint64_t* object_size = nullptr) {
    std::string storage;
    const std::string_view name = Canonical(given, &storage);
    auto named = resolve(name);
    if (!named.ok()) return counted(ToError(named.status()));
    const uint64_t ino = named->ino;
    if (write_back_) {
      if (std::optional<uint64_t> n = write_back_->read(ino, offset, length, place, object_size)) {
        gets_++;
        bytes_read_ += *n;
        return {};
      }
    }
    meta::Namespace::Brief inode;
    if (Error e = stored_object(name, ino, &inode)) return e;
    std::shared_ptr<ObjectStore::Object> obj = std::move(named->obj);
    if (!obj) {  // first read through this name (or a URI): the object table, then remembered
      auto record = pool_->ns().get(ino);
      if (!record.ok()) return counted(ToError(record.status()));
      auto made = pool_->store().object(record.value());
      if (!made.ok()) return ToError(made.status());
      obj = std::move(made).value();
      remember(name, obj);
    }
    const uint64_t n = offset >= inode.size ? 0 : std::min(length, inode.size - offset);
    if (object_size) *object_size = inode.size;
    char* to = place(n);
    if (n) {
      if (Status s = pool_->store().read(*obj, offset, n, to); !s.ok()) return ToError(s);
    }
    gets_++;
    bytes_read_ += n;
    return {};
  }

  std::unique_ptr<Pool> owned_;  // in-process; null beside a mount
  Pool* pool_;
  const Options options_;
  const MountHooks mount_;  // empty in-process
  const bool beside_mount_;
  std::unique_ptr<WriteBackBuffer> write_back_;  // null when off; stopped (and flushed) before pool_ goes
  std::string uri_prefix_;
  std::mutex creating_mu_;  // held while a new name is made (make_object)
  std::shared_mutex names_mu_;
  NameIndex<Named> names_;  // GUARDED_BY(names_mu_)
  std::unordered_map<std::string, uint64_t> dirs_;  // GUARDED_BY(names_mu_): "a/b/" -> inode
  std::unordered_map<uint64_t, FileLayout> layouts_;  // GUARDED_BY(names_mu_): directory -> layout of new files
  std::atomic<uint64_t> gets_{0}, puts_{0}, appends_{0}, removes_{0}, not_found_{0}, bytes_read_{0}, bytes_written_{0};
};

}  // namespace

void ObjectPool::multi_get(std::span<const std::string> names, std::vector<std::string>* data,
                           std::vector<Error>* errors) {
  data->resize(names.size());
  errors->resize(names.size());
  for (size_t i = 0; i < names.size(); ++i) (*errors)[i] = get(names[i], &(*data)[i]);
}

std::unique_ptr<ObjectPool> OpenBesideMount(Pool* pool, MountHooks hooks) {
  return std::make_unique<ObjectPoolImpl>(pool, Options{}, std::nullopt, std::move(hooks));
}

std::unique_ptr<ObjectPool> ObjectPool::Open(const std::string& meta_dir, const Options& options, Error* error) {
  if (options.ram_cache != "s3fifo" && options.ram_cache != "lru" && options.ram_cache != "off") {
    *error = {EINVAL, fmt::format("ram_cache must be s3fifo, lru or off, not '{}'", options.ram_cache)};
    return nullptr;
  }
  // A mounted pool: through its daemon. No socket, or none listening: in-process.
  const std::string socket = options.channel_socket.empty() ? DefaultChannelSocket(meta_dir) : options.channel_socket;
  Error through_daemon;
  if (auto channel = ConnectChannel(socket, &through_daemon)) {
    *error = {};
    return channel;
  }
  if (through_daemon.code != ENOENT && through_daemon.code != ECONNREFUSED) {
    *error = through_daemon;
    return nullptr;
  }
  auto pool = Pool::Open(meta_dir, Pool::Mode::kMount);
  if (!pool.ok()) {
    *error = ToError(pool.status());
    if (error->code == EBUSY) {
      error->message += fmt::format(" (and no mount's daemon serves its object channel on {}: a mount with "
                                    "-o state=DIR serves it in DIR, which Options.channel_socket then names)",
                                    socket);
    }
    return nullptr;
  }
  const uint64_t cache = options.ram_cache_bytes ? options.ram_cache_bytes : pool.value()->ram_capacity();
  const bool ram_tier = options.ram_cache != "off" && cache > 0;
  if (ram_tier) pool.value()->store().set_cache(cache, options.ram_cache);
  std::optional<WriteBackOptions> write_back;
  if (ram_tier && options.write_back && !options.sync_writes) {
    write_back.emplace();
    write_back->max_bytes = options.write_back_bytes ? options.write_back_bytes : std::min(cache / 4, write_back->max_bytes);
    write_back->interval_ms = std::max<uint32_t>(1, options.write_back_interval_ms);
  }
  *error = {};
  return std::make_unique<ObjectPoolImpl>(std::move(pool).value(), options, write_back);
}

}  // namespace stripefs::api
