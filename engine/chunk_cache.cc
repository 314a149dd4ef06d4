// ChunkCache and its eviction policies.
#include "engine/chunk_cache.h"

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

bool ChunkCache::read(uint64_t ino, uint64_t index, uint32_t offset, uint32_t len, char* out) {
  std::lock_guard lock(mu_);
  auto it = entries_.find({ino, index});
  if (it == entries_.end()) {
    stats_.misses++;
    return false;
  }
  stats_.hits++;
  policy_->accessed(it->second.policy_handle);
  const uint32_t have = offset < it->second.length ? std::min(len, it->second.length - offset) : 0;
  if (have) std::memcpy(out, it->second.data.get() + offset, have);
  if (have < len) std::memset(out + have, 0, len - have);
  return true;
}

void ChunkCache::insert(uint64_t ino, uint64_t index, const char* data, uint32_t length) {
  if (uint64_t{length} * 4 > capacity_ || length == 0) return;
  std::lock_guard lock(mu_);
  const Key key{ino, index};
  erase_locked(key);
  // Ids are derived from the chunk, so a chunk that left and comes back is
  // recognised by the policy (S3-FIFO's ghosts).
  const uint64_t id = ChunkId(ino, index);
  if (by_id_.count(id)) erase_locked(by_id_.at(id));  // a hash collision: one of the two goes
  const uint64_t taken = taken_ ? std::min(taken_(), capacity_) : 0;
  while (stats_.bytes + length > capacity_ - taken) {
    auto v = policy_->victim();
    if (!v) break;
    auto k = by_id_.find(*v);
    if (k == by_id_.end()) continue;
    Key victim = k->second;
    auto e = entries_.find(victim);
    stats_.bytes -= e->second.length;
    entries_.erase(e);
    by_id_.erase(k);
    auto& set = by_ino_[victim.ino];
    set.erase(victim.index);
    if (set.empty()) by_ino_.erase(victim.ino);
    stats_.evictions++;
  }
  if (stats_.bytes + length > capacity_ - taken) return;  // the files of ram directories leave no room
  Entry e{id, policy_->inserted(id), std::make_unique<char[]>(length), length};
  std::memcpy(e.data.get(), data, length);
  entries_.emplace(key, std::move(e));
  by_id_[id] = key;
  by_ino_[ino].insert(index);
  stats_.bytes += length;
  stats_.insertions++;
}

void ChunkCache::erase_locked(const Key& k) {
  auto it = entries_.find(k);
  if (it == entries_.end()) return;
  policy_->erased(it->second.id);
  by_id_.erase(it->second.id);
  stats_.bytes -= it->second.length;
  entries_.erase(it);
  auto s = by_ino_.find(k.ino);
  if (s != by_ino_.end()) {
    s->second.erase(k.index);
    if (s->second.empty()) by_ino_.erase(s);
  }
}

void ChunkCache::erase(uint64_t ino, uint64_t index) {
  std::lock_guard lock(mu_);
  erase_locked({ino, index});
}

void ChunkCache::erase_object(uint64_t ino) {
  std::lock_guard lock(mu_);
  auto s = by_ino_.find(ino);
  if (s == by_ino_.end()) return;
  const std::set<uint64_t> indexes = s->second;
  for (uint64_t index : indexes) erase_locked({ino, index});
}

CacheStats ChunkCache::stats() const {
  std::lock_guard lock(mu_);
  CacheStats s = stats_;
  s.capacity = capacity_;
  s.entries = entries_.size();
  return s;
}

}  // namespace stripefs
