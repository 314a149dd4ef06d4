// SPDX-License-Identifier: Apache-2.0
// Scrub: read every replica of every chunk, check each block, rewrite bad
// blocks from an intact replica. Online per object (ObjectStore::scrub, what
// `stripefs scrub MOUNTPOINT` asks the daemon for, file by file) and offline
// over a whole pool (Pool::scrub, also the rebuild step of replace-drive).
#include <fmt/format.h>
#include <sys/stat.h>

#include "engine/store/chunk_space.h"
#include "base/crc32c.h"
#include "engine/pool/pool.h"

namespace stripefs {

using meta::ChunkRecord;
using meta::Replica;
constexpr uint32_t kBlock = meta::kBlockSize;

void ScrubReport::add(const ScrubReport& o) {
  chunks += o.chunks;
  bytes += o.bytes;
  repaired_blocks += o.repaired_blocks;
  missing_replicas += o.missing_replicas;
  unrepairable.insert(unrepairable.end(), o.unrepairable.begin(), o.unrepairable.end());
}

nlohmann::json ScrubReportJson(const ScrubReport& r) {
  return {{"chunks", r.chunks},
          {"bytes", r.bytes},
          {"repaired_blocks", r.repaired_blocks},
          {"missing_replicas", r.missing_replicas},
          {"unrepairable", r.unrepairable}};
}

Result<ScrubReport> ObjectStore::scrub(Object& obj) {
  std::vector<uint64_t> indices;
  {
    std::unique_lock lock(obj.mu);
    SFS_RETURN_IF_ERROR(ensure_loaded(obj));
    for (const auto& [index, rec] : obj.chunks) indices.push_back(index);
  }
  ScrubReport report;
  for (uint64_t index : indices) {
    std::shared_lock lock(obj.mu);  // a write to this chunk waits; it would change what a block must match
    auto it = obj.chunks.find(index);
    if (it == obj.chunks.end()) continue;  // cut by a truncate meanwhile
    SFS_RETURN_IF_ERROR(scrub_chunk(obj, index, it->second, &report));
  }
  return report;
}

Status ObjectStore::scrub_chunk(const Object& obj, uint64_t index, const ChunkRecord& rec, ScrubReport* report) {
  report->chunks++;
  const uint32_t blocks = rec.blocks();
  if (blocks == 0) return Status::OK();
  const size_t span = size_t{blocks} * kBlock;
  struct Copy {
    const Replica* extent;
    AlignedBuffer buf;
    std::string read_error;
    std::vector<bool> intact;  // by block
  };
  std::vector<Copy> copies;
  std::vector<uint32_t> crcs(blocks);
  std::vector<IoRequest> reqs;
  for (const Replica& e : rec.replicas) {
    if (!drives_.at(e.segment).available) {
      report->missing_replicas++;
      continue;
    }
    Copy& c = copies.emplace_back();
    c.extent = &e;
    c.buf.resize_uninitialized(span);
    c.intact.assign(blocks, false);
    reqs.clear();
    add_requests(IoRequest::Op::kRead, e, 0, span, c.buf.data(), &reqs);
    Status s = io_->run(reqs);
    report->bytes += span;
    if (!s.ok()) {
      c.read_error = s.message();
      continue;
    }
    overlay_deferred(obj, index, 0, blocks, c.buf.data());  // blocks not on the drives yet are good in memory
    Crc32cBlocks(c.buf.data(), kBlock, blocks, crcs.data());
    for (uint32_t b = 0; b < blocks; ++b) {
      c.intact[b] = rec.block_matches(b, crcs[b]) || store_space::TailVerifiesZeroed(rec, b, c.buf.data() + size_t{b} * kBlock);
    }
  }

  std::vector<IoRequest> repairs;
  uint32_t lost = 0;
  for (uint32_t b = 0; b < blocks; ++b) {
    const Copy* source = nullptr;
    for (const Copy& c : copies) {
      if (c.intact[b]) {
        source = &c;
        break;
      }
    }
    if (!source) {
      lost++;
      continue;
    }
    // Unreadable copies are rewritten too: a drive remaps a bad sector on write.
    for (const Copy& c : copies) {
      if (c.intact[b]) continue;
      add_requests(IoRequest::Op::kWrite, *c.extent, uint64_t{b} * kBlock, kBlock,
                   const_cast<char*>(source->buf.data()) + size_t{b} * kBlock, &repairs);
    }
  }
  const std::string where = fmt::format("object {} chunk {}", obj.uri, index);
  if (!repairs.empty()) {
    Status s = rewrite(repairs);
    if (s.ok()) {
      report->repaired_blocks += repairs.size();
    } else {
      report->unrepairable.push_back(fmt::format("{}: rewriting {} bad block(s) failed: {}", where, repairs.size(),
                                                 s.message()));
    }
  }
  if (lost > 0) {
    std::string why;
    for (const Copy& c : copies) {
      why += c.read_error.empty() ? fmt::format("; drive {}: checksum mismatch", c.extent->segment)
                                  : fmt::format("; drive {}: {}", c.extent->segment, c.read_error);
    }
    if (copies.size() < rec.replicas.size()) why += "; other replicas are on missing drives";
    report->unrepairable.push_back(fmt::format("{}: {} of {} blocks have no intact replica{}", where, lost, blocks, why));
  }
  return Status::OK();
}

Result<ScrubReport> Pool::scrub(const std::function<void(const ScrubReport&)>& progress) {
  std::vector<meta::InodeRecord> files;
  SFS_RETURN_IF_ERROR(kv_->scan(meta::InodePrefixAll(), [&](std::string_view k, std::string_view v) {
    auto r = meta::DecodeInode(v);
    if (r.ok() && S_ISREG(r->mode)) files.push_back(std::move(r).value());
    return true;
  }));
  ScrubReport total;
  SFS_ASSIGN_OR_RETURN(auto usage, this->usage());
  for (const auto& u : usage) total.planned_bytes += u.missing ? 0 : u.used;
  for (const auto& inode : files) {
    SFS_ASSIGN_OR_RETURN(auto obj, store_->object(inode));
    auto one = store_->scrub(*obj);
    obj.reset();
    store_->forget_if_unused(inode.ino);
    SFS_RETURN_IF_ERROR(one.status());
    total.add(one.value());
    if (progress) progress(total);
  }
  SFS_RETURN_IF_ERROR(store_->sync());
  return total;
}

}  // namespace stripefs
