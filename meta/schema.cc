// Encodings of the metadata records: little-endian fixed-width fields behind
// a version byte. A decoder refuses any version it does not know.
#include "meta/schema.h"

#include "meta/kv_store.h"

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

 private:
  std::string_view in_;
};

constexpr uint8_t kRecordVersion = 1;

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

std::string EncodeChunk(const ChunkRecord& c) {
  Writer w(kRecordVersion);
  w.fixed(c.length);
  w.fixed(c.capacity);
  w.fixed(static_cast<uint32_t>(c.replicas.size()));
  for (const auto& e : c.replicas) {
    w.fixed(e.segment);
    w.fixed(e.offset);
  }
  return w.take();
}

Result<ChunkRecord> DecodeChunk(std::string_view bytes) {
  Reader r(bytes);
  ChunkRecord c;
  uint32_t n;
  if (!r.version(kRecordVersion) || !r.fixed(&c.length) || !r.fixed(&c.capacity) || !r.fixed(&n) ||
      n > 3) {
    return Bad("chunk");
  }
  c.replicas.resize(n);
  for (auto& e : c.replicas) {
    if (!r.fixed(&e.segment) || !r.fixed(&e.offset)) return Bad("chunk");
  }
  if (!r.done()) return Bad("chunk");
  return c;
}

std::string EncodeChecksums(const ChunkRecord& c) {
  Writer w(kRecordVersion);
  w.fixed(static_cast<uint32_t>(c.crcs.size()));
  for (uint32_t crc : c.crcs) w.fixed(crc);
  w.fixed(static_cast<uint32_t>(c.pending.size()));
  for (const auto& [b, crc] : c.pending) {
    w.fixed(b);
    w.fixed(crc);
  }
  return w.take();
}

Status DecodeChecksums(std::string_view bytes, ChunkRecord* c) {
  Reader r(bytes);
  uint32_t n;
  if (!r.version(kRecordVersion) || !r.fixed(&n) || n != c->blocks()) return Bad("chunk checksum");
  c->crcs.resize(n);
  for (auto& crc : c->crcs) {
    if (!r.fixed(&crc)) return Bad("chunk checksum");
  }
  if (!r.fixed(&n)) return Bad("chunk checksum");
  c->pending.resize(n);
  for (auto& [b, crc] : c->pending) {
    if (!r.fixed(&b) || !r.fixed(&crc)) return Bad("chunk checksum");
  }
  if (!r.done()) return Bad("chunk checksum");
  return Status::OK();
}

void PutChunk(Transaction* txn, uint64_t ino, uint64_t index, const ChunkRecord& r) {
  txn->put(ChunkKey(ino, index), EncodeChunk(r));
  txn->put(ChecksumKey(ino, index), EncodeChecksums(r));
}

void DeleteChunk(Transaction* txn, uint64_t ino, uint64_t index) {
  txn->del(ChunkKey(ino, index));
  txn->del(ChecksumKey(ino, index));
}

}  // namespace stripefs::meta
