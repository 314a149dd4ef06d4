// SPDX-License-Identifier: Apache-2.0
// Pool reports: the JSON answers of `stripefs df` (usage_json) and
// `stripefs placement` (placement), read the same way on a live mount (the
// daemon answers them, see fs/control.h) and on an unmounted pool.
#include <sys/stat.h>

#include "engine/pool/pool.h"

namespace stripefs {

using meta::InodeRecord;

Result<nlohmann::json> Pool::usage_json() {
  SFS_ASSIGN_OR_RETURN(auto usage, this->usage());
  nlohmann::json j;
  j["segments"] = nlohmann::json::array();
  for (const auto& u : usage) {
    j["segments"].push_back({{"id", u.id}, {"kind", u.kind}, {"path", u.path}, {"capacity", u.capacity}, {"used", u.used},
                             {"state", u.missing ? "missing" : "present"}});
  }
  // Beside them: what statfs (df(1)) reports, the drives as data at the
  // pool's default replica count.
  const UsableSpace usable = usable_space();
  j["usable"] = {{"replicas", usable.replicas}, {"capacity", usable.capacity}, {"free", usable.free}};
  // The layout a file gets where no directory says otherwise (`stripefs layout`).
  {
    std::shared_lock lock(config_mu_);
    j["layout"] = {{"strategy", config_.strategy}, {"chunk_size", config_.chunk_size}, {"replicas", config_.replicas}};
  }
  // Beside the contract's "segments": where the metadata lives and its room.
  SFS_ASSIGN_OR_RETURN(MetadataSpace m, metadata_space());
  j["metadata"] = {{"path", meta_dir_}, {"used", m.used}, {"free", m.free}, {"reserve", m.reserve}};
  return j;
}

Result<nlohmann::json> Pool::placement(const InodeRecord& inode, const std::string& path, uint64_t first_chunk,
                                       size_t max_chunk_bytes) {
  if ((inode.mode & S_IFMT) != S_IFREG) return Status(Code::kIsDirectory, path + " is not a regular file");
  SFS_ASSIGN_OR_RETURN(auto chunks, store_->load_chunks(inode.ino));
  std::shared_lock lock(config_mu_);
  nlohmann::json j;
  j["path"] = path;
  j["uri"] = inode.uri;
  j["size"] = inode.size;
  j["chunk_size"] = inode.chunk_size;
  j["chunks"] = nlohmann::json::array();
  const bool paged = max_chunk_bytes > 0;
  size_t page_bytes = 0;
  nlohmann::json next = nullptr;
  for (auto it = chunks.lower_bound(first_chunk); it != chunks.end(); ++it) {
    const auto& [index, rec] = *it;
    nlohmann::json c;
    c["index"] = index;
    c["offset"] = index * inode.chunk_size;
    c["length"] = rec.length;
    c["replicas"] = nlohmann::json::array();
    for (const auto& e : rec.replicas) {
      nlohmann::json extents = nlohmann::json::array();
      for (const meta::Extent& x : e.extents) extents.push_back({{"offset", kDataOffset + x.offset}, {"length", x.length}});
      c["replicas"].push_back({{"segment", e.segment},
                               {"path", config_.segments.at(e.segment).path},
                               {"offset", kDataOffset + (e.extents.empty() ? 0 : e.extents.front().offset)},
                               {"length", rec.length},
                               {"extents", std::move(extents)}});
    }
    if (paged) {
      const size_t bytes = c.dump().size() + 1;  // and its comma
      if (page_bytes > 0 && page_bytes + bytes > max_chunk_bytes) {
        next = index;
        break;
      }
      page_bytes += bytes;
    }
    j["chunks"].push_back(std::move(c));
  }
  if (paged) {
    j["next"] = std::move(next);
    j["ctime_ns"] = inode.ctime_ns;
  }
  return j;
}

}  // namespace stripefs
