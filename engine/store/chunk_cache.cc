// SPDX-License-Identifier: Apache-2.0
// ChunkCache and its eviction policies.
#include "engine/store/chunk_cache.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <stdexcept>

namespace stripefs {
namespace {

class LruPolicy final : public EvictionPolicy {
 public:
  void* inserted(uint64_t id) override {
    order_.push_front(id);
    auto& where = where_[id];
    where = order_.begin();
    return &where;  // unordered_map values stay put as it grows
  }
  void accessed(void* handle) override {
    order_.splice(order_.begin(), order_, *static_cast<std::list<uint64_t>::iterator*>(handle));
  }
  void erased(uint64_t id) override {
    auto it = where_.find(id);
    if (it == where_.end()) return;
    order_.erase(it->second);
    where_.erase(it);
  }
  std::optional<uint64_t> victim() override {
    if (order_.empty()) return std::nullopt;
    uint64_t id = order_.back();
    order_.pop_back();
    where_.erase(id);
    return id;
  }

 private:
  std::list<uint64_t> order_;  // most recent first
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where_;
};

class S3FifoPolicy final : public EvictionPolicy {
 public:
  void* inserted(uint64_t id) override {
    const bool was_ghost = ghost_set_.erase(id) > 0;  // ids follow the chunk (see ChunkCache::insert)
    State& st = state_[id];
    st = {was_ghost ? Queue::kMain : Queue::kSmall, 0, ++gen_};
    push(st.queue, id, st.gen);
    return &st;  // unordered_map values stay put as it grows
  }
  void accessed(void* handle) override {
    State& st = *static_cast<State*>(handle);
    st.freq = std::min(st.freq + 1, 3);
  }
  void erased(uint64_t id) override {
    auto it = state_.find(id);
    if (it == state_.end()) return;
    if (it->second.queue == Queue::kSmall) small_live_--;
    state_.erase(it);  // its queue slot goes stale and is skipped
    if (small_.size() + main_.size() > 2 * state_.size() + 64) compact();
  }
  std::optional<uint64_t> victim() override {
    while (!state_.empty()) {
      const bool from_small = small_live_ > 0 && (small_live_ * 10 >= state_.size() || main_.empty());
      std::deque<Slot>& q = from_small ? small_ : main_;
      if (q.empty()) return std::nullopt;  // cannot happen while state_ is consistent
      const Slot slot = q.front();
      q.pop_front();
      auto it = state_.find(slot.id);
      if (it == state_.end() || it->second.gen != slot.gen) continue;  // erased or moved since
      State& st = it->second;
      if (st.freq > 0) {  // used since it was queued: it stays, in main
        if (from_small) small_live_--;
        st = {Queue::kMain, from_small ? 0 : st.freq - 1, ++gen_};
        push(Queue::kMain, slot.id, st.gen);
        continue;
      }
      if (from_small) {
        small_live_--;
        remember_ghost(slot.id);
      }
      state_.erase(it);
      return slot.id;
    }
    return std::nullopt;
  }

 private:
  enum class Queue { kSmall, kMain };
  struct State {
    Queue queue;
    int freq;
    uint64_t gen;  // matches the one live queue slot of this id
  };
  struct Slot {
    uint64_t id, gen;
  };
  void push(Queue q, uint64_t id, uint64_t gen) {
    if (q == Queue::kSmall) {
      small_.push_back({id, gen});
      small_live_++;
    } else {
      main_.push_back({id, gen});
    }
  }
  void compact() {
    auto stale = [&](const Slot& s) {
      auto it = state_.find(s.id);
      return it == state_.end() || it->second.gen != s.gen;
    };
    std::erase_if(small_, stale);
    std::erase_if(main_, stale);
  }
  void remember_ghost(uint64_t id) {
    ghost_.push_back(id);
    ghost_set_.insert(id);
    while (ghost_.size() > std::max<size_t>(64, state_.size())) {
      ghost_set_.erase(ghost_.front());
      ghost_.pop_front();
    }
  }
  std::unordered_map<uint64_t, State> state_;
  std::deque<Slot> small_, main_;
  size_t small_live_ = 0;
  uint64_t gen_ = 0;
  std::deque<uint64_t> ghost_;
  std::set<uint64_t> ghost_set_;
};

// A chunk's id for the policy: the same each time the chunk is cached.
uint64_t ChunkId(uint64_t ino, uint64_t index) {
  uint64_t x = ino * 0x9e3779b97f4a7c15ULL + index;  // splitmix64's finalizer over both
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::unique_ptr<EvictionPolicy> NewLruPolicy() { return std::make_unique<LruPolicy>(); }
std::unique_ptr<EvictionPolicy> NewS3FifoPolicy() { return std::make_unique<S3FifoPolicy>(); }
std::unique_ptr<EvictionPolicy> NewEvictionPolicy(const std::string& name) {
  if (name == "lru") return NewLruPolicy();
  if (name == "s3fifo") return NewS3FifoPolicy();
  throw std::invalid_argument("unknown cache policy '" + name + "' (lru or s3fifo)");
}

namespace {
// Shards of at least this much, and at most kMaxShards: a small cache stays
// whole, so its eviction order is exactly its policy's.
constexpr uint64_t kMinShardBytes = 64ull << 20;
constexpr uint64_t kMaxShards = 16;
}  // namespace

ChunkCache::ChunkCache(uint64_t capacity_bytes, const PolicyFactory& make_policy, std::function<uint64_t()> taken)
    : capacity_(capacity_bytes), taken_(std::move(taken)) {
  const uint64_t n = std::clamp<uint64_t>(capacity_bytes / kMinShardBytes, 1, kMaxShards);
  for (uint64_t i = 0; i < n; ++i) {
    auto s = std::make_unique<Shard>();
    s->capacity = capacity_bytes / n;
    s->policy = make_policy();
    shards_.push_back(std::move(s));
  }
}

ChunkCache::Shard& ChunkCache::shard(uint64_t ino) const {
  return *shards_[(ino * 0x9e3779b97f4a7c15ULL >> 32) % shards_.size()];
}

bool ChunkCache::read(uint64_t ino, uint64_t index, uint32_t offset, uint32_t len, char* out) {
  Shard& s = shard(ino);
  std::lock_guard lock(s.mu);
  auto it = s.entries.find({ino, index});
  if (it == s.entries.end()) {
    s.stats.misses++;
    return false;
  }
  s.stats.hits++;
  s.policy->accessed(it->second.policy_handle);
  const uint32_t have = offset < it->second.length ? std::min(len, it->second.length - offset) : 0;
  if (have) std::memcpy(out, it->second.data.get() + offset, have);
  if (have < len) std::memset(out + have, 0, len - have);
  return true;
}

void ChunkCache::insert(uint64_t ino, uint64_t index, const char* data, uint32_t length) {
  Shard& s = shard(ino);
  if (uint64_t{length} * 4 > s.capacity || length == 0) return;
  // Outside the lock: the RAM segment's allocator has a lock of its own.
  const uint64_t taken = taken_ ? std::min(taken_(), capacity_) / shards_.size() : 0;
  // The copy is made before the lock is taken, so readers wait only for the bookkeeping.
  auto bytes = std::make_unique_for_overwrite<char[]>(length);  // not zeroed: memcpy fills it
  std::memcpy(bytes.get(), data, length);
  std::lock_guard lock(s.mu);
  const Key key{ino, index};
  s.erase_locked(key);
  // Ids are derived from the chunk, so a chunk that left and comes back is
  // recognised by the policy (S3-FIFO's ghosts).
  const uint64_t id = ChunkId(ino, index);
  if (s.by_id.count(id)) s.erase_locked(s.by_id.at(id));  // a hash collision: one of the two goes
  while (s.stats.bytes + length > s.capacity - taken) {
    auto v = s.policy->victim();
    if (!v) break;
    auto k = s.by_id.find(*v);
    if (k == s.by_id.end()) continue;
    Key victim = k->second;
    auto e = s.entries.find(victim);
    s.stats.bytes -= e->second.length;
    s.entries.erase(e);
    s.by_id.erase(k);
    auto& set = s.by_ino[victim.ino];
    set.erase(victim.index);
    if (set.empty()) s.by_ino.erase(victim.ino);
    s.stats.evictions++;
  }
  if (s.stats.bytes + length > s.capacity - taken) return;  // the files of ram directories leave no room
  s.entries.emplace(key, Entry{id, s.policy->inserted(id), std::move(bytes), length});
  s.by_id[id] = key;
  s.by_ino[ino].insert(index);
  s.stats.bytes += length;
  s.stats.insertions++;
}

void ChunkCache::Shard::erase_locked(const Key& k) {
  auto it = entries.find(k);
  if (it == entries.end()) return;
  policy->erased(it->second.id);
  by_id.erase(it->second.id);
  stats.bytes -= it->second.length;
  entries.erase(it);
  auto s = by_ino.find(k.ino);
  if (s != by_ino.end()) {
    s->second.erase(k.index);
    if (s->second.empty()) by_ino.erase(s);
  }
}

void ChunkCache::erase(uint64_t ino, uint64_t index) {
  Shard& s = shard(ino);
  std::lock_guard lock(s.mu);
  s.erase_locked({ino, index});
}

void ChunkCache::erase_object(uint64_t ino) {
  Shard& s = shard(ino);
  std::lock_guard lock(s.mu);
  auto it = s.by_ino.find(ino);
  if (it == s.by_ino.end()) return;
  const std::set<uint64_t> indexes = it->second;
  for (uint64_t index : indexes) s.erase_locked({ino, index});
}

CacheStats ChunkCache::stats() const {
  CacheStats total;
  for (const auto& s : shards_) {
    std::lock_guard lock(s->mu);
    total.hits += s->stats.hits;
    total.misses += s->stats.misses;
    total.insertions += s->stats.insertions;
    total.evictions += s->stats.evictions;
    total.bytes += s->stats.bytes;
    total.entries += s->entries.size();
  }
  total.capacity = capacity_;
  return total;
}

}  // namespace stripefs
