// SPDX-License-Identifier: Apache-2.0
// NameIndex: names to values, for the object API's remembered names, where
// every get starts with a lookup. An open-addressing table (linear probing,
// at most half full) of slots holding a name's hash and a pointer to an entry
// that holds the value and the name's bytes in one allocation. A hit reads
// two cache lines, the slot and the entry; std::unordered_map<std::string, V>
// reads four (the bucket, the node before the one wanted, the node, and the
// string's own heap copy), and with a hundred thousand names each is a miss.
// Not thread-safe: the owner locks.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <new>
#include <string_view>
#include <utility>
#include <vector>

namespace stripefs {

template <typename V>
class NameIndex {
 public:
  NameIndex() : slots_(16) {}
  NameIndex(const NameIndex&) = delete;
  NameIndex& operator=(const NameIndex&) = delete;
  ~NameIndex() {
    for (Slot& s : slots_) Free(s.entry);
  }

  // The value of name, or nullptr. Valid until the next insert or erase.
  V* find(std::string_view name) {
    const size_t i = position(name, Hash(name));
    return slots_[i].entry ? &slots_[i].entry->value : nullptr;
  }

  // Adds name with value; when name is there already, leaves it as it is.
  // Returns the value kept.
  V& insert(std::string_view name, V value) {
    const uint64_t h = Hash(name);
    size_t i = position(name, h);
    if (slots_[i].entry) return slots_[i].entry->value;
    if ((size_ + 1) * 2 > slots_.size()) {
      grow();
      i = position(name, h);
    }
    slots_[i] = {h, Make(name, std::move(value))};
    ++size_;
    return slots_[i].entry->value;
  }

  // Removes name; false when it was not there.
  bool erase(std::string_view name) {
    size_t i = position(name, Hash(name));
    if (!slots_[i].entry) return false;
    Free(slots_[i].entry);
    --size_;
    // Backward shift: move up every later slot of the run that may sit at
    // the freed place, so that no lookup stops early at a hole.
    const size_t mask = slots_.size() - 1;
    for (size_t j = (i + 1) & mask; slots_[j].entry; j = (j + 1) & mask) {
      const size_t home = slots_[j].hash & mask;
      const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i] = {};
    return true;
  }

  size_t size() const { return size_; }

 private:
  struct Entry {
    V value;
    size_t length;
    char* name() { return reinterpret_cast<char*>(this + 1); }
  };
  struct Slot {
    uint64_t hash = 0;
    Entry* entry = nullptr;  // null: empty
  };

  static uint64_t Hash(std::string_view name) { return std::hash<std::string_view>()(name); }

  static Entry* Make(std::string_view name, V value) {
    void* raw = ::operator new(sizeof(Entry) + name.size(), std::align_val_t(alignof(Entry)));
    Entry* e = new (raw) Entry{std::move(value), name.size()};
    std::memcpy(e->name(), name.data(), name.size());
    return e;
  }
  static void Free(Entry* e) {
    if (!e) return;
    e->~Entry();
    ::operator delete(e, std::align_val_t(alignof(Entry)));
  }

  // The slot holding name, or the empty slot where it would go.
  size_t position(std::string_view name, uint64_t h) const {
    const size_t mask = slots_.size() - 1;
    size_t i = h & mask;
    for (; slots_[i].entry; i = (i + 1) & mask) {
      const Entry* e = slots_[i].entry;
      if (slots_[i].hash == h && e->length == name.size() &&
          std::memcmp(const_cast<Entry*>(e)->name(), name.data(), name.size()) == 0) {
        break;
      }
    }
    return i;
  }

  void grow() {
    const std::vector<Slot> old = std::exchange(slots_, std::vector<Slot>(slots_.size() * 2));
    const size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (!s.entry) continue;
      size_t i = s.hash & mask;
      while (slots_[i].entry) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;  // a power of two, at most half full
  size_t size_ = 0;
};

}  // namespace stripefs
