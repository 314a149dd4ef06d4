// SPDX-License-Identifier: Apache-2.0
// NameIndex against std::map: random inserts, lookups and erases, through
// growth and the backward shift that erasing from a run of slots needs.
#include "api/name_index.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>

namespace stripefs {
namespace {

TEST(NameIndexTest, FindsWhatWasInsertedAndKeepsTheFirstValue) {
  NameIndex<int> index;
  EXPECT_EQ(index.find("a/b"), nullptr);
  EXPECT_EQ(index.insert("a/b", 1), 1);
  EXPECT_EQ(index.insert("a/b", 2), 1) << "an insert of a name already there keeps its value";
  ASSERT_NE(index.find("a/b"), nullptr);
  *index.find("a/b") = 3;
  EXPECT_EQ(*index.find("a/b"), 3);
  EXPECT_EQ(index.find("a/bc"), nullptr);
  EXPECT_EQ(index.find("a/"), nullptr);
  EXPECT_EQ(index.find(""), nullptr);
  EXPECT_TRUE(index.erase("a/b"));
  EXPECT_FALSE(index.erase("a/b"));
  EXPECT_EQ(index.find("a/b"), nullptr);
  EXPECT_EQ(index.size(), 0u);
}

TEST(NameIndexTest, RandomOperationsAgreeWithAMap) {
  NameIndex<uint64_t> index;
  std::map<std::string, uint64_t> oracle;
  std::mt19937_64 rng(7);
  // Few distinct names, so erases and re-inserts hit the same runs of slots often.
  auto name = [&] { return "ycsb/" + std::to_string(rng() % 3000) + "/user" + std::to_string(rng() % 7); };
  for (uint64_t op = 0; op < 200000; ++op) {
    const std::string n = name();
    switch (rng() % 3) {
      case 0: {
        const uint64_t kept = index.insert(n, op);
        const uint64_t expected = oracle.emplace(n, op).first->second;
        ASSERT_EQ(kept, expected) << n;
        break;
      }
      case 1:
        ASSERT_EQ(index.erase(n), oracle.erase(n) == 1) << n;
        break;
      default: {
        const uint64_t* found = index.find(n);
        auto it = oracle.find(n);
        ASSERT_EQ(found != nullptr, it != oracle.end()) << n << " at op " << op;
        if (found) {
          ASSERT_EQ(*found, it->second);
        }
      }
    }
    ASSERT_EQ(index.size(), oracle.size());
  }
  for (const auto& [n, v] : oracle) {
    const uint64_t* found = index.find(n);
    ASSERT_NE(found, nullptr) << n;
    EXPECT_EQ(*found, v);
  }
}

TEST(NameIndexTest, ValuesAreDestroyedOnEraseAndWithTheIndex) {
  auto counted = std::make_shared<int>(0);
  {
    NameIndex<std::shared_ptr<int>> index;
    for (int i = 0; i < 100; ++i) index.insert("n" + std::to_string(i), counted);
    EXPECT_EQ(counted.use_count(), 101);
    for (int i = 0; i < 50; ++i) index.erase("n" + std::to_string(i));
    EXPECT_EQ(counted.use_count(), 51);
  }
  EXPECT_EQ(counted.use_count(), 1);
}

}  // namespace
}  // namespace stripefs
