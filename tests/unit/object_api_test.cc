// The public object API over a real pool (drive files, RocksDB, io_uring).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <thread>

#include "engine/pool.h"
#include "stripefs/objects.h"

namespace stripefs {
namespace {

using api::Error;
using api::ObjectPool;

class ObjectApiTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("stripefs-api-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    FormatOptions o;
    o.meta_dir = (dir_ / "meta").string();
    for (int i = 0; i < 3; ++i) o.drives.push_back({(dir_ / ("d" + std::to_string(i))).string(), 64ull << 20});
    o.ram_size = 16ull << 20;
    o.chunk_size = 1 << 20;
    ASSERT_TRUE(FormatPool(o, 0, 0).ok());
    Reopen();
  }
  void TearDown() override {
    pool_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen(api::Options options = {}) {
    pool_.reset();
    Error err;
    pool_ = ObjectPool::Open((dir_ / "meta").string(), options, &err);
    ASSERT_TRUE(pool_) << err.message;
  }
  std::string Get(std::string_view name) {
    std::string out;
    Error e = pool_->get(name, &out);
    EXPECT_FALSE(e) << name << ": " << e.message;
    return out;
  }

  std::filesystem::path dir_;
  std::unique_ptr<ObjectPool> pool_;
};

TEST_F(ObjectApiTest, PutGetReadAppendListRemove) {
  std::string big(3 * (1 << 20) + 777, '\0');
  std::mt19937 rng(5);
  for (auto& c : big) c = static_cast<char>(rng());
  std::string uri;
  ASSERT_FALSE(pool_->put("/models/v1/weights.bin", big, &uri));
  EXPECT_TRUE(uri.starts_with("stripefs://")) << uri;
  EXPECT_EQ(Get("models/v1/weights.bin"), big);
  EXPECT_EQ(Get(uri), big) << "by URI";
  std::string part;
  ASSERT_FALSE(pool_->read("models//v1/weights.bin", (1 << 20) - 5, 10, &part));
  EXPECT_EQ(part, big.substr((1 << 20) - 5, 10));
  ASSERT_FALSE(pool_->read("models/v1/weights.bin", big.size() - 3, 100, &part));
  EXPECT_EQ(part, big.substr(big.size() - 3)) << "a read past the end is short";

  ASSERT_FALSE(pool_->put("models/v1/weights.bin", "short"));
  EXPECT_EQ(Get("models/v1/weights.bin"), "short") << "put replaces the whole object";
  ASSERT_FALSE(pool_->append("models/v1/weights.bin", "+more"));
  ASSERT_FALSE(pool_->append("models/log", "first"));
  EXPECT_EQ(Get("models/v1/weights.bin"), "short+more");
  EXPECT_EQ(Get("models/log"), "first") << "append creates a missing object";

  std::vector<std::string> names;
  ASSERT_FALSE(pool_->list("models", &names));
  EXPECT_EQ(names, (std::vector<std::string>{"log", "v1"}));
  ASSERT_FALSE(pool_->remove("models/log"));
  std::string out;
  EXPECT_EQ(pool_->get("models/log", &out).code, ENOENT);
  EXPECT_EQ(pool_->remove("models/log").code, ENOENT);
  EXPECT_EQ(pool_->stats().not_found, 2u);
}

TEST_F(ObjectApiTest, ErrorsNameTheProblem) {
  std::string out;
  ASSERT_FALSE(pool_->put("a", "file"));
  EXPECT_EQ(pool_->put("a/b", "x").code, ENOTDIR);
  EXPECT_EQ(pool_->get("a/b", &out).code, ENOTDIR);
  ASSERT_FALSE(pool_->put("dir/x", "x"));
  EXPECT_EQ(pool_->get("dir", &out).code, EISDIR);
  EXPECT_EQ(pool_->put("dir", "x").code, EISDIR);
  EXPECT_EQ(pool_->put("", "x").code, EINVAL);
  EXPECT_EQ(pool_->get("stripefs://not-this-pool/0000000000000002", &out).code, ENOENT);
  EXPECT_EQ(pool_->get(std::string(300, 'n'), &out).code, ENAMETOOLONG);
  Error e;
  EXPECT_EQ(ObjectPool::Open((dir_ / "nope").string(), {}, &e), nullptr);
  EXPECT_EQ(e.code, ENOENT) << e.message;
  EXPECT_EQ(ObjectPool::Open((dir_ / "meta").string(), {}, &e), nullptr) << "the pool is open already";
  EXPECT_EQ(e.code, EBUSY) << e.message;
  api::Options bad;
  bad.ram_cache = "fifo";
  EXPECT_EQ(ObjectPool::Open((dir_ / "meta").string(), bad, &e), nullptr);
  EXPECT_EQ(e.code, EINVAL);
}

TEST_F(ObjectApiTest, SurvivesReopenAndTheRamTierServesRepeatGets) {
  for (int i = 0; i < 100; ++i) ASSERT_FALSE(pool_->put("kv/user" + std::to_string(i), std::string(1024, 'a' + i % 26)));
  ASSERT_FALSE(pool_->sync());
  Reopen();
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 100; ++i) ASSERT_EQ(Get("kv/user" + std::to_string(i)), std::string(1024, 'a' + i % 26));
  }
  api::Stats s = pool_->stats();
  EXPECT_EQ(s.gets, 300u);
  EXPECT_EQ(s.cache_misses, 100u) << "only the first get of each object reads a drive";
  EXPECT_EQ(s.cache_hits, 200u);
  EXPECT_EQ(s.cache_capacity, 16u << 20) << "the RAM segment";

  api::Options off;
  off.ram_cache = "off";
  Reopen(off);
  EXPECT_EQ(Get("kv/user7"), std::string(1024, 'h'));
  EXPECT_EQ(pool_->stats().cache_capacity, 0u);
}

TEST_F(ObjectApiTest, MultiGetAndThreads) {
  std::vector<std::string> names;
  for (int i = 0; i < 20; ++i) {
    names.push_back("batch/" + std::to_string(i));
    Error e = pool_->put(names.back(), "value" + std::to_string(i));
    ASSERT_FALSE(e) << e.message;
  }
  names.push_back("batch/missing");
  std::vector<std::string> data;
  std::vector<Error> errors;
  pool_->multi_get(names, &data, &errors);
  ASSERT_EQ(data.size(), 21u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(data[i], "value" + std::to_string(i));
    EXPECT_FALSE(errors[i]);
  }
  EXPECT_EQ(errors[20].code, ENOENT);

  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::string name = "t" + std::to_string(t) + "/o" + std::to_string(i % 10);
        const std::string value = std::to_string(t) + ":" + std::to_string(i) + std::string(i, 'x');
        if (Error e = pool_->put(name, value)) {
          ADD_FAILURE() << "put " << name << ": " << e.message;
          wrong++;
        }
        std::string back;
        if (Error e = pool_->get(name, &back); e || back != value) {
          ADD_FAILURE() << "get " << name << ": " << e.message << " (" << back.size() << " bytes, want " << value.size() << ")";
          wrong++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace stripefs
