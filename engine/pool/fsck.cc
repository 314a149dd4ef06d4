// SPDX-License-Identifier: Apache-2.0
// Pool::fsck: the offline consistency check of an unmounted pool.
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>

#include "engine/store/chunk_space.h"
#include "base/crc32c.h"
#include "engine/pool/pool.h"
#include "meta/chunk_table.h"

namespace stripefs {

using meta::InodeRecord;

Result<std::vector<std::string>> Pool::fsck(bool verify, std::vector<std::string>* notes,
                                            const std::function<void(uint64_t bytes, uint64_t about)>& progress) {
  std::vector<std::string> problems;
  auto problem = [&](std::string p) { problems.push_back(std::move(p)); };

  std::map<uint64_t, InodeRecord> inodes;
  SFS_RETURN_IF_ERROR(kv_->scan(meta::InodePrefixAll(), [&](std::string_view k, std::string_view v) {
    auto r = meta::DecodeInode(v);
    if (!r.ok()) {
      problem(fmt::format("inode {}: record cannot be decoded", meta::InoFromKey(k)));
    } else if (r->ino != meta::InoFromKey(k)) {
      problem(fmt::format("inode {}: record claims to be inode {}", meta::InoFromKey(k), r->ino));
    } else {
      inodes[r->ino] = r.value();
    }
    return true;
  }));
  if (!inodes.count(meta::kRootIno)) problem("the root directory (inode 1) is missing");

  std::string raw;
  if (kv_->get(meta::NextInoKey(), &raw).ok()) {
    auto next = meta::DecodeU64Value(raw);
    if (!next.ok()) problem("the inode counter cannot be decoded");
    else if (!inodes.empty() && inodes.rbegin()->first >= next.value()) {
      problem(fmt::format("the inode counter ({}) is not above the highest inode ({})", next.value(), inodes.rbegin()->first));
    }
  } else {
    problem("the inode counter is missing");
  }

  std::map<uint64_t, uint32_t> links, subdirs;
  std::map<uint64_t, uint64_t> dir_parent;  // directory -> the directory whose entry names it
  SFS_RETURN_IF_ERROR(kv_->scan(meta::DirPrefixAll(), [&](std::string_view k, std::string_view v) {
    uint64_t parent = meta::InoFromKey(k);
    std::string name(meta::NameFromKey(k));
    auto e = meta::DecodeDirEntry(v);
    if (!e.ok()) {
      problem(fmt::format("entry '{}' in directory {}: cannot be decoded", name, parent));
      return true;
    }
    auto p = inodes.find(parent);
    if (p == inodes.end() || !S_ISDIR(p->second.mode)) {
      problem(fmt::format("entry '{}' lives in {} which is not a directory", name, parent));
    }
    auto c = inodes.find(e->ino);
    if (c == inodes.end()) {
      problem(fmt::format("entry '{}' in directory {} points at missing inode {}", name, parent, e->ino));
      return true;
    }
    if ((c->second.mode & S_IFMT) != e->type) {
      problem(fmt::format("entry '{}' in directory {}: type differs from inode {}", name, parent, e->ino));
    }
    links[e->ino]++;
    if (S_ISDIR(c->second.mode)) {
      subdirs[parent]++;
      if (dir_parent.count(e->ino)) problem(fmt::format("directory {} has more than one entry", e->ino));
      dir_parent[e->ino] = parent;
    }
    return true;
  }));

  std::set<uint64_t> orphans;
  SFS_RETURN_IF_ERROR(kv_->scan(meta::OrphanPrefixAll(), [&](std::string_view k, std::string_view) {
    uint64_t ino = meta::InoFromKey(k);
    orphans.insert(ino);
    auto it = inodes.find(ino);
    if (it == inodes.end()) problem(fmt::format("orphan mark for missing inode {}", ino));
    else if (it->second.nlink != 0) problem(fmt::format("inode {} is marked orphan but has {} links", ino, it->second.nlink));
    return true;
  }));

  for (const auto& [ino, r] : inodes) {
    if (S_ISDIR(r.mode)) {
      uint32_t want = 2 + subdirs[ino];
      if (r.nlink != want) problem(fmt::format("directory {}: link count {} but {} expected", ino, r.nlink, want));
      if (ino != meta::kRootIno) {
        if (!dir_parent.count(ino)) problem(fmt::format("directory {} is not in any directory", ino));
        else if (dir_parent[ino] != r.parent) {
          problem(fmt::format("directory {}: parent recorded as {} but it lives in {}", ino, r.parent, dir_parent[ino]));
        }
      }
    } else if (r.nlink != links[ino]) {
      problem(fmt::format("inode {}: link count {} but {} entries name it", ino, r.nlink, links[ino]));
    } else if (r.nlink == 0 && !orphans.count(ino)) {
      problem(fmt::format("inode {} has no links and no orphan mark (leaked)", ino));
    }
  }
  if (notes && !orphans.empty()) {
    notes->push_back(fmt::format("{} unlinked inode(s) still held open at the last stop; the next mount reclaims them",
                                 orphans.size()));
  }

  uint64_t allocated = 0;  // every replica's reserved space: what verify reads, or a little more
  uint64_t placed = 0;     // the reserved space of the chunk records checked so far (progress without verify)
  for (const auto& [ino, r] : inodes) allocated += S_ISREG(r.mode) ? r.allocated : 0;

  struct Placed {
    uint64_t offset, len, ino, index;
  };
  std::map<uint32_t, std::vector<Placed>> by_segment;
  std::map<uint64_t, uint64_t> footprint;
  std::vector<uint64_t> verified_blocks(1, 0);
  std::set<std::pair<uint64_t, uint64_t>> chunk_keys;
  SFS_RETURN_IF_ERROR(meta::ForEachChunkPlacement(kv_.get(), [&](uint64_t ino, uint64_t index,
                                                                Result<meta::ChunkRecord> rec) {
    std::string where = fmt::format("chunk {} of inode {}", index, ino);
    if (!rec.ok()) {
      problem(where + ": record cannot be decoded");
      return true;
    }
    chunk_keys.emplace(ino, index);
    if (Status sums = meta::LoadChecksums(kv_.get(), ino, index, &rec.value()); !sums.ok()) {
      problem(fmt::format("{}: checksum records cannot be read: {}", where, sums.message()));
    }
    auto it = inodes.find(ino);
    if (it == inodes.end() || !S_ISREG(it->second.mode)) {
      problem(where + ": belongs to no regular file");
      return true;
    }
    const InodeRecord& file = it->second;
    if (index * file.chunk_size + rec->length > file.size) {
      problem(fmt::format("{}: holds data past the end of the file ({} bytes)", where, file.size));
    }
    if (rec->capacity % meta::kBlockSize || rec->capacity < rec->blocks() * meta::kBlockSize ||
        rec->capacity > file.chunk_size || rec->length == 0) {
      problem(fmt::format("{}: length {} and reserved {} do not fit", where, rec->length, rec->capacity));
    }
    std::set<uint32_t> segs;
    for (const auto& e : rec->replicas) {
      if (!holds_chunks(e.segment)) {
        problem(fmt::format("{}: names unknown drive {}", where, e.segment));
        continue;
      }
      if (!segs.insert(e.segment).second) problem(fmt::format("{}: two replicas on drive {}", where, e.segment));
      const auto& seg = config_.segments[e.segment];
      for (const meta::Extent& x : e.extents) {
        if (x.offset % meta::kBlockSize || x.length % meta::kBlockSize || x.offset > seg.capacity ||
            x.length > seg.capacity - x.offset) {
          problem(fmt::format("{}: extent {}+{} lies outside drive {}", where, x.offset, x.length, e.segment));
        }
        by_segment[e.segment].push_back({x.offset, x.length, ino, index});
      }
      if (e.bytes() != rec->capacity) {
        problem(fmt::format("{}: the extents on drive {} hold {} bytes, not the {} reserved", where, e.segment,
                            e.bytes(), rec->capacity));
      }
      footprint[ino] += rec->capacity;
      placed += rec->capacity;
    }
    if (rec->replicas.empty()) problem(where + ": has no replica");
    if (verify && rec->length > 0 && rec->crcs.size() == rec->blocks()) {
      size_t bytes = size_t{rec->blocks()} * meta::kBlockSize;
      void* raw = nullptr;
      if (posix_memalign(&raw, meta::kBlockSize, bytes) != 0) throw std::bad_alloc();
      std::unique_ptr<char, decltype(&free)> buf(static_cast<char*>(raw), &free);
      for (const auto& e : rec->replicas) {
        if (e.segment >= fds_.size() || fds_[e.segment] < 0) continue;
        if (e.bytes() < bytes) {
          problem(fmt::format("{}: the replica on drive {} is shorter than its data", where, e.segment));
          continue;
        }
        std::vector<IoRequest> reqs;
        e.map(0, bytes, [&](uint64_t at, uint64_t from, uint64_t n) {
          reqs.push_back({IoRequest::Op::kRead, e.segment, kDataOffset + at, buf.get() + from, static_cast<size_t>(n)});
        });
        if (Status s = io_->run(reqs); !s.ok()) {
          problem(fmt::format("{}: cannot be read from drive {}: {}", where, e.segment, s.message()));
          continue;
        }
        for (uint32_t b = 0; b < rec->blocks(); ++b) {
          verified_blocks[0]++;
          char* block = buf.get() + size_t{b} * meta::kBlockSize;
          if (!rec->block_matches(b, Crc32c(block, meta::kBlockSize)) &&
              !store_space::TailVerifiesZeroed(*rec, b, block)) {
            problem(fmt::format("{}: block {} on drive {} fails its checksum", where, b, e.segment));
          }
        }
      }
      if (progress) progress(verified_blocks[0] * meta::kBlockSize, allocated);
    } else if (progress && !verify) {
      progress(placed, allocated);
    }
    return true;
  }));
  SFS_RETURN_IF_ERROR(kv_->scan(meta::ChecksumPrefixAll(), [&](std::string_view k, std::string_view) {
    if (!chunk_keys.count({meta::InoFromKey(k), meta::ChunkIndexFromKey(k)})) {
      problem(fmt::format("checksums of chunk {} of inode {} belong to no chunk record", meta::ChunkIndexFromKey(k),
                          meta::InoFromKey(k)));
    }
    return true;
  }));
  for (auto& [seg, extents] : by_segment) {
    std::sort(extents.begin(), extents.end(), [](const Placed& a, const Placed& b) { return a.offset < b.offset; });
    for (size_t i = 1; i < extents.size(); ++i) {
      const Placed& a = extents[i - 1];
      const Placed& b = extents[i];
      if (a.offset + a.len > b.offset) {
        problem(fmt::format("drive {}: an extent of chunk {} of inode {} overlaps one of chunk {} of inode {}", seg,
                            a.index, a.ino, b.index, b.ino));
      }
    }
  }
  for (const auto& [ino, r] : inodes) {
    if (S_ISREG(r.mode) && footprint[ino] != r.allocated) {
      problem(fmt::format("inode {}: accounts {} bytes of space but its chunks hold {}", ino, r.allocated, footprint[ino]));
    }
  }
  SFS_RETURN_IF_ERROR(kv_->scan(meta::XattrPrefixAll(), [&](std::string_view k, std::string_view) {
    if (!inodes.count(meta::InoFromKey(k))) problem(fmt::format("extended attribute of missing inode {}", meta::InoFromKey(k)));
    return true;
  }));
  if (notes) {
    uint64_t chunks = 0;
    for (auto& [s, e] : by_segment) chunks += e.size();
    notes->push_back(fmt::format("{} inodes, {} chunk extents checked", inodes.size(), chunks));
    if (verify) notes->push_back(fmt::format("{} blocks read and verified", verified_blocks[0]));
  }
  return problems;
}

}  // namespace stripefs
