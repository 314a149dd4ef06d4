// SPDX-License-Identifier: Apache-2.0
// Placement in pages (fs/control.h): how Pool::placement cuts a file's
// chunks into pages, and how the CLI's side joins them into the document an
// unmounted pool gives, over a real pool (drive files, RocksDB, io_uring).
#include "fs/control.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "engine/pool/pool.h"
#include "meta/namespace.h"
#include "tests/unit/test_pool.h"

namespace stripefs::fs {
namespace {

constexpr uint32_t kMiB = 1 << 20;
constexpr size_t kPageBytes = 1500;  // a few chunks a page
constexpr uint64_t kChunks = 100;    // indexes 0..99 but for the hole below
constexpr uint64_t kHoleFirst = 50, kHoleEnd = 60;

class PlacementPagesTest : public testing::Test {
 protected:
  // A file with 4 KiB at the start of each chunk but those of the hole.
  void SetUp() override {
    dir_ = testing_support::FreshTestDir("placement-pages");
    FormatOptions o = testing_support::TestPoolOptions(dir_, 2, 256ull * kMiB);
    o.chunk_size = kMiB;
    ASSERT_TRUE(FormatPool(o, 0, 0).ok());
    auto pool = Pool::Open(o.meta_dir, Pool::Mode::kMount);
    ASSERT_TRUE(pool.ok()) << pool.status().message();
    pool_ = std::move(pool.value());
    meta::NewInode n;
    n.mode = S_IFREG | 0644;
    n.chunk_size = kMiB;
    n.strategy = "striped";
    auto r = pool_->ns().create(meta::kRootIno, "big", n);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ino_ = r->ino;
    auto obj = pool_->store().object(r.value(), /*just_created=*/true);
    ASSERT_TRUE(obj.ok()) << obj.status().message();
    const std::string data(4096, 'x');
    for (uint64_t i = 0; i < kChunks; ++i) {
      if (i >= kHoleFirst && i < kHoleEnd) continue;
      ASSERT_TRUE(pool_->store().write(*obj.value(), i * kMiB, data.data(), data.size()).ok());
    }
    ASSERT_TRUE(pool_->store().trim(*obj.value()).ok());
  }
  void TearDown() override {
    pool_.reset();
    std::filesystem::remove_all(dir_);
  }

  nlohmann::json Page(uint64_t first, size_t bytes = kPageBytes) {
    auto r = pool_->ns().get(ino_);
    EXPECT_TRUE(r.ok());
    auto j = pool_->placement(r.value(), "", first, bytes);
    EXPECT_TRUE(j.ok()) << j.status().message();
    return j.ok() ? j.value() : nlohmann::json();
  }
  nlohmann::json Whole() { return Page(0, 0); }
  // What the daemon answers for a getxattr of name.
  Result<std::string> Get(const std::string& name) {
    auto first = PlacementPageFirst(name);
    if (!first) return Status(Code::kNoData, name);
    return Page(*first).dump();
  }
  // Moves the file's ctime, as a write does.
  void Touch() {
    meta::AttrChange c;
    c.mode = 0644;
    ASSERT_TRUE(pool_->ns().setattr(ino_, c).ok());
  }

  std::filesystem::path dir_;
  std::unique_ptr<Pool> pool_;
  uint64_t ino_ = 0;
};

TEST_F(PlacementPagesTest, TheWholeDocumentHasNoPageMembers) {
  auto whole = Whole();
  EXPECT_EQ(whole["chunks"].size(), kChunks - (kHoleEnd - kHoleFirst));
  EXPECT_FALSE(whole.contains("next"));
  EXPECT_FALSE(whole.contains("ctime_ns"));
}

TEST_F(PlacementPagesTest, PagesFitTheirBytesAndJoinToTheWholeDocument) {
  const auto whole = Whole();
  nlohmann::json joined = nlohmann::json::array();
  uint64_t first = 0;
  int pages = 0;
  for (;;) {
    auto page = Page(first);
    ++pages;
    ASSERT_FALSE(page["chunks"].empty()) << "page from " << first;
    EXPECT_GE(page["chunks"][0]["index"].get<uint64_t>(), first);
    size_t bytes = 0;
    for (const auto& c : page["chunks"]) bytes += c.dump().size() + 1;
    EXPECT_LE(bytes, kPageBytes) << "page from " << first;
    EXPECT_EQ(page["uri"], whole["uri"]);
    EXPECT_EQ(page["size"], whole["size"]);
    for (const auto& c : page["chunks"]) joined.push_back(c);
    if (page["next"].is_null()) break;
    const uint64_t next = page["next"].get<uint64_t>();
    // The next page starts right after this one's last chunk: none skipped.
    EXPECT_GT(next, page["chunks"].back()["index"].get<uint64_t>());
    first = next;
  }
  EXPECT_GT(pages, 5);
  EXPECT_EQ(joined, whole["chunks"]);
  EXPECT_EQ(joined.back()["index"].get<uint64_t>(), kChunks - 1);
}

TEST_F(PlacementPagesTest, TheLastChunkIsALastPage) {
  auto page = Page(kChunks - 1);
  ASSERT_EQ(page["chunks"].size(), 1u);
  EXPECT_EQ(page["chunks"][0]["index"].get<uint64_t>(), kChunks - 1);
  EXPECT_TRUE(page["next"].is_null());
}

TEST_F(PlacementPagesTest, APagePastTheEndIsEmptyAndLast) {
  auto page = Page(kChunks);
  EXPECT_TRUE(page["chunks"].empty());
  EXPECT_TRUE(page["next"].is_null());
  EXPECT_TRUE(Page(UINT64_MAX)["chunks"].empty());
}

TEST_F(PlacementPagesTest, APageFromAHoleStartsAtTheNextChunk) {
  auto page = Page(kHoleFirst + 1);
  ASSERT_FALSE(page["chunks"].empty());
  EXPECT_EQ(page["chunks"][0]["index"].get<uint64_t>(), kHoleEnd);
}

TEST_F(PlacementPagesTest, AChunkBiggerThanAPageStillComesAlone) {
  auto page = Page(0, 1);
  ASSERT_EQ(page["chunks"].size(), 1u);
  EXPECT_EQ(page["next"].get<uint64_t>(), 1u);
}

TEST_F(PlacementPagesTest, TheCliJoinsThePagesAsAnUnmountedPoolAnswers) {
  int asked = 0;
  auto j = ReadPlacementPages([&](const std::string& name) {
    ++asked;
    return Get(name);
  });
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ(j.value(), Whole());
  EXPECT_GT(asked, 5);
}

TEST_F(PlacementPagesTest, AChangeBetweenPagesReadsTheFileAgain) {
  int asked = 0;
  auto j = ReadPlacementPages([&](const std::string& name) {
    if (++asked == 2) Touch();  // a write lands after the first page
    return Get(name);
  });
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ(j.value(), Whole());
}

TEST_F(PlacementPagesTest, AFileThatKeepsChangingIsBusy) {
  auto j = ReadPlacementPages([&](const std::string& name) {
    if (name != PlacementPageXattr(0)) Touch();
    return Get(name);
  });
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), Code::kBusy);
}

TEST(PlacementPageNameTest, OnlyAPrefixAndADecimalIndex) {
  EXPECT_EQ(PlacementPageXattr(12), "user.stripefs.placement.from.12");
  EXPECT_EQ(PlacementPageFirst(PlacementPageXattr(0)), 0u);
  EXPECT_EQ(PlacementPageFirst(PlacementPageXattr(UINT64_MAX)), UINT64_MAX);
  EXPECT_FALSE(PlacementPageFirst("user.stripefs.placement"));
  EXPECT_FALSE(PlacementPageFirst("user.stripefs.placement.from."));
  EXPECT_FALSE(PlacementPageFirst("user.stripefs.placement.from.1x"));
  EXPECT_FALSE(PlacementPageFirst("user.stripefs.placement.from.-1"));
  EXPECT_FALSE(PlacementPageFirst("user.stripefs.placement.from.99999999999999999999"));
  EXPECT_TRUE(IsControlXattr(PlacementPageXattr(7)));
  EXPECT_FALSE(IsControlXattr("user.stripefs.placement.from.x"));
}

}  // namespace
}  // namespace stripefs::fs
