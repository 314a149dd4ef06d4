// SPDX-License-Identifier: Apache-2.0
// The chunk table: the one place that reads a file's chunk records from the
// metadata store and puts them into transactions. A chunk is stored as its
// placement record ('C': length, reserved bytes, each replica's extents) and
// its checksum pages ('K'); schema.h has their keys and encodings. The object
// store, the allocator rebuild at mount, fsck, scrub and placement all go
// through here.
#pragma once

#include <cstdint>
#include <functional>
#include <map>

#include "meta/schema.h"
#include "base/status.h"

namespace stripefs::meta {

class KvStore;
class Transaction;

// Every chunk of an inode, both halves, by chunk index. kCorruption when a
// record cannot be decoded or a chunk lacks checksums.
Result<std::map<uint64_t, ChunkRecord>> LoadChunks(KvStore* kv, uint64_t ino);

// The placement half of every chunk in the pool, in key order (inode, then
// chunk index), without checksums: what a mount needs to rebuild its
// allocators. fn gets each record or the error decoding it; returning false
// stops the walk.
Status ForEachChunkPlacement(KvStore* kv,
                             const std::function<bool(uint64_t ino, uint64_t index, Result<ChunkRecord> rec)>& fn);

// Fills rec's checksum half (rec's placement half decoded already). kCorruption
// when its checksum records are missing, undecodable or do not fit its length.
Status LoadChecksums(KvStore* kv, uint64_t ino, uint64_t index, ChunkRecord* rec);

// A chunk's records into (or out of) one transaction. stored: what the
// metadata holds for the chunk now (a default record if nothing); r: what it
// is to hold. Only the checksum pages that change are written.
void PutChunk(Transaction* txn, uint64_t ino, uint64_t index, const ChunkRecord& stored, const ChunkRecord& r);
// Only the checksum half (the intent of an in-place overwrite).
void PutChecksums(Transaction* txn, uint64_t ino, uint64_t index, const ChunkRecord& stored, const ChunkRecord& r);
// Only the placement half (a trim: the reserved bytes changed, not the data).
// The checksum pages of r holding `blocks` (all its pages if r was loaded from a whole-chunk record).
void PutChecksumPagesOf(Transaction* txn, uint64_t ino, uint64_t index, const ChunkRecord& r,
                        const std::vector<uint32_t>& blocks);
void PutPlacement(Transaction* txn, uint64_t ino, uint64_t index, const ChunkRecord& r);
void DeleteChunk(Transaction* txn, uint64_t ino, uint64_t index, const ChunkRecord& stored);
// Every record of every chunk of an inode, whatever state they are in (the
// files of ram directories, dropped at mount).
Status DeleteAllChunks(KvStore* kv, uint64_t ino, Transaction* txn);

}  // namespace stripefs::meta
