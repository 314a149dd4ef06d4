// SPDX-License-Identifier: Apache-2.0
// The daemon's answers to the control xattrs (see control_server.h, and
// control.h for each name and the JSON of its answer).
#include "fs/control_server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "engine/pool/layout.h"
#include "fs/control.h"

namespace stripefs::fs {

using meta::InodeRecord;

Result<std::string> ControlServer::get(uint64_t ino, std::string_view name, const Caller& caller) {
  if (name == kLayoutXattr) {  // for a directory: the layout new files get
    SFS_ASSIGN_OR_RETURN(InodeRecord r, pool_->ns().get(ino));
    if (S_ISDIR(r.mode)) {
      SFS_ASSIGN_OR_RETURN(FileLayout layout, LayoutForNewFile(pool_->ns(), ino, pool_->config()));
      return LayoutJson(layout);
    }
    if (!S_ISREG(r.mode)) return Status(Code::kNoData, "no layout");
    return LayoutJson({r.chunk_size, r.strategy, r.replicas});
  }
  if (name == kPlacementXattr) {
    SFS_ASSIGN_OR_RETURN(InodeRecord r, pool_->ns().get(ino));
    SFS_ASSIGN_OR_RETURN(auto j, pool_->placement(r, ""));
    return j.dump();
  }
  if (auto first = PlacementPageFirst(name)) {
    SFS_ASSIGN_OR_RETURN(InodeRecord r, pool_->ns().get(ino));
    SFS_ASSIGN_OR_RETURN(auto j, pool_->placement(r, "", *first, kPlacementPageBytes));
    return j.dump();
  }
  if (name == kScrubXattr) return scrub_file(ino);
  if (name == kAddDriveXattr) return add_drive_result(caller.pid);
  if (name == kStatsXattr) {
    SFS_ASSIGN_OR_RETURN(nlohmann::json j, stats_());
    return j.dump();
  }
  SFS_ASSIGN_OR_RETURN(auto usage, pool_->usage_json());
  return usage.dump();
}

Status ControlServer::set(uint64_t ino, std::string_view name, std::string_view value, const Caller& caller) {
  if (name != kAddDriveXattr) return Status(Code::kPermission, fmt::format("{} is read-only", name));
  // An online add-drive: on the mount root only.
  if (ino != meta::kRootIno) return Status::Invalid("add_drive is set on the mount root");
  return add_drive(caller, value);
}

Status ControlServer::add_drive(const Caller& caller, std::string_view value) {
  auto added = add_drive_as(caller, value);
  nlohmann::json j;
  if (added.ok()) {
    j = std::move(added).value();
  } else {
    j = {{"ok", false}, {"error", added.status().message()}};
    spdlog::warn("add-drive {}: {}", value, added.status().message());
  }
  std::lock_guard lock(mu_);
  if (add_drive_results_.size() >= 64) add_drive_results_.clear();  // callers read theirs at once
  add_drive_results_[caller.pid] = j.dump();
  return added.status();
}

Result<std::string> ControlServer::add_drive_result(pid_t pid) {
  std::lock_guard lock(mu_);
  auto it = add_drive_results_.find(pid);
  if (it == add_drive_results_.end()) return Status(Code::kNoData, "no add-drive by this process");
  return it->second;
}

Result<nlohmann::json> ControlServer::add_drive_as(const Caller& caller, std::string_view value) {
  if (caller.uid != 0 && caller.uid != getuid()) {
    return Status(Code::kPermission, "only root or the user the daemon runs as may add a drive");
  }
  auto j = nlohmann::json::parse(value, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("path") || !j["path"].is_string() ||
      (j.contains("size") && !j["size"].is_number_unsigned()) || (j.contains("force") && !j["force"].is_boolean())) {
    return Status::Invalid(R"(the value must be JSON: {"path":"/abs/path","size":BYTES,"force":false})");
  }
  DriveSpec spec;
  spec.path = j["path"].get<std::string>();
  spec.size = j.value("size", uint64_t{0});
  const bool force = j.value("force", false);
  const std::filesystem::path path(spec.path);
  if (!path.is_absolute()) return Status::Invalid(fmt::format("drive path {} is not absolute", spec.path));
  // A drive inside this mount would send the daemon's own I/O back to it.
  const auto rel = path.lexically_normal().lexically_relative(mountpoint_);
  if (!mountpoint_.empty() && !rel.empty() && *rel.begin() != "..") {
    return Status::Invalid(fmt::format("{} is inside the pool's own mount {}", spec.path, mountpoint_));
  }
  SFS_ASSIGN_OR_RETURN(uint32_t id, pool_->add_drive(spec, force));
  nlohmann::json out = {{"ok", true}, {"id", id}, {"path", spec.path}};
  for (const auto& seg : pool_->config().segments) {
    if (seg.id == id) out["path"] = seg.path, out["capacity"] = seg.capacity;
  }
  return out;
}

Result<std::string> ControlServer::scrub_file(uint64_t ino) {
  ObjectStore& store = pool_->store();
  SFS_ASSIGN_OR_RETURN(InodeRecord r, pool_->ns().get(ino));
  if (!S_ISREG(r.mode)) return Status(Code::kNoData, "only regular files are scrubbed");
  SFS_ASSIGN_OR_RETURN(auto obj, store.object(r));
  auto report = store.scrub(*obj);
  obj.reset();
  store.forget_if_unused(ino);
  SFS_RETURN_IF_ERROR(report.status());
  if (report->repaired_blocks > 0) {
    spdlog::warn("scrub of inode {} ({}): rewrote {} bad block(s) from intact replicas", ino, r.uri,
                 report->repaired_blocks);
    SFS_RETURN_IF_ERROR(store.sync());
  }
  for (const auto& line : report->unrepairable) spdlog::error("scrub: {}", line);
  nlohmann::json j = ScrubReportJson(report.value());
  j["unrepairable_chunks"] = report->unrepairable.size();
  if (report->unrepairable.size() > kScrubLinesMax) j["unrepairable"].get_ref<nlohmann::json::array_t&>().resize(kScrubLinesMax);
  return j.dump();
}

}  // namespace stripefs::fs
