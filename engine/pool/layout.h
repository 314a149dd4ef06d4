// SPDX-License-Identifier: Apache-2.0
// Per-directory layout, in the manner of directory layout attributes on
// parallel filesystems: user.stripefs.strategy, user.stripefs.chunk_size and
// user.stripefs.replicas set on a directory decide how files created in it are
// laid out; directories created in it inherit them. Existing files keep the
// layout they were created with; user.stripefs.layout (read-only) shows it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "meta/namespace.h"
#include "meta/schema.h"

namespace stripefs {

inline constexpr std::string_view kStrategyXattr = "user.stripefs.strategy";
inline constexpr std::string_view kChunkSizeXattr = "user.stripefs.chunk_size";
inline constexpr std::string_view kReplicasXattr = "user.stripefs.replicas";
inline constexpr std::string_view kLayoutXattr = "user.stripefs.layout";

struct FileLayout {
  uint32_t chunk_size = 0;
  std::string strategy;
  uint32_t replicas = 1;
};

bool IsLayoutXattr(std::string_view name);
// Checks a value for one of the three settable layout attributes against the
// pool (kInvalidArgument says why), and returns it in canonical form.
Result<std::string> ValidateLayoutXattr(std::string_view name, std::string_view value,
                                        const meta::PoolConfig& pool);
// The layout a file created in dir gets: the pool's defaults overridden by dir's attributes.
Result<FileLayout> LayoutForNewFile(meta::Namespace& ns, uint64_t dir, const meta::PoolConfig& pool);
// The layout attributes a directory created in dir inherits (name, value).
Result<std::vector<std::pair<std::string, std::string>>> InheritedLayoutXattrs(meta::Namespace& ns, uint64_t dir);
// {"chunk_size":…,"replicas":…,"strategy":"…"}
std::string LayoutJson(const FileLayout& layout);

}  // namespace stripefs
