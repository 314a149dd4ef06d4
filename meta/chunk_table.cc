// SPDX-License-Identifier: Apache-2.0
// The chunk table: see chunk_table.h.
#include "meta/chunk_table.h"

#include <fmt/format.h>

#include "meta/kv_store.h"

namespace stripefs::meta {

Result<std::map<uint64_t, ChunkRecord>> LoadChunks(KvStore* kv, uint64_t ino) {
  std::map<uint64_t, ChunkRecord> chunks;
  Status bad;
  SFS_RETURN_IF_ERROR(kv->scan(ChunkPrefix(ino), [&](std::string_view k, std::string_view v) {
    auto rec = DecodeChunk(v);
    if (!rec.ok()) {
      bad = rec.status();
      return false;
    }
    chunks.emplace(ChunkIndexFromKey(k), std::move(rec).value());
    return true;
  }));
  SFS_RETURN_IF_ERROR(bad);
  ChecksumLoader checksums;
  SFS_RETURN_IF_ERROR(kv->scan(ChecksumPrefix(ino), [&](std::string_view k, std::string_view v) {
    auto it = chunks.find(ChunkIndexFromKey(k));
    if (it == chunks.end()) return true;  // fsck reports strays; reads do not need them
    bad = checksums.add(k, v, &it->second);
    return bad.ok();
  }));
  SFS_RETURN_IF_ERROR(bad);
  for (const auto& [index, rec] : chunks) {
    if (!checksums.complete(index, rec)) {
      return Status::Corruption(fmt::format("inode {}: chunk {} lacks checksums", ino, index));
    }
  }
  return chunks;
}

Status ForEachChunkPlacement(KvStore* kv,
                             const std::function<bool(uint64_t ino, uint64_t index, Result<ChunkRecord> rec)>& fn) {
  return kv->scan(ChunkPrefixAll(), [&](std::string_view k, std::string_view v) {
    return fn(InoFromKey(k), ChunkIndexFromKey(k), DecodeChunk(v));
  });
}

Status LoadChecksums(KvStore* kv, uint64_t ino, uint64_t index, ChunkRecord* rec) {
  ChecksumLoader checksums;
  Status bad;
  SFS_RETURN_IF_ERROR(kv->scan(ChecksumKey(ino, index), [&](std::string_view k, std::string_view v) {
    bad = checksums.add(k, v, rec);
    return bad.ok();
  }));
  SFS_RETURN_IF_ERROR(bad);
  if (!checksums.complete(index, *rec)) {
    return Status::Corruption("checksum records are missing or do not match the chunk's length");
  }
  return Status::OK();
}

void PutChecksums(Transaction* txn, uint64_t ino, uint64_t index, const ChunkRecord& stored, const ChunkRecord& r) {
  if (stored.whole_checksum_record) txn->del(ChecksumKey(ino, index));  // replaced by pages
  for (uint32_t page = 0; page < r.checksum_pages(); ++page) {
    if (stored.whole_checksum_record || page >= stored.checksum_pages() || !SameChecksumPage(stored, r, page)) {
      txn->put(ChecksumPageKey(ino, index, page), EncodeChecksumPage(r, page));
    }
  }
  if (!stored.whole_checksum_record) {
    for (uint32_t page = r.checksum_pages(); page < stored.checksum_pages(); ++page) {
      txn->del(ChecksumPageKey(ino, index, page));
    }
  }
}

void PutChunk(Transaction* txn, uint64_t ino, uint64_t index, const ChunkRecord& stored, const ChunkRecord& r) {
  txn->put(ChunkKey(ino, index), EncodeChunk(r));
  PutChecksums(txn, ino, index, stored, r);
}

void DeleteChunk(Transaction* txn, uint64_t ino, uint64_t index, const ChunkRecord& stored) {
  txn->del(ChunkKey(ino, index));
  if (stored.whole_checksum_record) {
    txn->del(ChecksumKey(ino, index));
    return;
  }
  for (uint32_t page = 0; page < stored.checksum_pages(); ++page) txn->del(ChecksumPageKey(ino, index, page));
}

void PutChecksumPagesOf(Transaction* txn, uint64_t ino, uint64_t index, const ChunkRecord& r,
                        const std::vector<uint32_t>& blocks) {
  if (r.whole_checksum_record) {
    PutChecksums(txn, ino, index, r, r);  // every page, and the whole record deleted
    return;
  }
  uint32_t last_page = ~uint32_t{0};
  for (uint32_t b : blocks) {  // in order, so a page is written once
    const uint32_t page = b / kChecksumPageBlocks;
    if (page == last_page || page >= r.checksum_pages()) continue;
    txn->put(ChecksumPageKey(ino, index, page), EncodeChecksumPage(r, page));
    last_page = page;
  }
}

void PutPlacement(Transaction* txn, uint64_t ino, uint64_t index, const ChunkRecord& r) {
  txn->put(ChunkKey(ino, index), EncodeChunk(r));
}

Status DeleteAllChunks(KvStore* kv, uint64_t ino, Transaction* txn) {
  for (const std::string& prefix : {ChunkPrefix(ino), ChecksumPrefix(ino)}) {
    SFS_RETURN_IF_ERROR(kv->scan(prefix, [&](std::string_view k, std::string_view) {
      txn->del(std::string(k));
      return true;
    }));
  }
  return Status::OK();
}

}  // namespace stripefs::meta
