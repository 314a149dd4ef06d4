// SPDX-License-Identifier: Apache-2.0
// The public object API over a real pool (drive files, RocksDB, io_uring).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "engine/pool/pool.h"
#include "stripefs/objects.h"
#include "tests/unit/test_pool.h"

namespace stripefs {
namespace {

using api::Error;
using api::ObjectPool;

class ObjectApiTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing_support::FreshTestDir("api");
    FormatOptions o = testing_support::TestPoolOptions(dir_, 3, 64ull << 20);
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
  // What the namespace stores for dir/name, read beside the open pool (as
  // `stripefs placement` reads beside a mount): the object API's buffered
  // state does not show here.
  Result<meta::InodeRecord> Stored(std::string_view dir, std::string_view name) {
    SFS_ASSIGN_OR_RETURN(auto inspect, Pool::Open((dir_ / "meta").string(), Pool::Mode::kInspect));
    SFS_ASSIGN_OR_RETURN(meta::InodeRecord d, inspect->ns().lookup(meta::kRootIno, dir));
    return inspect->ns().lookup(d.ino, name);
  }
  // fsck of the closed pool: its problems (none expected).
  std::vector<std::string> Fsck() {
    pool_.reset();
    auto checked = Pool::Open((dir_ / "meta").string(), Pool::Mode::kCheck);
    if (!checked.ok()) return {checked.status().message()};
    std::vector<std::string> notes;
    auto problems = checked.value()->fsck(false, &notes);
    if (!problems.ok()) return {problems.status().message()};
    return problems.value();
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

// read_into and size, for an object held in the write-back buffer and for
// one on the drives (past the buffer's 256 KiB).
TEST_F(ObjectApiTest, ReadIntoTheCallersMemoryAndSize) {
  std::string big(1 << 20, '\0');
  std::mt19937 rng(7);
  for (auto& c : big) c = static_cast<char>(rng());
  for (const std::string& data : {std::string("a small buffered object"), big}) {
    ASSERT_FALSE(pool_->put("into/obj", data));
    uint64_t size = 0;
    ASSERT_FALSE(pool_->size("into/obj", &size));
    EXPECT_EQ(size, data.size());
    std::vector<char> buf(data.size() + 10, 'x');
    size_t got = 0;
    ASSERT_FALSE(pool_->read_into("into/obj", 0, buf, &got));
    ASSERT_EQ(got, data.size()) << "short at the end of the object";
    EXPECT_EQ(std::string_view(buf.data(), got), data);
    EXPECT_EQ(buf[got], 'x') << "nothing written past what was read";
    uint64_t whole = 0;
    ASSERT_FALSE(pool_->read_into("into/obj", 2, std::span<char>(buf).first(5), &got, &whole));
    EXPECT_EQ(std::string_view(buf.data(), got), data.substr(2, 5));
    EXPECT_EQ(whole, data.size());
    ASSERT_FALSE(pool_->read_into("into/obj", data.size() + 1, buf, &got));
    EXPECT_EQ(got, 0u) << "past the end";
  }
  ASSERT_FALSE(pool_->sync());
  uint64_t size = 0;
  ASSERT_FALSE(pool_->size("into/obj", &size));
  EXPECT_EQ(size, big.size());
  EXPECT_EQ(pool_->size("into/none", &size).code, ENOENT);
  EXPECT_EQ(pool_->size("into", &size).code, EISDIR);
  char one;
  size_t got = 7;
  EXPECT_EQ(pool_->read_into("into/none", 0, std::span<char>(&one, 1), &got).code, ENOENT);
  EXPECT_EQ(got, 0u);
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

// The write-back buffer: puts are answered from RAM and stored on sync, on
// the timer, past the byte limit, or on close; nothing put is lost.
TEST_F(ObjectApiTest, BufferedPutsReadBackAndAreStoredBySync) {
  for (int i = 0; i < 50; ++i) ASSERT_FALSE(pool_->put("wb/" + std::to_string(i), std::string(1000 + i, 'a' + i % 26)));
  api::Stats s = pool_->stats();
  EXPECT_EQ(s.dirty_objects, 50u) << "small puts wait in the buffer";
  EXPECT_EQ(Get("wb/7"), std::string(1007, 'h')) << "and read back from it";
  std::string part;
  ASSERT_FALSE(pool_->read("wb/7", 1000, 100, &part));
  EXPECT_EQ(part, std::string(7, 'h'));
  ASSERT_FALSE(pool_->put("wb/7", "again"));
  EXPECT_EQ(Get("wb/7"), "again");
  ASSERT_FALSE(pool_->append("wb/8", "+tail")) << "an append stores the buffered put first";
  EXPECT_EQ(Get("wb/8"), std::string(1008, 'i') + "+tail");
  ASSERT_FALSE(pool_->remove("wb/9"));
  EXPECT_EQ(pool_->get("wb/9", &part).code, ENOENT);
  ASSERT_FALSE(pool_->sync());
  EXPECT_EQ(pool_->stats().dirty_objects, 0u);
  EXPECT_EQ(pool_->stats().dirty_bytes, 0u);

  ASSERT_FALSE(pool_->put("wb/late", "put just before close"));
  api::Options no_write_back;
  no_write_back.write_back = false;
  Reopen(no_write_back);  // closing stores what is still buffered
  EXPECT_EQ(Get("wb/7"), "again");
  EXPECT_EQ(Get("wb/8"), std::string(1008, 'i') + "+tail");
  EXPECT_EQ(Get("wb/49"), std::string(1049, 'x'));
  EXPECT_EQ(Get("wb/late"), "put just before close");
  EXPECT_EQ(pool_->get("wb/9", &part).code, ENOENT);
  ASSERT_FALSE(pool_->put("wb/direct", "x"));
  EXPECT_EQ(pool_->stats().dirty_objects, 0u) << "write_back = false writes through";
}

TEST_F(ObjectApiTest, TheTimerAndTheByteLimitStoreBufferedPuts) {
  api::Options o;
  o.write_back_bytes = 64 << 10;
  o.write_back_interval_ms = 20;
  Reopen(o);
  for (int i = 0; i < 200; ++i) {
    Error e = pool_->put("lim/" + std::to_string(i), std::string(1024, 'q'));
    ASSERT_FALSE(e) << e.code << " " << e.message << " at put " << i;
    ASSERT_LE(pool_->stats().dirty_bytes, 64u << 10) << "after put " << i;
  }
  // The timer (20 ms) stores the rest without a sync; wait for it (bounded).
  for (int tries = 0; tries < 1000 && pool_->stats().dirty_objects > 0; ++tries) usleep(10'000);
  EXPECT_EQ(pool_->stats().dirty_objects, 0u);

  api::Options sync_writes;
  sync_writes.sync_writes = true;
  Reopen(sync_writes);
  ASSERT_FALSE(pool_->put("lim/durable", "y"));
  EXPECT_EQ(pool_->stats().dirty_objects, 0u) << "sync_writes: every put is stored before it returns";
}

TEST_F(ObjectApiTest, AFullPoolFailsThePutItselfAndLosesNothingBuffered) {
  // 3 x 64 MiB drives: buffering stops once the drives could not take
  // everything buffered, so the put that finds no room fails itself (ENOSPC).
  std::map<std::string, std::string> stored;
  Error e;
  const std::string value(200 << 10, 'f');
  for (int i = 0; i < 5000 && !e; ++i) {
    const std::string name = "full/" + std::to_string(i);
    e = pool_->put(name, value.substr(i % 100));
    if (!e) stored[name] = value.substr(i % 100);
  }
  ASSERT_EQ(e.code, ENOSPC) << e.message;
  EXPECT_GT(stored.size(), 100u);
  Error synced = pool_->sync();
  EXPECT_FALSE(synced) << "everything put before the ENOSPC was stored: " << synced.message;
  Reopen();
  for (const auto& [name, data] : stored) ASSERT_EQ(Get(name), data) << name;
}

TEST_F(ObjectApiTest, ConcurrentPutsAndTimerFlushesKeepTheLastVersion) {
  api::Options o;
  o.write_back_interval_ms = 1;  // flushes all the time, racing the puts
  Reopen(o);
  constexpr int kThreads = 4, kRounds = 300;
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        const std::string name = "race/" + std::to_string(t) + "/" + std::to_string(i % 7);
        const std::string value = std::to_string(i) + std::string(i % 50, 'v');
        if (Error e = pool_->put(name, value)) wrong++, ADD_FAILURE() << e.message;
        std::string back;
        if (Error e = pool_->get(name, &back); e || back != value) wrong++, ADD_FAILURE() << name << ": " << back;
        if (i % 13 == 0) pool_->append(name, "+");
        if (i % 29 == 0) pool_->remove(name);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  std::map<std::string, std::string> last;
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < 7; ++k) {
      const std::string name = "race/" + std::to_string(t) + "/" + std::to_string(k);
      std::string v;
      Error e = pool_->get(name, &v);
      if (!e) last[name] = v;
    }
  }
  ASSERT_FALSE(pool_->sync());
  Reopen();
  for (const auto& [name, v] : last) EXPECT_EQ(Get(name), v) << name;
}

// A new object put into the write-back buffer gets its namespace entry from
// the flush that stores its data, in the same commit; until then the API
// alone knows it, under every spelling of its name.
TEST_F(ObjectApiTest, ANewObjectGetsItsEntryWithItsFirstFlush) {
  ASSERT_FALSE(pool_->put("fresh/seed", "x"));
  ASSERT_FALSE(pool_->sync());  // the directory exists; the next object is new in it
  std::string uri;
  ASSERT_FALSE(pool_->put("fresh/a", "one", &uri));
  EXPECT_EQ(Stored("fresh", "a").status().code(), Code::kNotFound) << "buffered: no entry yet";
  EXPECT_EQ(Get("fresh/a"), "one");
  EXPECT_EQ(Get(uri), "one");
  ASSERT_FALSE(pool_->put("/fresh//a/", "two"));
  EXPECT_EQ(Get("fresh/a"), "two") << "another spelling of the name is the same object";
  std::vector<std::string> names;
  ASSERT_FALSE(pool_->list("fresh", &names));
  EXPECT_EQ(names, (std::vector<std::string>{"a", "seed"}));
  EXPECT_EQ(pool_->put("fresh/a/b", "y").code, ENOTDIR) << "no directory may take an object's name";
  EXPECT_EQ(pool_->stats().dirty_objects, 1u);

  ASSERT_FALSE(pool_->sync());
  auto stored = Stored("fresh", "a");
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  EXPECT_EQ(stored->uri, uri);
  EXPECT_EQ(stored->size, 3u);
  EXPECT_TRUE(Fsck().empty());
  Reopen();
  EXPECT_EQ(Get("fresh/a"), "two");
  EXPECT_EQ(Get(uri), "two");
}

TEST_F(ObjectApiTest, ANewObjectRemovedBeforeItsFlushLeavesNothing) {
  ASSERT_FALSE(pool_->put("t/kept", "k"));
  ASSERT_FALSE(pool_->put("t/gone", "x"));
  ASSERT_FALSE(pool_->remove("t/gone"));
  std::string out;
  EXPECT_EQ(pool_->get("t/gone", &out).code, ENOENT);
  EXPECT_EQ(pool_->remove("t/gone").code, ENOENT);
  std::vector<std::string> names;
  ASSERT_FALSE(pool_->list("t", &names));
  EXPECT_EQ(names, std::vector<std::string>{"kept"});
  ASSERT_FALSE(pool_->sync());
  EXPECT_EQ(Stored("t", "gone").status().code(), Code::kNotFound);
  ASSERT_FALSE(pool_->put("t/gone", "again"));
  EXPECT_EQ(Get("t/gone"), "again") << "the name is free for a new object";
  const std::vector<std::string> problems = Fsck();
  EXPECT_TRUE(problems.empty()) << problems.front();
  Reopen();
  EXPECT_EQ(Get("t/gone"), "again");
  EXPECT_EQ(Get("t/kept"), "k");
}

// A buffered new object that is then written through (too large for the
// buffer), or appended to, is stored first, so it has an entry to change.
TEST_F(ObjectApiTest, ABufferedNewObjectWrittenThroughOrAppendedToKeepsItsName) {
  std::string uri;
  ASSERT_FALSE(pool_->put("w/big", "small", &uri));
  const std::string big(1 << 20, 'B');
  ASSERT_FALSE(pool_->put("w/big", big));
  EXPECT_EQ(Get("w/big"), big);
  ASSERT_FALSE(pool_->put("w/log", "ab"));
  ASSERT_FALSE(pool_->append("w/log", "cd"));
  EXPECT_EQ(Get("w/log"), "abcd");
  ASSERT_TRUE(Stored("w", "big").ok()) << "written through: stored at once";
  EXPECT_EQ(Stored("w", "big")->uri, uri) << "the same object, not a second one";
  ASSERT_FALSE(pool_->sync());
  const std::vector<std::string> problems = Fsck();
  EXPECT_TRUE(problems.empty()) << problems.front();
  Reopen();
  EXPECT_EQ(Get("w/big"), big);
  EXPECT_EQ(Get("w/log"), "abcd");
}

// Threads putting the same new names at once, while the timer flushes: each
// name gets one object, and the pool is consistent (no inode without its entry).
// At most 48 objects buffered: a flush holds the lock of every object in its
// batch, and ThreadSanitizer (this test runs under it) tracks at most 64
// locks held by one thread.
TEST_F(ObjectApiTest, ConcurrentPutsOfNewNamesMakeOneObjectEach) {
  api::Options o;
  o.write_back_interval_ms = 1;
  Reopen(o);
  constexpr int kRounds = 5, kThreads = 4, kNames = 48;
  auto dir = [](int round) { return "same" + std::to_string(round); };
  for (int round = 0; round < kRounds; ++round) {  // a directory each, synced after: at most 48 buffered
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kNames; ++i) {
          const std::string name = (t % 2 ? "/" + dir(round) + "/n" : dir(round) + "//n") + std::to_string(i);
          if (Error e = pool_->put(name, "v" + std::to_string(t))) ADD_FAILURE() << e.message;
        }
      });
    }
    for (auto& th : threads) th.join();
    std::vector<std::string> names;
    ASSERT_FALSE(pool_->list(dir(round), &names));
    EXPECT_EQ(names.size(), static_cast<size_t>(kNames)) << "each name once";
    ASSERT_FALSE(pool_->sync());
  }
  const std::vector<std::string> problems = Fsck();
  EXPECT_TRUE(problems.empty()) << problems.front();
  Reopen();
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::string> names;
    ASSERT_FALSE(pool_->list(dir(round), &names));
    EXPECT_EQ(names.size(), static_cast<size_t>(kNames));
    for (int i = 0; i < kNames; ++i) EXPECT_EQ(Get(dir(round) + "/n" + std::to_string(i)).size(), 2u);
  }
}

}  // namespace
}  // namespace stripefs
