// SPDX-License-Identifier: Apache-2.0
// Per-directory layout attributes.
#include "engine/pool/layout.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "engine/placement/placement.h"
#include "engine/pool/pool.h"

namespace stripefs {

namespace {
const std::string_view kSettable[] = {kStrategyXattr, kChunkSizeXattr, kReplicasXattr};
}  // namespace

bool IsLayoutXattr(std::string_view name) {
  return std::find(std::begin(kSettable), std::end(kSettable), name) != std::end(kSettable);
}

Result<std::string> ValidateLayoutXattr(std::string_view name, std::string_view value, const meta::PoolConfig& pool) {
  std::string v(value);
  while (!v.empty() && (v.back() == '\n' || v.back() == '\0' || v.back() == ' ')) v.pop_back();
  if (name == kStrategyXattr) {
    SFS_RETURN_IF_ERROR(MakeStrategy(v).status());
    if (v == kRamStrategy && pool.ram_bytes() == 0) {
      return Status::Invalid("strategy ram keeps files in the pool's RAM segment, and this pool has none "
                             "(stripefs mkfs --ram SIZE)");
    }
    return v;
  }
  if (name == kChunkSizeXattr) {
    auto size = ParseSize(v);
    if (!size.ok() || !CheckChunkSize(size.value()).ok()) {
      return Status::Invalid("chunk_size '" + v + "' must be a power of two from 1M to 64M");
    }
    return std::to_string(size.value());
  }
  if (name == kReplicasXattr) {
    if (v.size() != 1 || v[0] < '1' || v[0] > '3') return Status::Invalid("replicas '" + v + "' must be 1, 2 or 3");
    if (static_cast<size_t>(v[0] - '0') > pool.drive_count()) {
      return Status::Invalid("replicas " + v + " needs as many drives; the pool has " + std::to_string(pool.drive_count()));
    }
    return v;
  }
  return Status::Invalid("not a layout attribute");
}

Result<FileLayout> LayoutForNewFile(meta::Namespace& ns, uint64_t dir, const meta::PoolConfig& pool) {
  FileLayout layout{pool.chunk_size, pool.strategy, pool.replicas};
  SFS_ASSIGN_OR_RETURN(auto attrs, InheritedLayoutXattrs(ns, dir));
  for (const auto& [name, value] : attrs) {
    if (name == kStrategyXattr) layout.strategy = value;
    if (name == kChunkSizeXattr) layout.chunk_size = static_cast<uint32_t>(std::stoul(value));
    if (name == kReplicasXattr) layout.replicas = static_cast<uint32_t>(std::stoul(value));
  }
  if (layout.strategy == kRamStrategy) layout.replicas = 1;  // one RAM segment, and nothing to survive anyway
  return layout;
}

Result<std::vector<std::pair<std::string, std::string>>> InheritedLayoutXattrs(meta::Namespace& ns, uint64_t dir) {
  std::vector<std::pair<std::string, std::string>> out;
  for (std::string_view name : kSettable) {
    auto v = ns.getxattr(dir, name);
    if (v.ok()) {
      out.emplace_back(std::string(name), v.value());
    } else if (v.status().code() != Code::kNoData) {
      return v.status();
    }
  }
  return out;
}

std::string LayoutJson(const FileLayout& layout) {
  nlohmann::json j;
  j["strategy"] = layout.strategy;
  j["chunk_size"] = layout.chunk_size;
  j["replicas"] = layout.replicas;
  return j.dump();
}

}  // namespace stripefs
