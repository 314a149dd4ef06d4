// SPDX-License-Identifier: Apache-2.0
// The control interface's names, and the CLI's reading of placement pages
// (see control.h).
#include "fs/control.h"

#include <charconv>

namespace stripefs::fs {

bool IsControlXattr(std::string_view name) {
  return name == kPlacementXattr || name == kDfXattr || name == kScrubXattr || name == kStatsXattr ||
         name == kAddDriveXattr || name == kLayoutXattr || PlacementPageFirst(name).has_value();
}

std::string PlacementPageXattr(uint64_t first_chunk) {
  return std::string(kPlacementPagePrefix) + std::to_string(first_chunk);
}

std::optional<uint64_t> PlacementPageFirst(std::string_view name) {
  if (!name.starts_with(kPlacementPagePrefix)) return std::nullopt;
  name.remove_prefix(kPlacementPagePrefix.size());
  uint64_t first = 0;
  const auto [end, err] = std::from_chars(name.data(), name.data() + name.size(), first);
  if (name.empty() || err != std::errc() || end != name.data() + name.size()) return std::nullopt;
  return first;
}

namespace {

// One read of every page; nullopt when the file changed between two of them.
Result<std::optional<nlohmann::json>> ReadPagesOnce(
    const std::function<Result<std::string>(const std::string& name)>& get) {
  nlohmann::json whole;
  uint64_t first = 0;
  for (;;) {
    SFS_ASSIGN_OR_RETURN(std::string value, get(PlacementPageXattr(first)));
    auto page = nlohmann::json::parse(value, nullptr, false);
    if (!page.is_object() || !page.contains("chunks") || !page.contains("next") || !page.contains("ctime_ns")) {
      return Status::Corruption("the daemon's placement page is not the expected JSON");
    }
    const nlohmann::json next = page["next"];  // page is moved below
    if (!next.is_null() && (!next.is_number_unsigned() || next.get<uint64_t>() <= first)) {
      return Status::Corruption("the daemon's placement pages do not advance");
    }
    if (whole.is_null()) {
      whole = std::move(page);
    } else if (page["ctime_ns"] != whole["ctime_ns"] || page["size"] != whole["size"] || page["uri"] != whole["uri"]) {
      return std::optional<nlohmann::json>();
    } else {
      auto& chunks = whole["chunks"].get_ref<nlohmann::json::array_t&>();
      for (auto& c : page["chunks"]) chunks.push_back(std::move(c));
    }
    if (next.is_null()) break;
    first = next.get<uint64_t>();
  }
  whole.erase("next");
  whole.erase("ctime_ns");
  return std::optional<nlohmann::json>(std::move(whole));
}

}  // namespace

Result<nlohmann::json> ReadPlacementPages(const std::function<Result<std::string>(const std::string& name)>& get) {
  constexpr int kAttempts = 3;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    SFS_ASSIGN_OR_RETURN(auto whole, ReadPagesOnce(get));
    if (whole) return std::move(*whole);
  }
  return Status(Code::kBusy, "the file kept changing while its placement was read");
}

}  // namespace stripefs::fs
