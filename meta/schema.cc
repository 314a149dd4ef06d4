// SPDX-License-Identifier: Apache-2.0
// Encodings of the metadata records: little-endian fixed-width fields behind
// a version byte. A decoder refuses any version it does not know.
#include "meta/schema.h"

#include "meta/kv_store.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

namespace stripefs::meta {
namespace {

void PutBE(std::string* s, uint64_t v) {
  for (int i = 7; i >= 0; --i) s->push_back(static_cast<char>((v >> (i * 8)) & 0xff));
}

std::string KeyWithIno(char tag, uint64_t ino) {
  std::string k(1, tag);
  PutBE(&k, ino);
  return k;
}

class Writer {
 public:
  explicit Writer(uint8_t version) { out_.push_back(static_cast<char>(version)); }
  template <typename T>
  void fixed(T v) {
    char buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));
    out_.append(buf, sizeof(T));
  }
  void bytes(std::string_view s) {
    fixed<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool version(uint8_t want) {
    if (in_.empty() || static_cast<uint8_t>(in_[0]) != want) return false;
    in_.remove_prefix(1);
    return true;
  }
  template <typename T>
  bool fixed(T* v) {
    if (in_.size() < sizeof(T)) return false;
    std::memcpy(v, in_.data(), sizeof(T));
    in_.remove_prefix(sizeof(T));
    return true;
  }
  bool bytes(std::string* s) {
    uint32_t n;
    if (!fixed(&n) || in_.size() < n) return false;
    s->assign(in_.data(), n);
    in_.remove_prefix(n);
    return true;
  }
  bool done() const { return in_.empty(); }
  std::string_view rest() {
    std::string_view r = in_;
    in_ = {};
    return r;
  }

 private:
  std::string_view in_;
};

constexpr uint8_t kRecordVersion = 1;
constexpr size_t kChunkKeySize = 17;  // tag, ino, chunk index

Status Bad(const char* what) { return Status::Corruption(std::string("undecodable ") + what + " record"); }

}  // namespace

bool ChunkRecord::block_matches(uint32_t block, uint32_t crc) const {
  if (block < crcs.size() && crcs[block] == crc) return true;
  for (const auto& [b, c] : pending) {
    if (b == block && c == crc) return true;
  }
  return false;
}

std::string ConfigKey() { return "Pconfig"; }
std::string NextInoKey() { return "Pnext_ino"; }
std::string LogSeqKey() { return "Plog_seq"; }
std::string InodeKey(uint64_t ino) { return KeyWithIno('I', ino); }
std::string InodePrefixAll() { return "I"; }
std::string DirEntryKey(uint64_t parent, std::string_view name) {
  std::string k = KeyWithIno('D', parent);
  k.append(name);
  return k;
}
std::string DirPrefix(uint64_t parent) { return KeyWithIno('D', parent); }
std::string DirPrefixAll() { return "D"; }
std::string ChunkKey(uint64_t ino, uint64_t index) {
  std::string k = KeyWithIno('C', ino);
  PutBE(&k, index);
  return k;
}
std::string ChunkPrefix(uint64_t ino) { return KeyWithIno('C', ino); }
std::string ChunkPrefixAll() { return "C"; }
std::string ChecksumKey(uint64_t ino, uint64_t index) {
  std::string k = KeyWithIno('K', ino);
  PutBE(&k, index);
  return k;
}
std::string ChecksumPageKey(uint64_t ino, uint64_t index, uint32_t page) {
  std::string k = ChecksumKey(ino, index);
  for (int i = 3; i >= 0; --i) k.push_back(static_cast<char>((page >> (i * 8)) & 0xff));
  return k;
}
std::string ChecksumPrefix(uint64_t ino) { return KeyWithIno('K', ino); }
std::string ChecksumPrefixAll() { return "K"; }
std::string XattrKey(uint64_t ino, std::string_view name) {
  std::string k = KeyWithIno('X', ino);
  k.append(name);
  return k;
}
std::string XattrPrefix(uint64_t ino) { return KeyWithIno('X', ino); }
std::string XattrPrefixAll() { return "X"; }
std::string OrphanKey(uint64_t ino) { return KeyWithIno('O', ino); }
std::string OrphanPrefixAll() { return "O"; }
std::string VolatileKey(uint64_t ino) { return KeyWithIno('V', ino); }
std::string VolatilePrefixAll() { return "V"; }
std::string DeferredKey(uint64_t seq) { return KeyWithIno('W', seq); }
std::string LogFloorKey(uint64_t ino) { return KeyWithIno('L', ino); }
std::string DeferredPrefixAll() { return "W"; }
uint64_t SeqFromDeferredKey(std::string_view key) { return DecodeU64BE(key.substr(1, 8)); }

uint64_t DecodeU64BE(std::string_view b) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8 && i < b.size(); ++i) v = (v << 8) | static_cast<uint8_t>(b[i]);
  return v;
}

std::string EncodeConfig(const PoolConfig& c) {
  nlohmann::json j;
  j["format_version"] = c.format_version;
  j["uuid"] = c.uuid;
  j["chunk_size"] = c.chunk_size;
  j["strategy"] = c.strategy;
  j["replicas"] = c.replicas;
  j["segments"] = nlohmann::json::array();
  for (const auto& s : c.segments) {
    j["segments"].push_back({{"id", s.id}, {"kind", s.kind}, {"path", s.path}, {"capacity", s.capacity}});
  }
  return j.dump();
}

Result<PoolConfig> DecodeConfig(std::string_view bytes) {
  try {
    auto j = nlohmann::json::parse(bytes);
    PoolConfig c;
    c.format_version = j.at("format_version").get<uint32_t>();
    if (c.format_version != kFormatVersion) {
      return Status::Corruption("pool format version " + std::to_string(c.format_version) +
                                " is not supported (this build reads version " +
                                std::to_string(kFormatVersion) + ")");
    }
    c.uuid = j.at("uuid").get<std::string>();
    c.chunk_size = j.at("chunk_size").get<uint32_t>();
    c.strategy = j.at("strategy").get<std::string>();
    c.replicas = j.at("replicas").get<uint32_t>();
    for (const auto& s : j.at("segments")) {
      c.segments.push_back({s.at("id").get<uint32_t>(), s.at("kind").get<std::string>(),
                            s.at("path").get<std::string>(), s.at("capacity").get<uint64_t>()});
    }
    return c;
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("pool configuration is damaged: ") + e.what());
  }
}

std::string EncodeDeferred(const DeferredWrite& d) {
  Writer w(kRecordVersion);
  w.fixed(d.ino);
  w.fixed(d.index);
  w.fixed(d.first_block);
  w.bytes(d.blocks);
  return w.take();
}

Result<DeferredWrite> DecodeDeferred(std::string_view bytes) {
  Reader r(bytes);
  DeferredWrite d;
  if (!r.version(kRecordVersion) || !r.fixed(&d.ino) || !r.fixed(&d.index) || !r.fixed(&d.first_block) ||
      !r.bytes(&d.blocks) || !r.done() || d.blocks.empty() || d.blocks.size() % kBlockSize != 0) {
    return Bad("deferred write");
  }
  return d;
}

std::string EncodeLoggedWriteHeader(const LoggedWrite& x) {
  Writer w(kRecordVersion);
  w.fixed(x.seq);
  w.fixed(x.ino);
  w.fixed(x.mtime_ns);
  w.fixed(static_cast<uint32_t>(x.parts.size()));
  for (const LoggedWrite::Part& p : x.parts) {
    w.fixed(p.index);
    w.fixed(p.first_block);
    w.fixed(p.count());
  }
  return w.take();
}

Result<LoggedWrite> DecodeLoggedWrite(std::string_view record) {
  Reader r(record);
  LoggedWrite x;
  uint32_t parts = 0;
  if (!r.version(kRecordVersion) || !r.fixed(&x.seq) || !r.fixed(&x.ino) || !r.fixed(&x.mtime_ns) ||
      !r.fixed(&parts) || parts == 0 || parts > 1024) {
    return Bad("logged write");
  }
  std::vector<uint32_t> counts(parts);
  x.parts.resize(parts);
  for (uint32_t i = 0; i < parts; ++i) {
    if (!r.fixed(&x.parts[i].index) || !r.fixed(&x.parts[i].first_block) || !r.fixed(&counts[i]) || counts[i] == 0) {
      return Bad("logged write");
    }
  }
  std::string_view blocks = r.rest();
  for (uint32_t i = 0; i < parts; ++i) {
    const size_t n = size_t{counts[i]} * kBlockSize;
    if (blocks.size() < n) return Bad("logged write");
    x.parts[i].blocks = blocks.substr(0, n);
    blocks.remove_prefix(n);
  }
  if (!blocks.empty()) return Bad("logged write");
  return x;
}

std::string EncodeU64(uint64_t v) {
  Writer w(kRecordVersion);
  w.fixed(v);
  return w.take();
}

Result<uint64_t> DecodeU64Value(std::string_view bytes) {
  Reader r(bytes);
  uint64_t v;
  if (!r.version(kRecordVersion) || !r.fixed(&v) || !r.done()) return Bad("counter");
  return v;
}

std::string EncodeInode(const InodeRecord& x) {
  Writer w(kRecordVersion);
  w.fixed(x.ino);
  w.fixed(x.mode);
  w.fixed(x.uid);
  w.fixed(x.gid);
  w.fixed(x.nlink);
  w.fixed(x.size);
  w.fixed(x.rdev);
  w.fixed(x.atime_ns);
  w.fixed(x.mtime_ns);
  w.fixed(x.ctime_ns);
  w.fixed(x.parent);
  w.bytes(x.uri);
  w.fixed(x.chunk_size);
  w.bytes(x.strategy);
  w.fixed(x.replicas);
  w.bytes(x.symlink);
  w.fixed(x.allocated);
  return w.take();
}

Result<InodeRecord> DecodeInode(std::string_view bytes) {
  Reader r(bytes);
  InodeRecord x;
  if (!r.version(kRecordVersion) || !r.fixed(&x.ino) || !r.fixed(&x.mode) || !r.fixed(&x.uid) ||
      !r.fixed(&x.gid) || !r.fixed(&x.nlink) || !r.fixed(&x.size) || !r.fixed(&x.rdev) ||
      !r.fixed(&x.atime_ns) || !r.fixed(&x.mtime_ns) || !r.fixed(&x.ctime_ns) ||
      !r.fixed(&x.parent) || !r.bytes(&x.uri) || !r.fixed(&x.chunk_size) ||
      !r.bytes(&x.strategy) || !r.fixed(&x.replicas) || !r.bytes(&x.symlink) ||
      !r.fixed(&x.allocated) || !r.done()) {
    return Bad("inode");
  }
  return x;
}

std::string EncodeDirEntry(const DirEntry& e) {
  Writer w(kRecordVersion);
  w.fixed(e.ino);
  w.fixed(e.type);
  return w.take();
}

Result<DirEntry> DecodeDirEntry(std::string_view bytes) {
  Reader r(bytes);
  DirEntry e;
  if (!r.version(kRecordVersion) || !r.fixed(&e.ino) || !r.fixed(&e.type) || !r.done()) {
    return Bad("directory entry");
  }
  return e;
}

uint64_t Replica::bytes() const {
  uint64_t n = 0;
  for (const Extent& e : extents) n += e.length;
  return n;
}

void Replica::append(Extent e) {
  if (e.length == 0) return;
  if (!extents.empty() && extents.back().offset + extents.back().length == e.offset) {
    extents.back().length += e.length;
  } else {
    extents.push_back(e);
  }
}

void Replica::cut(uint64_t keep, std::vector<Extent>* rest) {
  uint64_t start = 0;
  size_t kept = 0;
  for (Extent& e : extents) {
    if (start + e.length <= keep) {
      start += e.length;
      ++kept;
      continue;
    }
    if (start < keep) {  // this extent is split: its head stays
      const uint64_t head = keep - start;
      rest->push_back({e.offset + head, e.length - head});
      e.length = head;
      ++kept;
    } else {
      rest->push_back(e);
    }
    start += e.length;
  }
  extents.resize(kept);
}

// Version 1 (0.1.0): every replica one extent of `capacity` bytes at its
// offset. Version 2: each replica lists its extents.
constexpr uint8_t kChunkOneExtentVersion = 1;
constexpr uint8_t kChunkVersion = 2;
constexpr uint32_t kMaxExtentsPerReplica = 1u << 20;  // a 4 GiB chunk in 4 KiB pieces

std::string EncodeChunk(const ChunkRecord& c) {
  Writer w(kChunkVersion);
  w.fixed(c.length);
  w.fixed(c.capacity);
  w.fixed(static_cast<uint32_t>(c.replicas.size()));
  for (const Replica& r : c.replicas) {
    w.fixed(r.segment);
    w.fixed(static_cast<uint32_t>(r.extents.size()));
    for (const Extent& e : r.extents) {
      w.fixed(e.offset);
      w.fixed(e.length);
    }
  }
  return w.take();
}

Result<ChunkRecord> DecodeChunk(std::string_view bytes) {
  const bool one_extent = !bytes.empty() && static_cast<uint8_t>(bytes[0]) == kChunkOneExtentVersion;
  Reader r(bytes);
  ChunkRecord c;
  uint32_t n;
  if (!r.version(one_extent ? kChunkOneExtentVersion : kChunkVersion) || !r.fixed(&c.length) ||
      !r.fixed(&c.capacity) || !r.fixed(&n) || n > 3) {
    return Bad("chunk");
  }
  c.replicas.resize(n);
  for (Replica& rep : c.replicas) {
    if (!r.fixed(&rep.segment)) return Bad("chunk");
    if (one_extent) {
      Extent e{0, c.capacity};
      if (!r.fixed(&e.offset)) return Bad("chunk");
      rep.extents.push_back(e);
      continue;
    }
    uint32_t extents;
    if (!r.fixed(&extents) || extents > kMaxExtentsPerReplica) return Bad("chunk");
    rep.extents.resize(extents);
    for (Extent& e : rep.extents) {
      if (!r.fixed(&e.offset) || !r.fixed(&e.length) || e.length == 0) return Bad("chunk");
    }
    if (rep.bytes() != c.capacity) return Bad("chunk");
  }
  if (!r.done()) return Bad("chunk");
  return c;
}

namespace {

// Checksums of blocks [first, last) and the pending ones among them.
std::string EncodeChecksumRange(const ChunkRecord& c, uint32_t first, uint32_t last) {
  Writer w(kRecordVersion);
  w.fixed(last - first);
  for (uint32_t b = first; b < last; ++b) w.fixed(c.crcs[b]);
  uint32_t pending = 0;
  for (const auto& e : c.pending) pending += e.first >= first && e.first < last;
  w.fixed(pending);
  for (const auto& [b, crc] : c.pending) {
    if (b < first || b >= last) continue;
    w.fixed(b);
    w.fixed(crc);
  }
  return w.take();
}

// Fills crcs [first, last) of c (sized already) and appends the pending ones,
// which a page must hold for its own blocks only (a whole-chunk record was
// never checked for that).
Status DecodeChecksumRange(std::string_view bytes, uint32_t first, uint32_t last, bool page, ChunkRecord* c) {
  Reader r(bytes);
  uint32_t n;
  if (!r.version(kRecordVersion) || !r.fixed(&n) || n != last - first) return Bad("chunk checksum");
  for (uint32_t b = first; b < last; ++b) {
    if (!r.fixed(&c->crcs[b])) return Bad("chunk checksum");
  }
  if (!r.fixed(&n)) return Bad("chunk checksum");
  for (uint32_t i = 0; i < n; ++i) {
    std::pair<uint32_t, uint32_t> e;
    if (!r.fixed(&e.first) || !r.fixed(&e.second) || (page && (e.first < first || e.first >= last))) {
      return Bad("chunk checksum");
    }
    c->pending.push_back(e);
  }
  if (!r.done()) return Bad("chunk checksum");
  return Status::OK();
}

uint32_t PageStart(uint32_t page) { return page * kChecksumPageBlocks; }
uint32_t PageEnd(const ChunkRecord& c, uint32_t page) { return std::min(c.blocks(), PageStart(page + 1)); }

}  // namespace

bool SameChecksumPage(const ChunkRecord& a, const ChunkRecord& b, uint32_t page) {
  const uint32_t first = PageStart(page), last = PageEnd(a, page);
  if (last != PageEnd(b, page) || a.crcs.size() < last || b.crcs.size() < last ||
      !std::equal(a.crcs.begin() + first, a.crcs.begin() + last, b.crcs.begin() + first)) {
    return false;
  }
  auto in_page = [&](const auto& e) { return e.first >= first && e.first < last; };
  auto x = a.pending.begin(), y = b.pending.begin();
  for (;; ++x, ++y) {
    x = std::find_if(x, a.pending.end(), in_page);
    y = std::find_if(y, b.pending.end(), in_page);
    if (x == a.pending.end() || y == b.pending.end()) return x == a.pending.end() && y == b.pending.end();
    if (*x != *y) return false;
  }
}

std::string EncodeChecksums(const ChunkRecord& c) {
  return EncodeChecksumRange(c, 0, static_cast<uint32_t>(c.crcs.size()));
}

Status DecodeChecksums(std::string_view bytes, ChunkRecord* c) {
  c->crcs.assign(c->blocks(), 0);
  c->pending.clear();
  return DecodeChecksumRange(bytes, 0, c->blocks(), false, c);
}

std::string EncodeChecksumPage(const ChunkRecord& c, uint32_t page) {
  return EncodeChecksumRange(c, PageStart(page), PageEnd(c, page));
}

Status ChecksumLoader::add(std::string_view key, std::string_view value, ChunkRecord* rec) {
  uint32_t& records = records_[ChunkIndexFromKey(key)];
  Status s;
  if (key.size() == kChunkKeySize) {  // a whole-chunk record
    rec->whole_checksum_record = true;
    ++records;
    s = DecodeChecksums(value, rec);
  } else if (key.size() != kChunkKeySize + 4) {
    s = Bad("chunk checksum key");
  } else {
    uint32_t page = 0;
    for (char ch : key.substr(kChunkKeySize)) page = page << 8 | static_cast<uint8_t>(ch);
    if (page >= rec->checksum_pages()) {
      s = Status::Corruption("a chunk checksum page lies past the chunk's length");
    } else {
      if (records++ == 0) rec->crcs.assign(rec->blocks(), 0);
      s = DecodeChecksumRange(value, PageStart(page), PageEnd(*rec, page), true, rec);
    }
  }
  failed_ = failed_ || !s.ok();
  return s;
}

bool ChecksumLoader::complete(uint64_t index, const ChunkRecord& rec) const {
  if (failed_) return false;
  auto it = records_.find(index);
  const uint32_t records = it == records_.end() ? 0 : it->second;
  return rec.whole_checksum_record ? records == 1 : records == rec.checksum_pages();
}

}  // namespace stripefs::meta
