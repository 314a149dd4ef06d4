// SPDX-License-Identifier: Apache-2.0
// Formatting a pool: checking the options (sizes, chunk size, strategy,
// replicas), writing every drive's superblock and creating the metadata store.
#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/rand.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "engine/placement/placement.h"
#include "engine/pool/drive_files.h"
#include "engine/pool/pool.h"
#include "engine/pool/superblock.h"
#include "meta/etcd_kv_store.h"

namespace stripefs {
namespace {

std::string NewUuid() {
  unsigned char b[16];
  RAND_bytes(b, sizeof(b));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  return fmt::format("{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
                     b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                     b[15]);
}

}  // namespace

Result<uint64_t> ParseSize(std::string_view text) {
  if (text.empty()) return Status::Invalid("empty size");
  uint64_t value = 0;
  size_t i = 0;
  for (; i < text.size() && isdigit(static_cast<unsigned char>(text[i])); ++i) {
    if (value > (UINT64_MAX - 9) / 10) return Status::Invalid(fmt::format("size '{}' is too large", text));
    value = value * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  if (i == 0) return Status::Invalid(fmt::format("size '{}' does not start with a number", text));
  std::string_view suffix = text.substr(i);
  int shift = 0;
  if (suffix.size() == 1 || (suffix.size() == 3 && (suffix.substr(1) == "iB" || suffix.substr(1) == "ib")) ||
      (suffix.size() == 2 && (suffix[1] == 'B' || suffix[1] == 'b'))) {
    switch (toupper(static_cast<unsigned char>(suffix[0]))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      default: return Status::Invalid(fmt::format("size '{}' has an unknown suffix (use K, M, G or T)", text));
    }
  } else if (!suffix.empty()) {
    return Status::Invalid(fmt::format("size '{}' has an unknown suffix (use K, M, G or T)", text));
  }
  if (shift && value > (UINT64_MAX >> shift)) return Status::Invalid(fmt::format("size '{}' is too large", text));
  return value << shift;
}

Status CheckChunkSize(uint64_t bytes) {
  if (bytes < (1u << 20) || bytes > (64u << 20) || (bytes & (bytes - 1))) {
    return Status::Invalid(fmt::format("chunk size {} must be a power of two from 1M to 64M", bytes));
  }
  return Status::OK();
}

Status FormatPool(const FormatOptions& o, uint32_t root_uid, uint32_t root_gid) {
  if (o.meta_dir.empty()) return Status::Invalid("--meta DIR (or etcd://HOST:PORT[,HOST:PORT...]/PREFIX) is required");
  if (o.drives.empty()) return Status::Invalid("at least one --drive is required");
  SFS_RETURN_IF_ERROR(CheckChunkSize(o.chunk_size));
  SFS_RETURN_IF_ERROR(MakeStrategy(o.strategy).status());
  if (o.strategy == kRamStrategy) {
    return Status::Invalid("strategy ram is for directories (setfattr -n user.stripefs.strategy -v ram DIR): "
                           "files there are gone at the next mount");
  }
  if (o.replicas < 1 || o.replicas > 3) return Status::Invalid("--replicas must be 1, 2 or 3");
  if (o.replicas > o.drives.size()) {
    return Status::Invalid(fmt::format("--replicas {} needs at least {} drives", o.replicas, o.replicas));
  }
  std::set<std::string> seen;
  for (const auto& d : o.drives) {
    std::error_code ec;
    auto canon = std::filesystem::weakly_canonical(d.path, ec).string();
    if (!seen.insert(ec ? d.path : canon).second) return Status::Invalid(fmt::format("drive {} is given twice", d.path));
  }

  std::error_code ec;
  std::unique_ptr<meta::KvStore> kv;
  if (meta::IsEtcdUri(o.meta_dir)) {
    // The prefix is checked and locked before any drive changes, so an
    // unreachable cluster or a prefix that holds a pool refuses the format
    // with nothing written.
    auto opened = meta::OpenKvStore(o.meta_dir, meta::OpenMode::kCreate);
    if (opened.status().code() == Code::kExists && o.force) {
      return Status::Exists(opened.status().message() +
                            "; --force does not clear an etcd prefix: delete its keys first (etcdctl del --prefix)");
    }
    SFS_RETURN_IF_ERROR(opened.status());
    kv = std::move(opened).value();
  } else if (std::filesystem::exists(std::filesystem::path(o.meta_dir) / "CURRENT", ec)) {
    if (!o.force) {
      return Status::Exists(fmt::format("{} already holds a stripefs pool (use --force to overwrite it)", o.meta_dir));
    }
    rocksdb::Options opts;
    auto s = rocksdb::DestroyDB(o.meta_dir, opts);
    if (!s.ok()) return Status::IOError(fmt::format("cannot clear {}: {}", o.meta_dir, s.ToString()));
  } else if (std::filesystem::exists(o.meta_dir, ec) && !std::filesystem::is_directory(o.meta_dir, ec)) {
    return Status::Invalid(fmt::format("{} exists and is not a directory", o.meta_dir));
  } else if (std::filesystem::exists(o.meta_dir, ec) && !std::filesystem::is_empty(o.meta_dir, ec) && !o.force) {
    return Status::Exists(fmt::format("{} is not empty (use --force to format into it anyway)", o.meta_dir));
  }

  meta::PoolConfig config;
  config.uuid = NewUuid();
  config.chunk_size = o.chunk_size;
  config.strategy = o.strategy;
  config.replicas = o.replicas;

  // Check every drive before writing any superblock, so a refusal changes nothing.
  struct Prepared {
    int fd;
    uint64_t size;
  };
  std::vector<Prepared> prepared;
  auto close_all = [&] {
    for (auto& p : prepared) close(p.fd);
  };
  for (size_t i = 0; i < o.drives.size(); ++i) {
    const DriveSpec& d = o.drives[i];
    int fd = open(d.path.c_str(), O_RDWR | O_CLOEXEC | (d.size ? O_CREAT : 0), 0600);
    if (fd < 0) {
      close_all();
      if (errno == ENOENT) {
        return Status::NotFound(fmt::format("drive {} does not exist (give a size, PATH:SIZE, to create it)", d.path));
      }
      return Status::IOError(fmt::format("cannot open drive {}: {}", d.path, strerror(errno)));
    }
    prepared.push_back({fd, 0});
    auto existing = ReadSuperblock(fd);
    if (!o.force && (!existing.ok() || existing.value().has_value())) {
      close_all();
      return Status::Exists(fmt::format("drive {} already holds a stripefs pool{} (use --force to overwrite it)", d.path,
                                        existing.ok() ? " " + existing.value()->pool_uuid : ""));
    }
    SFS_ASSIGN_OR_RETURN(uint64_t current, DeviceSize(fd, d.path));
    uint64_t size = d.size ? d.size : current;
    struct stat st;
    fstat(fd, &st);
    if (S_ISBLK(st.st_mode) && d.size > current) {
      close_all();
      return Status::Invalid(fmt::format("drive {} has {} bytes, less than the {} asked for", d.path, current, d.size));
    }
    if (UsableCapacity(size) < o.chunk_size) {
      close_all();
      return Status::Invalid(fmt::format("drive {} is too small: it needs at least {} bytes for one chunk",
                                         d.path, kDataOffset + o.chunk_size));
    }
    prepared.back().size = size;
  }
  for (size_t i = 0; i < prepared.size(); ++i) {
    const DriveSpec& d = o.drives[i];
    struct stat st;
    fstat(prepared[i].fd, &st);
    if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) < prepared[i].size &&
        ftruncate(prepared[i].fd, static_cast<off_t>(prepared[i].size)) != 0) {
      close_all();
      return Status::IOError(fmt::format("cannot grow drive {} to {} bytes: {}", d.path, prepared[i].size, strerror(errno)));
    }
    Status s = WriteSuperblock(prepared[i].fd, {meta::kFormatVersion, static_cast<uint32_t>(i), config.uuid, prepared[i].size});
    if (!s.ok()) {
      close_all();
      return Status(s.code(), fmt::format("drive {}: {}", d.path, s.message()));
    }
    std::error_code ec2;
    std::string abs = std::filesystem::absolute(d.path, ec2).string();
    config.segments.push_back({static_cast<uint32_t>(i), "drive", ec2 ? d.path : abs, UsableCapacity(prepared[i].size)});
  }
  close_all();
  if (o.ram_size) {
    config.segments.push_back({static_cast<uint32_t>(o.drives.size()), "ram", "ram", o.ram_size / meta::kBlockSize * meta::kBlockSize});
  }

  if (!kv) {
    std::filesystem::create_directories(o.meta_dir, ec);
    SFS_ASSIGN_OR_RETURN(kv, meta::OpenRocksKvStore(o.meta_dir, meta::OpenMode::kCreate));
  }
  meta::Transaction txn;
  txn.put(meta::ConfigKey(), meta::EncodeConfig(config));
  meta::Namespace::Format(&txn, root_uid, root_gid);
  return kv->commit(txn, true);
}

}  // namespace stripefs
