// SPDX-License-Identifier: Apache-2.0
// Namespace operations, run over the in-memory store, a real RocksDB store and a real etcd cluster.
#include "meta/namespace.h"
#include "etcd_test_cluster.h"

#include <gtest/gtest.h>
#include <linux/fs.h>  // RENAME_NOREPLACE, RENAME_EXCHANGE
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>  // XATTR_CREATE, XATTR_REPLACE

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>
#include <thread>
#include <atomic>

namespace stripefs::meta {
namespace {

static_assert(RENAME_NOREPLACE == 1 && RENAME_EXCHANGE == 2);

const std::string kUuid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";

// kEtcdWriteBehind: etcd behind the write-behind cache, as a mount opens it.
enum class Backend { kMem, kRocks, kEtcd, kEtcdWriteBehind };
std::string BackendName(Backend b) {
  switch (b) {
    case Backend::kMem: return "Mem";
    case Backend::kRocks: return "Rocks";
    case Backend::kEtcd: return "Etcd";
    case Backend::kEtcdWriteBehind: return "EtcdWriteBehind";
  }
  return "";
}
void PrintTo(Backend b, std::ostream* os) { *os << BackendName(b); }

class NamespaceTest : public testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kEtcd || GetParam() == Backend::kEtcdWriteBehind) {
      etcd_ = testing_etcd::TestEtcdCluster::Get().FreshTarget();
      auto kv = GetParam() == Backend::kEtcd ? OpenEtcdKvStore(etcd_, OpenMode::kCreate)
                                             : OpenKvStore(etcd_.uri(), OpenMode::kCreate);
      ASSERT_TRUE(kv.ok()) << kv.status().message();
      kv_ = std::move(kv).value();
    } else if (GetParam() == Backend::kRocks) {
      char tmpl[] = "/tmp/stripefs_ns_test.XXXXXX";
      ASSERT_NE(mkdtemp(tmpl), nullptr);
      dir_ = tmpl;
      auto kv = OpenRocksKvStore(dir_ + "/meta", OpenMode::kCreate);
      ASSERT_TRUE(kv.ok()) << kv.status().message();
      kv_ = std::move(kv).value();
    } else {
      kv_ = NewMemKvStore();
    }
    Transaction txn;
    Namespace::Format(&txn, 1000, 1000);
    ASSERT_TRUE(kv_->commit(txn, true).ok());
    OpenNs();
  }

  void TearDown() override {
    ns_.reset();
    kv_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  void OpenNs() {
    auto ns = Namespace::Open(kv_.get(), kUuid);
    ASSERT_TRUE(ns.ok()) << ns.status().message();
    ns_ = std::move(ns).value();
  }

  // A fresh Namespace (no cache); for RocksDB and etcd also a closed and reopened store.
  void Reopen() {
    ns_.reset();
    if (GetParam() != Backend::kMem) {
      kv_.reset();
      auto kv = GetParam() == Backend::kRocks ? OpenRocksKvStore(dir_ + "/meta", OpenMode::kReadWrite)
                : GetParam() == Backend::kEtcd  ? OpenEtcdKvStore(etcd_, OpenMode::kReadWrite)
                                                : OpenKvStore(etcd_.uri(), OpenMode::kReadWrite);
      ASSERT_TRUE(kv.ok()) << kv.status().message();
      kv_ = std::move(kv).value();
    }
    OpenNs();
  }

  InodeRecord MakeFile(uint64_t parent, const std::string& name) {
    NewInode n;
    n.mode = S_IFREG | 0644;
    n.uid = 1;
    n.gid = 2;
    n.chunk_size = 1 << 20;
    n.strategy = "striped";
    n.replicas = 1;
    auto r = ns_->create(parent, name, n);
    EXPECT_TRUE(r.ok()) << name << ": " << r.status().message();
    return r.ok() ? r.value() : InodeRecord{};
  }
  InodeRecord MakeDir(uint64_t parent, const std::string& name) {
    NewInode n;
    n.mode = S_IFDIR | 0755;
    auto r = ns_->create(parent, name, n);
    EXPECT_TRUE(r.ok()) << name << ": " << r.status().message();
    return r.ok() ? r.value() : InodeRecord{};
  }
  uint32_t Nlink(uint64_t ino) {
    auto r = ns_->get(ino);
    EXPECT_TRUE(r.ok()) << "inode " << ino << ": " << r.status().message();
    return r.ok() ? r->nlink : ~0u;
  }
  uint64_t LookupIno(uint64_t parent, const std::string& name) {
    auto r = ns_->lookup(parent, name);
    EXPECT_TRUE(r.ok()) << name << ": " << r.status().message();
    return r.ok() ? r->ino : 0;
  }
  Code LookupCode(uint64_t parent, const std::string& name) { return ns_->lookup(parent, name).status().code(); }
  std::vector<uint64_t> Orphans() {
    auto o = ns_->orphans();
    EXPECT_TRUE(o.ok());
    return o.ok() ? o.value() : std::vector<uint64_t>{};
  }
  bool IsOrphan(uint64_t ino) {
    auto o = Orphans();
    return std::find(o.begin(), o.end(), ino) != o.end();
  }
  std::set<std::string> Names(uint64_t dir) {
    auto l = ns_->list(dir);
    EXPECT_TRUE(l.ok()) << l.status().message();
    std::set<std::string> out;
    if (l.ok()) {
      for (const auto& e : l.value()) out.insert(e.name);
    }
    return out;
  }

  std::string dir_;
  EtcdTarget etcd_;  // kEtcd: where the store is
  std::unique_ptr<KvStore> kv_;
  std::unique_ptr<Namespace> ns_;
};

TEST_P(NamespaceTest, FormatCreatesRoot) {
  auto root = ns_->get(kRootIno);
  ASSERT_TRUE(root.ok()) << root.status().message();
  EXPECT_TRUE(S_ISDIR(root->mode));
  EXPECT_EQ(root->nlink, 2u);
  EXPECT_EQ(root->uid, 1000u);
  EXPECT_EQ(root->gid, 1000u);
  EXPECT_TRUE(Names(kRootIno).empty());
  EXPECT_TRUE(Orphans().empty());
}

TEST_P(NamespaceTest, CreateAndLookupFileDirSymlink) {
  InodeRecord f = MakeFile(kRootIno, "file");
  EXPECT_TRUE(S_ISREG(f.mode));
  EXPECT_EQ(f.nlink, 1u);
  EXPECT_EQ(f.size, 0u);
  EXPECT_EQ(f.uid, 1u);
  EXPECT_EQ(f.gid, 2u);
  EXPECT_EQ(f.chunk_size, 1u << 20);
  EXPECT_EQ(f.strategy, "striped");
  EXPECT_EQ(f.replicas, 1u);

  InodeRecord d = MakeDir(kRootIno, "dir");
  EXPECT_TRUE(S_ISDIR(d.mode));
  EXPECT_EQ(d.nlink, 2u);
  EXPECT_EQ(d.parent, kRootIno);
  EXPECT_TRUE(d.uri.empty());

  NewInode ln;
  ln.mode = S_IFLNK | 0777;
  ln.symlink = "../some/target";
  auto l = ns_->create(d.ino, "link", ln);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_TRUE(S_ISLNK(l->mode));
  EXPECT_EQ(l->symlink, "../some/target");
  EXPECT_EQ(l->size, ln.symlink.size());

  std::set<uint64_t> inos = {kRootIno, f.ino, d.ino, l->ino};
  EXPECT_EQ(inos.size(), 4u) << "inode numbers must be distinct";

  auto lf = ns_->lookup(kRootIno, "file");
  ASSERT_TRUE(lf.ok());
  EXPECT_EQ(lf->ino, f.ino);
  EXPECT_EQ(lf->uri, f.uri);
  EXPECT_EQ(LookupIno(kRootIno, "dir"), d.ino);
  auto ll = ns_->lookup(d.ino, "link");
  ASSERT_TRUE(ll.ok());
  EXPECT_EQ(ll->symlink, "../some/target");
  EXPECT_EQ(LookupCode(kRootIno, "link"), Code::kNotFound);
  EXPECT_EQ(LookupCode(kRootIno, "nothing"), Code::kNotFound);
  EXPECT_EQ(LookupCode(f.ino, "x"), Code::kNotDirectory);

  EXPECT_EQ(Names(kRootIno), (std::set<std::string>{"file", "dir"}));
  EXPECT_EQ(Names(d.ino), (std::set<std::string>{"link"}));
  auto listing = ns_->list(kRootIno);
  ASSERT_TRUE(listing.ok());
  for (const auto& e : listing.value()) {
    if (e.name == "dir") {
      EXPECT_EQ(e.entry.type, static_cast<uint32_t>(S_IFDIR));
    }
    if (e.name == "file") {
      EXPECT_EQ(e.entry.type, static_cast<uint32_t>(S_IFREG));
    }
  }
}

TEST_P(NamespaceTest, FilesWithDataInRamAreMarkedUntilReclaimed) {
  NewInode n;
  n.mode = S_IFREG | 0644;
  n.chunk_size = 1 << 20;
  n.strategy = std::string(kRamStrategyName);
  auto ram = ns_->create(kRootIno, "scratch", n);
  ASSERT_TRUE(ram.ok()) << ram.status().message();
  MakeFile(kRootIno, "kept");
  std::vector<uint64_t> marked;
  auto Marked = [&] {
    marked.clear();
    EXPECT_TRUE(kv_->scan(VolatilePrefixAll(), [&](std::string_view k, std::string_view) {
      marked.push_back(InoFromKey(k));
      return true;
    }).ok());
    return marked;
  };
  EXPECT_EQ(Marked(), std::vector<uint64_t>{ram->ino}) << "only the file whose data lives in RAM";
  ASSERT_TRUE(ns_->unlink(kRootIno, "scratch").ok());
  EXPECT_EQ(Marked(), std::vector<uint64_t>{ram->ino}) << "an orphan still holds RAM until reclaimed";
  Transaction txn;
  ASSERT_TRUE(ns_->reclaim(ram->ino, &txn).ok());
  EXPECT_TRUE(Marked().empty());
}

TEST_P(NamespaceTest, RegularFilesGetDistinctUris) {
  std::set<std::string> uris;
  for (int i = 0; i < 8; ++i) {
    InodeRecord f = MakeFile(kRootIno, "f" + std::to_string(i));
    EXPECT_TRUE(f.uri.starts_with("stripefs://" + kUuid + "/")) << f.uri;
    EXPECT_GT(f.uri.size(), ("stripefs://" + kUuid + "/").size());
    uris.insert(f.uri);
  }
  EXPECT_EQ(uris.size(), 8u);
}

TEST_P(NamespaceTest, DuplicateCreateIsExists) {
  MakeFile(kRootIno, "a");
  NewInode n;
  n.mode = S_IFREG | 0644;
  EXPECT_EQ(ns_->create(kRootIno, "a", n).status().code(), Code::kExists);
  n.mode = S_IFDIR | 0755;
  EXPECT_EQ(ns_->create(kRootIno, "a", n).status().code(), Code::kExists);
  EXPECT_EQ(Nlink(kRootIno), 2u) << "a failed mkdir must not bump the parent's nlink";
  EXPECT_EQ(Names(kRootIno), (std::set<std::string>{"a"}));
}

TEST_P(NamespaceTest, NameLimits) {
  NewInode n;
  n.mode = S_IFREG | 0644;
  std::string max(kNameMax, 'n');
  std::string too_long(256, 'n');
  EXPECT_TRUE(ns_->create(kRootIno, max, n).ok());
  EXPECT_EQ(ns_->create(kRootIno, too_long, n).status().code(), Code::kNameTooLong);
  EXPECT_EQ(ns_->lookup(kRootIno, too_long).status().code(), Code::kNameTooLong);
  EXPECT_EQ(LookupIno(kRootIno, max) != 0, true);
  n.mode = S_IFDIR | 0755;
  EXPECT_EQ(ns_->create(kRootIno, too_long, n).status().code(), Code::kNameTooLong);
}

TEST_P(NamespaceTest, CreateInMissingOrNonDirectoryParent) {
  InodeRecord f = MakeFile(kRootIno, "f");
  NewInode n;
  n.mode = S_IFREG | 0644;
  EXPECT_EQ(ns_->create(f.ino, "x", n).status().code(), Code::kNotDirectory);
  EXPECT_EQ(ns_->create(987654, "x", n).status().code(), Code::kNotFound);
}

TEST_P(NamespaceTest, UnlinkMakesOrphan) {
  InodeRecord f = MakeFile(kRootIno, "f");
  auto u = ns_->unlink(kRootIno, "f");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->ino, f.ino);
  EXPECT_EQ(u->nlink, 0u);
  EXPECT_EQ(LookupCode(kRootIno, "f"), Code::kNotFound);
  EXPECT_TRUE(IsOrphan(f.ino));
  // The inode still exists (an open handle may use it) until reclaimed.
  auto g = ns_->get(f.ino);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->nlink, 0u);
  EXPECT_EQ(ns_->unlink(kRootIno, "f").status().code(), Code::kNotFound);

  Transaction txn;
  ASSERT_TRUE(ns_->reclaim(f.ino, &txn).ok());
  EXPECT_FALSE(IsOrphan(f.ino));
  EXPECT_EQ(ns_->get(f.ino).status().code(), Code::kNotFound);
}

TEST_P(NamespaceTest, UnlinkOfDirectoryIsIsDirectory) {
  MakeDir(kRootIno, "d");
  EXPECT_EQ(ns_->unlink(kRootIno, "d").status().code(), Code::kIsDirectory);
  EXPECT_NE(LookupIno(kRootIno, "d"), 0u);
}

TEST_P(NamespaceTest, RmdirNonEmptyAndEmpty) {
  InodeRecord d = MakeDir(kRootIno, "d");
  MakeFile(d.ino, "f");
  EXPECT_EQ(ns_->rmdir(kRootIno, "d").code(), Code::kNotEmpty);
  EXPECT_EQ(LookupIno(kRootIno, "d"), d.ino);
  EXPECT_EQ(Nlink(kRootIno), 3u);
  ASSERT_TRUE(ns_->unlink(d.ino, "f").ok());
  ASSERT_TRUE(ns_->rmdir(kRootIno, "d").ok());
  EXPECT_EQ(LookupCode(kRootIno, "d"), Code::kNotFound);
  EXPECT_EQ(ns_->get(d.ino).status().code(), Code::kNotFound);
  EXPECT_EQ(Nlink(kRootIno), 2u);
  MakeFile(kRootIno, "file");
  EXPECT_EQ(ns_->rmdir(kRootIno, "file").code(), Code::kNotDirectory);
  EXPECT_EQ(ns_->rmdir(kRootIno, "missing").code(), Code::kNotFound);
}

TEST_P(NamespaceTest, DirectoryNlinkIsTwoPlusSubdirs) {
  InodeRecord a = MakeDir(kRootIno, "a");
  InodeRecord b = MakeDir(kRootIno, "b");
  EXPECT_EQ(Nlink(kRootIno), 4u);
  MakeFile(kRootIno, "f");  // files do not count
  EXPECT_EQ(Nlink(kRootIno), 4u);
  InodeRecord c = MakeDir(a.ino, "c");
  MakeDir(a.ino, "c2");
  EXPECT_EQ(Nlink(a.ino), 4u);
  EXPECT_EQ(Nlink(kRootIno), 4u);
  EXPECT_EQ(Nlink(c.ino), 2u);
  // Moving a subdirectory moves its ".." link.
  ASSERT_TRUE(ns_->rename(a.ino, "c", b.ino, "c", 0).ok());
  EXPECT_EQ(Nlink(a.ino), 3u);
  EXPECT_EQ(Nlink(b.ino), 3u);
  auto moved = ns_->get(c.ino);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->parent, b.ino);
  // Renaming within a directory changes nothing.
  ASSERT_TRUE(ns_->rename(b.ino, "c", b.ino, "c3", 0).ok());
  EXPECT_EQ(Nlink(b.ino), 3u);
  ASSERT_TRUE(ns_->rmdir(b.ino, "c3").ok());
  EXPECT_EQ(Nlink(b.ino), 2u);
  ASSERT_TRUE(ns_->rmdir(a.ino, "c2").ok());
  EXPECT_EQ(Nlink(a.ino), 2u);
  Reopen();
  EXPECT_EQ(Nlink(kRootIno), 4u);
  EXPECT_EQ(Nlink(a.ino), 2u);
  EXPECT_EQ(Nlink(b.ino), 2u);
}

TEST_P(NamespaceTest, RenameReplacesAndReturnsDisplaced) {
  InodeRecord src = MakeFile(kRootIno, "src");
  InodeRecord dst = MakeFile(kRootIno, "dst");
  auto r = ns_->rename(kRootIno, "src", kRootIno, "dst", 0);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r.value().has_value()) << "the replaced inode must be returned";
  EXPECT_EQ(r.value()->ino, dst.ino);
  EXPECT_EQ(r.value()->nlink, 0u);
  EXPECT_TRUE(IsOrphan(dst.ino));
  EXPECT_FALSE(IsOrphan(src.ino));
  EXPECT_EQ(LookupIno(kRootIno, "dst"), src.ino);
  EXPECT_EQ(LookupCode(kRootIno, "src"), Code::kNotFound);
  EXPECT_EQ(Nlink(src.ino), 1u);
}

TEST_P(NamespaceTest, RenameWithoutTargetReturnsNothing) {
  InodeRecord f = MakeFile(kRootIno, "f");
  InodeRecord d = MakeDir(kRootIno, "d");
  auto r = ns_->rename(kRootIno, "f", d.ino, "g", 0);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r.value().has_value());
  EXPECT_EQ(LookupIno(d.ino, "g"), f.ino);
  EXPECT_EQ(LookupCode(kRootIno, "f"), Code::kNotFound);
  EXPECT_EQ(ns_->rename(kRootIno, "missing", kRootIno, "x", 0).status().code(), Code::kNotFound);
}

TEST_P(NamespaceTest, RenameReplacingAHardLinkedFileKeepsItAlive) {
  InodeRecord a = MakeFile(kRootIno, "a");
  InodeRecord b = MakeFile(kRootIno, "b");
  ASSERT_TRUE(ns_->link(b.ino, kRootIno, "b2").ok());
  auto r = ns_->rename(kRootIno, "a", kRootIno, "b", 0);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r.value().has_value());
  EXPECT_EQ(r.value()->ino, b.ino);
  EXPECT_EQ(r.value()->nlink, 1u);
  EXPECT_FALSE(IsOrphan(b.ino));
  EXPECT_EQ(LookupIno(kRootIno, "b2"), b.ino);
  EXPECT_EQ(LookupIno(kRootIno, "b"), a.ino);
}

TEST_P(NamespaceTest, RenameNoReplace) {
  InodeRecord a = MakeFile(kRootIno, "a");
  InodeRecord b = MakeFile(kRootIno, "b");
  EXPECT_EQ(ns_->rename(kRootIno, "a", kRootIno, "b", RENAME_NOREPLACE).status().code(), Code::kExists);
  EXPECT_EQ(LookupIno(kRootIno, "a"), a.ino);
  EXPECT_EQ(LookupIno(kRootIno, "b"), b.ino);
  EXPECT_FALSE(IsOrphan(b.ino));
  auto ok = ns_->rename(kRootIno, "a", kRootIno, "c", RENAME_NOREPLACE);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(LookupIno(kRootIno, "c"), a.ino);
}

// RENAME_WHITEOUT (overlayfs's upper directory): the old name holds a
// whiteout, a character device 0/0 with the caller's owner, in the same
// commit; a directory moved this way keeps its parent's link count right.
TEST_P(NamespaceTest, AnUnnamedFileIsAnOrphanUntilLinked) {
  InodeRecord d = MakeDir(kRootIno, "d");
  const InodeRecord dir_before = ns_->get(d.ino).value();
  NewInode n;
  n.mode = S_IFREG | 0600;
  auto r = ns_->create_unnamed(d.ino, n);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->nlink, 0u);
  EXPECT_EQ(Nlink(r->ino), 0u);
  EXPECT_TRUE(IsOrphan(r->ino)) << "a crash before it is linked leaves it for the next mount to reclaim";
  EXPECT_TRUE(Names(d.ino).empty());
  EXPECT_EQ(ns_->get(d.ino)->mtime_ns, dir_before.mtime_ns) << "the directory did not change";
  ASSERT_TRUE(ns_->link(r->ino, d.ino, "named").ok());
  EXPECT_EQ(Nlink(r->ino), 1u);
  EXPECT_FALSE(IsOrphan(r->ino));
  EXPECT_EQ(LookupIno(d.ino, "named"), r->ino);

  n.mode = S_IFDIR | 0700;
  EXPECT_EQ(ns_->create_unnamed(d.ino, n).status().code(), Code::kInvalidArgument);
  n.mode = S_IFREG | 0600;
  EXPECT_EQ(ns_->create_unnamed(r->ino, n).status().code(), Code::kNotDirectory);
  ASSERT_TRUE(ns_->unlink(d.ino, "named").ok());
  ASSERT_TRUE(ns_->rmdir(kRootIno, "d").ok());
  EXPECT_EQ(ns_->create_unnamed(d.ino, n).status().code(), Code::kNotFound);
}

TEST_P(NamespaceTest, RenameWhiteoutLeavesADevice00AtTheOldName) {
  InodeRecord f = MakeFile(kRootIno, "f");
  InodeRecord d = MakeDir(kRootIno, "d");
  InodeRecord sub = MakeDir(kRootIno, "sub");
  const uint32_t root_links = Nlink(kRootIno);
  auto r = ns_->rename(kRootIno, "f", d.ino, "g", RENAME_WHITEOUT, 1000, 1001);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(LookupIno(d.ino, "g"), f.ino);
  auto w = ns_->lookup(kRootIno, "f");
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_NE(w->ino, f.ino);
  EXPECT_EQ(w->mode, uint32_t{S_IFCHR});
  EXPECT_EQ(w->rdev, 0u);
  EXPECT_EQ(w->uid, 1000u);
  EXPECT_EQ(w->gid, 1001u);
  EXPECT_EQ(w->nlink, 1u);
  ASSERT_TRUE(ns_->rename(kRootIno, "sub", d.ino, "sub", RENAME_WHITEOUT).ok());
  EXPECT_EQ(Nlink(kRootIno), root_links - 1) << "the moved directory's link went with it";
  EXPECT_EQ(Nlink(d.ino), 3u);
  EXPECT_EQ(LookupIno(d.ino, "sub"), sub.ino);
  EXPECT_EQ(ns_->lookup(kRootIno, "sub")->mode, uint32_t{S_IFCHR});
  EXPECT_EQ(ns_->rename(kRootIno, "f", d.ino, "g", RENAME_WHITEOUT | RENAME_EXCHANGE).status().code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(Orphans().empty());
}

TEST_P(NamespaceTest, RenameExchangeSwaps) {
  InodeRecord a = MakeFile(kRootIno, "a");
  InodeRecord b = MakeFile(kRootIno, "b");
  auto r = ns_->rename(kRootIno, "a", kRootIno, "b", RENAME_EXCHANGE);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r.value().has_value());
  EXPECT_EQ(LookupIno(kRootIno, "a"), b.ino);
  EXPECT_EQ(LookupIno(kRootIno, "b"), a.ino);
  EXPECT_EQ(Nlink(a.ino), 1u);
  EXPECT_EQ(Nlink(b.ino), 1u);
  EXPECT_TRUE(Orphans().empty());
  EXPECT_EQ(ns_->rename(kRootIno, "a", kRootIno, "zz", RENAME_EXCHANGE).status().code(), Code::kNotFound);
}

TEST_P(NamespaceTest, RenameExchangeDirectoryWithFileAcrossDirectories) {
  InodeRecord d1 = MakeDir(kRootIno, "d1");
  InodeRecord sub = MakeDir(kRootIno, "sub");
  InodeRecord f = MakeFile(sub.ino, "f");
  EXPECT_EQ(Nlink(kRootIno), 4u);
  auto r = ns_->rename(kRootIno, "d1", sub.ino, "f", RENAME_EXCHANGE);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(LookupIno(kRootIno, "d1"), f.ino);
  EXPECT_EQ(LookupIno(sub.ino, "f"), d1.ino);
  auto moved = ns_->get(d1.ino);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->parent, sub.ino);
  EXPECT_EQ(Nlink(kRootIno), 3u);  // only "sub" is a subdirectory of root now
  EXPECT_EQ(Nlink(sub.ino), 3u);   // d1 lives in sub
  Reopen();
  EXPECT_EQ(Nlink(kRootIno), 3u);
  EXPECT_EQ(Nlink(sub.ino), 3u);
  EXPECT_EQ(LookupIno(sub.ino, "f"), d1.ino);
  // And back, this time with the directory as the target of the exchange.
  ASSERT_TRUE(ns_->rename(kRootIno, "d1", sub.ino, "f", RENAME_EXCHANGE).ok());
  EXPECT_EQ(LookupIno(kRootIno, "d1"), d1.ino);
  EXPECT_EQ(LookupIno(sub.ino, "f"), f.ino);
  auto back = ns_->get(d1.ino);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->parent, kRootIno);
  EXPECT_EQ(Nlink(kRootIno), 4u);
  EXPECT_EQ(Nlink(sub.ino), 2u);
}

TEST_P(NamespaceTest, RenameExchangeTwoDirectoriesAcrossParents) {
  InodeRecord p1 = MakeDir(kRootIno, "p1");
  InodeRecord p2 = MakeDir(kRootIno, "p2");
  InodeRecord a = MakeDir(p1.ino, "a");
  InodeRecord b = MakeDir(p2.ino, "b");
  MakeDir(b.ino, "inside_b");
  ASSERT_TRUE(ns_->rename(p1.ino, "a", p2.ino, "b", RENAME_EXCHANGE).ok());
  EXPECT_EQ(LookupIno(p1.ino, "a"), b.ino);
  EXPECT_EQ(LookupIno(p2.ino, "b"), a.ino);
  EXPECT_EQ(ns_->get(a.ino)->parent, p2.ino);
  EXPECT_EQ(ns_->get(b.ino)->parent, p1.ino);
  EXPECT_EQ(Nlink(p1.ino), 3u);
  EXPECT_EQ(Nlink(p2.ino), 3u);
  EXPECT_EQ(Nlink(b.ino), 3u);
}

TEST_P(NamespaceTest, RenameDirectoryBelowItselfIsInvalid) {
  InodeRecord a = MakeDir(kRootIno, "a");
  InodeRecord b = MakeDir(a.ino, "b");
  InodeRecord c = MakeDir(b.ino, "c");
  EXPECT_EQ(ns_->rename(kRootIno, "a", a.ino, "x", 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ns_->rename(kRootIno, "a", b.ino, "x", 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ns_->rename(kRootIno, "a", c.ino, "x", 0).status().code(), Code::kInvalidArgument);
  // Exchanging a with its own descendant would move a below itself too.
  EXPECT_EQ(ns_->rename(kRootIno, "a", b.ino, "c", RENAME_EXCHANGE).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(LookupIno(kRootIno, "a"), a.ino);
  EXPECT_EQ(LookupIno(a.ino, "b"), b.ino);
  EXPECT_EQ(LookupIno(b.ino, "c"), c.ino);
  EXPECT_EQ(Nlink(kRootIno), 3u);
  // Moving a descendant up is fine.
  ASSERT_TRUE(ns_->rename(b.ino, "c", kRootIno, "c", 0).ok());
  EXPECT_EQ(Nlink(kRootIno), 4u);
  EXPECT_EQ(Nlink(b.ino), 2u);
}

TEST_P(NamespaceTest, RenameDirectoryOverDirectory) {
  InodeRecord a = MakeDir(kRootIno, "a");
  InodeRecord b = MakeDir(kRootIno, "b");
  MakeFile(b.ino, "inside");
  EXPECT_EQ(ns_->rename(kRootIno, "a", kRootIno, "b", 0).status().code(), Code::kNotEmpty);
  ASSERT_TRUE(ns_->unlink(b.ino, "inside").ok());
  auto r = ns_->rename(kRootIno, "a", kRootIno, "b", 0);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r.value().has_value());
  EXPECT_EQ(r.value()->ino, b.ino);
  EXPECT_EQ(LookupIno(kRootIno, "b"), a.ino);
  EXPECT_EQ(ns_->get(b.ino).status().code(), Code::kNotFound);
  EXPECT_EQ(Nlink(kRootIno), 3u);
  MakeFile(kRootIno, "f");
  EXPECT_EQ(ns_->rename(kRootIno, "b", kRootIno, "f", 0).status().code(), Code::kNotDirectory);
  EXPECT_EQ(ns_->rename(kRootIno, "f", kRootIno, "b", 0).status().code(), Code::kIsDirectory);
}

TEST_P(NamespaceTest, LinkBumpsNlink) {
  InodeRecord f = MakeFile(kRootIno, "f");
  InodeRecord d = MakeDir(kRootIno, "d");
  auto l = ns_->link(f.ino, d.ino, "g");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->nlink, 2u);
  EXPECT_EQ(Nlink(f.ino), 2u);
  EXPECT_EQ(LookupIno(d.ino, "g"), f.ino);
  EXPECT_EQ(ns_->link(f.ino, d.ino, "g").status().code(), Code::kExists);
  EXPECT_EQ(ns_->link(d.ino, kRootIno, "dlink").status().code(), Code::kPermission);
  auto u = ns_->unlink(kRootIno, "f");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->nlink, 1u);
  EXPECT_FALSE(IsOrphan(f.ino));
  EXPECT_EQ(LookupIno(d.ino, "g"), f.ino);
  u = ns_->unlink(d.ino, "g");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->nlink, 0u);
  EXPECT_TRUE(IsOrphan(f.ino));
}

TEST_P(NamespaceTest, Xattrs) {
  InodeRecord f = MakeFile(kRootIno, "f");
  EXPECT_EQ(ns_->getxattr(f.ino, "user.a").status().code(), Code::kNoData);
  ASSERT_TRUE(ns_->setxattr(f.ino, "user.a", "one", 0).ok());
  auto g = ns_->getxattr(f.ino, "user.a");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g.value(), "one");
  // Binary values round-trip, including NULs; empty values exist.
  std::string bin("\0\x01\xff\0z", 5);
  ASSERT_TRUE(ns_->setxattr(f.ino, "user.bin", bin, 0).ok());
  EXPECT_EQ(ns_->getxattr(f.ino, "user.bin").value(), bin);
  ASSERT_TRUE(ns_->setxattr(f.ino, "user.empty", "", 0).ok());
  auto e = ns_->getxattr(f.ino, "user.empty");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.value(), "");

  // XATTR_CREATE: only if absent.
  EXPECT_EQ(ns_->setxattr(f.ino, "user.a", "two", XATTR_CREATE).code(), Code::kExists);
  EXPECT_EQ(ns_->getxattr(f.ino, "user.a").value(), "one");
  ASSERT_TRUE(ns_->setxattr(f.ino, "user.c", "three", XATTR_CREATE).ok());
  // XATTR_REPLACE: only if present.
  EXPECT_EQ(ns_->setxattr(f.ino, "user.missing", "x", XATTR_REPLACE).code(), Code::kNoData);
  EXPECT_EQ(ns_->getxattr(f.ino, "user.missing").status().code(), Code::kNoData);
  ASSERT_TRUE(ns_->setxattr(f.ino, "user.a", "uno", XATTR_REPLACE).ok());
  EXPECT_EQ(ns_->getxattr(f.ino, "user.a").value(), "uno");
  // No flag: create or replace.
  ASSERT_TRUE(ns_->setxattr(f.ino, "user.c", "drei", 0).ok());
  EXPECT_EQ(ns_->getxattr(f.ino, "user.c").value(), "drei");

  auto names = ns_->listxattr(f.ino);
  ASSERT_TRUE(names.ok());
  std::vector<std::string> sorted = names.value();
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<std::string>{"user.a", "user.bin", "user.c", "user.empty"}));

  ASSERT_TRUE(ns_->removexattr(f.ino, "user.bin").ok());
  EXPECT_EQ(ns_->getxattr(f.ino, "user.bin").status().code(), Code::kNoData);
  EXPECT_EQ(ns_->removexattr(f.ino, "user.bin").code(), Code::kNoData);
  names = ns_->listxattr(f.ino);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names->size(), 3u);

  // Xattrs are per inode.
  InodeRecord other = MakeFile(kRootIno, "other");
  auto none = ns_->listxattr(other.ino);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(ns_->getxattr(other.ino, "user.a").status().code(), Code::kNoData);

  // Limits.
  EXPECT_EQ(ns_->setxattr(f.ino, std::string(256, 'x'), "v", 0).code(), Code::kRange);
  EXPECT_EQ(ns_->setxattr(f.ino, "user.big", std::string(kXattrValueMax + 1, 'v'), 0).code(), Code::kTooBig);
  EXPECT_TRUE(ns_->setxattr(f.ino, "user.big", std::string(kXattrValueMax, 'v'), 0).ok());
}

TEST_P(NamespaceTest, XattrsGoWithTheirInode) {
  InodeRecord d = MakeDir(kRootIno, "d");
  ASSERT_TRUE(ns_->setxattr(d.ino, "user.k", "v", 0).ok());
  ASSERT_TRUE(ns_->rmdir(kRootIno, "d").ok());
  auto names = ns_->listxattr(d.ino);
  ASSERT_TRUE(names.ok());
  EXPECT_TRUE(names->empty()) << "rmdir left xattrs behind";

  InodeRecord f = MakeFile(kRootIno, "f");
  ASSERT_TRUE(ns_->setxattr(f.ino, "user.k", "v", 0).ok());
  ASSERT_TRUE(ns_->unlink(kRootIno, "f").ok());
  Transaction txn;
  ASSERT_TRUE(ns_->reclaim(f.ino, &txn).ok());
  names = ns_->listxattr(f.ino);
  ASSERT_TRUE(names.ok());
  EXPECT_TRUE(names->empty()) << "reclaim left xattrs behind";
}

TEST_P(NamespaceTest, SetattrChangesOnlyGivenFields) {
  InodeRecord f = MakeFile(kRootIno, "f");
  AttrChange c;
  c.mode = S_IFDIR | 04700;  // the type bits must not change
  c.mtime_ns = 123;
  auto r = ns_->setattr(f.ino, c);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(S_ISREG(r->mode));
  EXPECT_EQ(r->mode & 07777, 04700u);
  EXPECT_EQ(r->mtime_ns, 123);
  EXPECT_EQ(r->uid, f.uid);
  EXPECT_EQ(r->atime_ns, f.atime_ns);
  Reopen();
  auto g = ns_->get(f.ino);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->mode, r->mode);
  EXPECT_EQ(g->mtime_ns, 123);
}

TEST_P(NamespaceTest, StateSurvivesReopen) {
  InodeRecord d = MakeDir(kRootIno, "dir");
  InodeRecord f = MakeFile(d.ino, "file");
  InodeRecord gone = MakeFile(kRootIno, "gone");
  NewInode ln;
  ln.mode = S_IFLNK | 0777;
  ln.symlink = "dir/file";
  auto l = ns_->create(kRootIno, "sym", ln);
  ASSERT_TRUE(l.ok());
  ASSERT_TRUE(ns_->link(f.ino, kRootIno, "hard").ok());
  ASSERT_TRUE(ns_->setxattr(f.ino, "user.x", "xv", 0).ok());
  ASSERT_TRUE(ns_->unlink(kRootIno, "gone").ok());

  Reopen();

  auto lf = ns_->lookup(d.ino, "file");
  ASSERT_TRUE(lf.ok()) << lf.status().message();
  EXPECT_EQ(lf->ino, f.ino);
  EXPECT_EQ(lf->uri, f.uri);
  EXPECT_EQ(lf->chunk_size, f.chunk_size);
  EXPECT_EQ(lf->strategy, f.strategy);
  EXPECT_EQ(lf->nlink, 2u);
  EXPECT_EQ(LookupIno(kRootIno, "dir"), d.ino);
  EXPECT_EQ(LookupIno(kRootIno, "hard"), f.ino);
  auto ls = ns_->lookup(kRootIno, "sym");
  ASSERT_TRUE(ls.ok());
  EXPECT_EQ(ls->symlink, "dir/file");
  EXPECT_EQ(LookupCode(kRootIno, "gone"), Code::kNotFound);
  EXPECT_TRUE(IsOrphan(gone.ino));
  auto x = ns_->getxattr(f.ino, "user.x");
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x.value(), "xv");
  EXPECT_EQ(Nlink(kRootIno), 3u);
  EXPECT_EQ(Names(kRootIno), (std::set<std::string>{"dir", "hard", "sym"}));

  // The inode counter survived: new inodes do not reuse numbers.
  InodeRecord n = MakeFile(kRootIno, "new");
  EXPECT_GT(n.ino, std::max({d.ino, f.ino, gone.ino, l->ino}));
  EXPECT_NE(n.uri, f.uri);
}

// A flush batch lets readers and creates go on while it is written; the
// changes it races (chown of its own files) must neither be lost nor lose
// it. Both only count up, so a lost update shows as a value going back.
TEST_P(NamespaceTest, ConcurrentBatchesChownsCreatesAndReadersLoseNoUpdate) {
  constexpr int kFiles = 16, kRounds = 300;
  std::vector<uint64_t> files;
  for (int i = 0; i < kFiles; ++i) files.push_back(MakeFile(kRootIno, "f" + std::to_string(i)).ino);
  const uint64_t dir = MakeDir(kRootIno, "new").ino;
  std::atomic<int> failures{0};
  std::thread batches([&] {
    for (int round = 1; round <= kRounds; ++round) {
      std::vector<Namespace::InodeUpdate> updates(kFiles);
      for (int i = 0; i < kFiles; ++i) {
        updates[i].write.ino = files[i];
        updates[i].write.change.size = static_cast<uint64_t>(round);
      }
      ns_->commit_with_inodes(updates);
      for (const auto& u : updates) failures += !u.result.ok();
    }
  });
  std::thread chowns([&] {
    for (int round = 1; round <= kRounds; ++round) {
      AttrChange c;
      c.uid = static_cast<uint32_t>(round);
      for (uint64_t ino : files) failures += !ns_->setattr(ino, c).ok();
    }
  });
  std::thread creates([&] {
    for (int i = 0; i < kRounds; ++i) failures += MakeFile(dir, "c" + std::to_string(i)).ino == 0;
  });
  std::atomic<int> went_back{0};
  std::thread readers([&] {
    std::vector<std::pair<uint64_t, uint32_t>> seen(kFiles, {0, 0});  // size, uid
    for (int round = 0; round < kRounds * 4; ++round) {
      for (int i = 0; i < kFiles; ++i) {
        auto r = ns_->get(files[i]);
        if (!r.ok()) {
          ++failures;
          continue;
        }
        if (r->size < seen[i].first || r->uid < seen[i].second) ++went_back;
        seen[i] = {r->size, r->uid};
      }
    }
  });
  for (std::thread* t : {&batches, &chowns, &creates, &readers}) t->join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(went_back.load(), 0) << "a reader saw a size or owner go back: an update was lost";
  for (int pass = 0; pass < 2; ++pass) {  // the cache, then what was stored
    for (uint64_t ino : files) {
      auto r = ns_->get(ino);
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->size, uint64_t{kRounds}) << "inode " << ino << (pass ? " after reopening" : "");
      EXPECT_EQ(r->uid, uint32_t{kRounds}) << "inode " << ino << (pass ? " after reopening" : "");
    }
    EXPECT_EQ(Names(dir).size(), size_t{kRounds});
    Reopen();
  }
}

// reserve() takes a number and checks the name but stores nothing; the
// entry is stored by a flush batch (with the file's first data) or by add().
TEST_P(NamespaceTest, ReservedEntriesAreStoredByABatchOrByAdd) {
  const uint64_t dir = MakeDir(kRootIno, "d").ino;
  MakeFile(dir, "taken");
  NewInode file;
  file.mode = S_IFREG | 0644;
  file.chunk_size = 1 << 20;
  file.strategy = "striped";
  EXPECT_EQ(ns_->reserve(dir, "taken", file).status().code(), Code::kExists);
  EXPECT_EQ(ns_->reserve(dir, std::string(300, 'x'), file).status().code(), Code::kNameTooLong);

  auto a = ns_->reserve(dir, "a", file);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(LookupCode(dir, "a"), Code::kNotFound) << "reserved, not stored";
  const int64_t dir_mtime = ns_->get(dir)->mtime_ns;
  std::vector<Namespace::InodeUpdate> updates(1);
  updates[0].write.ino = a->record.ino;
  updates[0].entry = &a.value();
  updates[0].write.change.size = 5;
  ns_->commit_with_inodes(updates);
  ASSERT_TRUE(updates[0].result.ok()) << updates[0].result.status().message();
  EXPECT_EQ(LookupIno(dir, "a"), a->record.ino);
  EXPECT_GE(ns_->get(dir)->mtime_ns, dir_mtime);

  NewInode subdir;
  subdir.mode = S_IFDIR | 0755;
  auto sub = ns_->reserve(dir, "sub", subdir);
  auto late = ns_->reserve(dir, "late", file);
  ASSERT_TRUE(sub.ok() && late.ok());
  ASSERT_TRUE(ns_->add(sub.value()).ok());
  EXPECT_EQ(Nlink(dir), 3u) << "a directory added by add() counts as a subdirectory";
  MakeFile(dir, "late");  // the name is taken before the reserved entry is stored
  EXPECT_EQ(ns_->add(late.value()).status().code(), Code::kExists);

  // Numbers reserved and never stored stay unused, across a reopen too.
  uint64_t highest = 0;
  for (int i = 0; i < 1500; ++i) {
    auto r = ns_->reserve(dir, "never" + std::to_string(i), file);
    ASSERT_TRUE(r.ok());
    highest = r->record.ino;
  }
  Reopen();
  EXPECT_EQ(Names(dir), (std::set<std::string>{"a", "late", "sub", "taken"}));
  EXPECT_EQ(ns_->get(a->record.ino)->size, 5u);
  EXPECT_EQ(Nlink(dir), 3u);
  EXPECT_GT(MakeFile(dir, "next").ino, highest);
}

// A batch that stores new entries writes their directory's record; a
// mkdir in that directory meanwhile must not lose its link count to it.
TEST_P(NamespaceTest, ConcurrentBatchesOfNewEntriesAndMkdirsLoseNoLink) {
  const uint64_t dir = MakeDir(kRootIno, "d").ino;
  constexpr int kBatches = 100, kPerBatch = 8, kDirs = 200;
  NewInode file;
  file.mode = S_IFREG | 0644;
  std::atomic<int> failures{0};
  std::thread batches([&] {
    for (int b = 0; b < kBatches; ++b) {
      std::vector<NewEntry> entries;
      for (int i = 0; i < kPerBatch; ++i) {
        auto e = ns_->reserve(dir, "f" + std::to_string(b * kPerBatch + i), file);
        if (!e.ok()) {
          ++failures;
          continue;
        }
        entries.push_back(std::move(e).value());
      }
      std::vector<Namespace::InodeUpdate> updates(entries.size());
      for (size_t i = 0; i < entries.size(); ++i) {
        updates[i].write.ino = entries[i].record.ino;
        updates[i].entry = &entries[i];
      }
      ns_->commit_with_inodes(updates);
      for (const auto& u : updates) failures += !u.result.ok();
    }
  });
  std::thread mkdirs([&] {
    for (int i = 0; i < kDirs; ++i) failures += MakeDir(dir, "s" + std::to_string(i)).ino == 0;
  });
  batches.join();
  mkdirs.join();
  EXPECT_EQ(failures.load(), 0);
  for (int pass = 0; pass < 2; ++pass) {  // the cache, then what was stored
    EXPECT_EQ(Nlink(dir), uint32_t{2 + kDirs}) << (pass ? "after reopening" : "");
    EXPECT_EQ(Names(dir).size(), size_t{kBatches * kPerBatch + kDirs});
    Reopen();
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, NamespaceTest, testing::Values(Backend::kMem, Backend::kRocks, Backend::kEtcd, Backend::kEtcdWriteBehind),
                         [](const testing::TestParamInfo<Backend>& info) {
                           return BackendName(info.param);
                         });

}  // namespace
}  // namespace stripefs::meta
