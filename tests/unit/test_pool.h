// SPDX-License-Identifier: Apache-2.0
// Shared by unit tests that format a real pool (drive files, RocksDB).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "engine/pool/pool.h"

namespace stripefs::testing_support {

// A fresh, empty directory for one test's pool: <tmp>/stripefs-<name>-<pid>.
inline std::filesystem::path FreshTestDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("stripefs-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The options of a pool in dir: its metadata in dir/meta and `drives` drive
// files dir/d0, dir/d1, ... of drive_size bytes each; the rest as FormatPool's defaults.
inline FormatOptions TestPoolOptions(const std::filesystem::path& dir, int drives, uint64_t drive_size) {
  FormatOptions o;
  o.meta_dir = (dir / "meta").string();
  for (int i = 0; i < drives; ++i) o.drives.push_back({(dir / ("d" + std::to_string(i))).string(), drive_size});
  return o;
}

}  // namespace stripefs::testing_support
