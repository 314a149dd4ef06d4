// SPDX-License-Identifier: Apache-2.0
// The durable state of stripefs-stress (--state FILE): after each successful
// fsync the file's size, sha256 and xattrs are recorded as "clean"; FILE is
// replaced atomically (FILE.tmp, fsync, rename) each time, and
// --verify-state reads it back after a crash (see stress.cc).
#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace stress {

// The names a thread owns, by slot, inside its directory ThreadDir(t).
inline std::string SlotName(int i) { return i % 3 == 2 ? fmt::format("sub/g{}", i) : fmt::format("f{}", i); }
inline std::string DirSlotName(int j) { return fmt::format("d{}", j); }
inline std::string ThreadDir(int t) { return fmt::format("t{}", t); }

struct CleanRecord {
  uint32_t obj = 0;
  uint64_t size = 0;
  std::string sha256;
  bool has_xattrs = false;  // false after fdatasync, which need not persist xattrs
  std::map<std::string, std::string> xattrs;
};

struct ThreadState {
  uint32_t obj_reserved = 0;          // object ids below this may exist
  std::map<int, CleanRecord> clean;   // by file slot
};

struct State {
  int threads = 0;
  int files = 0;
  uint64_t max_size = 0;  // no file grows past this (0: unknown)
  std::vector<ThreadState> t;
};

nlohmann::json ToJson(const State& s);
// The state in path, or nullopt with *err saying why not.
std::optional<State> LoadState(const std::string& path, std::string* err);

// The state every thread updates; Save() replaces the file atomically.
class StateFile {
 public:
  std::mutex mu;
  State state;  // GUARDED_BY(mu)
  std::string path;  // empty: no --state

  bool enabled() const { return !path.empty(); }

  // REQUIRES: mu held.
  void save_locked();
};

}  // namespace stress
