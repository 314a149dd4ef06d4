// SPDX-License-Identifier: Apache-2.0
// Evictor: least-recently-used eviction of whole objects (see evictor.h).
#include "fs/evictor.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <chrono>

#include "engine/placement/placement.h"

namespace stripefs::fs {

Evictor::Evictor(Pool* pool, EvictorOptions options, Hooks hooks)
    : pool_(pool), options_(options), hooks_(std::move(hooks)) {}

Evictor::~Evictor() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status Evictor::load() {
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> names;  // ino, parent, name
  SFS_RETURN_IF_ERROR(pool_->kv().scan(meta::DirPrefixAll(), [&](std::string_view k, std::string_view v) {
    auto e = meta::DecodeDirEntry(v);
    if (e.ok() && e->type == S_IFREG) names.emplace_back(e->ino, meta::InoFromKey(k), std::string(meta::NameFromKey(k)));
    return true;
  }));
  for (auto& [ino, parent, name] : names) {
    SFS_ASSIGN_OR_RETURN(meta::InodeRecord r, pool_->ns().get(ino));
    named(ino, parent, name, std::max(r.atime_ns, r.mtime_ns));
  }
  spdlog::info("cache mode: {} files tracked for eviction", names.size());
  return Status::OK();
}

void Evictor::start() { thread_ = std::thread([this] { run(); }); }

void Evictor::touch_locked(uint64_t ino, int64_t when_ns) {
  Tracked& t = files_[ino];
  if (auto w = where_.find(ino); w != where_.end()) by_time_.erase(w->second);
  t.last_ns = std::max(t.last_ns, when_ns);
  where_[ino] = by_time_.emplace(t.last_ns, ino);
}

void Evictor::named(uint64_t ino, uint64_t parent, const std::string& name, int64_t when_ns) {
  std::lock_guard lock(mu_);
  files_[ino].names.emplace(parent, name);
  by_name_[{parent, name}] = ino;
  touch_locked(ino, when_ns);
}

void Evictor::unnamed(uint64_t parent, const std::string& name) {
  std::lock_guard lock(mu_);
  auto n = by_name_.find({parent, name});
  if (n == by_name_.end()) return;
  const uint64_t ino = n->second;
  by_name_.erase(n);
  auto f = files_.find(ino);
  if (f == files_.end()) return;
  f->second.names.erase({parent, name});
  if (!f->second.names.empty()) return;
  by_time_.erase(where_.at(ino));
  where_.erase(ino);
  files_.erase(f);
}

void Evictor::renamed(uint64_t parent, const std::string& name, uint64_t new_parent, const std::string& new_name,
                      bool exchange) {
  if (!exchange) unnamed(new_parent, new_name);  // a file the rename replaced loses that name
  std::lock_guard lock(mu_);
  const std::pair<uint64_t, std::string> from{parent, name}, to{new_parent, new_name};
  auto a = by_name_.find(from), b = by_name_.find(to);
  const std::optional<uint64_t> ino_a = a == by_name_.end() ? std::nullopt : std::optional(a->second);
  const std::optional<uint64_t> ino_b = b == by_name_.end() ? std::nullopt : std::optional(b->second);
  if (ino_a) by_name_.erase(from);
  if (ino_b) by_name_.erase(to);
  if (ino_a) {  // the file that was at `from` is now at `to`
    by_name_[to] = *ino_a;
    files_[*ino_a].names.erase(from);
    files_[*ino_a].names.insert(to);
  }
  if (exchange && ino_b) {
    by_name_[from] = *ino_b;
    files_[*ino_b].names.erase(to);
    files_[*ino_b].names.insert(from);
  }
}

void Evictor::accessed(uint64_t ino) {
  const int64_t now = meta::NowNs();
  std::lock_guard lock(mu_);
  if (files_.count(ino)) touch_locked(ino, now);
}

double Evictor::used_share() const {
  const uint64_t cap = pool_->drive_capacity();
  return cap ? 1.0 - static_cast<double>(pool_->drive_free()) / static_cast<double>(cap) : 0.0;
}

bool Evictor::evict_one(uint64_t ino, std::vector<std::pair<uint64_t, std::string>>* gone_names) {
  if (hooks_.is_open(ino)) return false;
  auto pin = pool_->ns().getxattr(ino, kPinXattr);
  if (pin.ok() && pin.value() == "1") return false;
  auto before = pool_->ns().get(ino);
  if (!before.ok()) return false;
  if (before->strategy == kRamStrategy) return false;  // its chunks are in RAM: evicting it frees no drive space
  std::set<std::pair<uint64_t, std::string>> names;
  {
    std::lock_guard lock(mu_);
    auto f = files_.find(ino);
    if (f == files_.end()) return false;
    names = f->second.names;
  }
  std::optional<meta::InodeRecord> last;
  for (const auto& [parent, name] : names) {
    auto r = pool_->ns().unlink(parent, name);
    if (!r.ok()) continue;  // renamed or removed meanwhile
    last = r.value();
    gone_names->emplace_back(parent, name);
    unnamed(parent, name);
  }
  if (!last) return false;
  if (last->nlink == 0) hooks_.reclaim(*last);
  std::lock_guard lock(mu_);
  stats_.objects++;
  stats_.bytes += before->allocated;
  return true;
}

uint64_t Evictor::evict_until(const std::function<bool(uint64_t evicted)>& enough) {
  std::set<uint64_t> tried;
  std::vector<std::pair<uint64_t, std::string>> gone;
  uint64_t evicted = 0;
  while (!enough(evicted)) {
    std::optional<uint64_t> victim;
    {
      std::lock_guard lock(mu_);
      for (const auto& [when, ino] : by_time_) {
        if (!tried.count(ino)) {
          victim = ino;
          break;
        }
      }
    }
    if (!victim) break;  // everything left is pinned, open or gone
    tried.insert(*victim);
    if (evict_one(*victim, &gone)) evicted++;
  }
  if (evicted) {
    Status s = pool_->store().sync();  // the freed space becomes reusable
    if (!s.ok()) spdlog::error("cache mode: sync after eviction: {}", s.message());
    spdlog::info("cache mode: evicted {} files; drives {:.1f}% used", evicted, 100 * used_share());
    passes_freed_++;
  }
  {
    std::lock_guard lock(mu_);
    to_forget_.insert(to_forget_.end(), gone.begin(), gone.end());
  }
  wake_.notify_all();
  return evicted;
}

bool Evictor::make_room(uint64_t bytes) {
  const uint64_t passes_seen = passes_freed_.load();
  std::lock_guard pass(evict_mu_);
  // The background pass (or another write's) may have just made the room:
  // deciding by drive_free() alone would then evict nothing and fail the write.
  if (passes_freed_.load() != passes_seen) return true;
  const uint64_t n = evict_until([&](uint64_t evicted) { return evicted > 0 && pool_->drive_free() >= bytes; });
  if (n) spdlog::info("cache mode: a write found the pool full; {} files evicted for it", n);
  return n > 0;
}

void Evictor::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::milliseconds(100));
    if (stop_) break;
    // Names the kernel must drop: told from here, with no lock held and no
    // request waiting on us (the kernel may need a directory lock a pending
    // request holds).
    auto forget = std::move(to_forget_);
    to_forget_.clear();
    lock.unlock();
    for (const auto& [parent, name] : forget) hooks_.forget_name(parent, name);
    if (used_share() > options_.high_watermark) {
      std::lock_guard pass(evict_mu_);
      evict_until([&](uint64_t) { return used_share() <= options_.low_watermark; });
    }
    lock.lock();
  }
}

EvictorStats Evictor::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace stripefs::fs
