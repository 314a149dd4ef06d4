// SPDX-License-Identifier: Apache-2.0
// UsableAtReplicas: how much data a set of drives holds when every chunk
// keeps `replicas` copies on distinct drives. This is what statfs (df -h)
// reports for a pool, so a full df means a write of that size fits.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "engine/pool/pool.h"

namespace stripefs {
namespace {

TEST(UsableAtReplicas, OneReplicaIsTheSum) {
  EXPECT_EQ(UsableAtReplicas({512, 512, 512, 512}, 1), 2048u);
  EXPECT_EQ(UsableAtReplicas({10, 1, 1, 1}, 1), 13u);
}

TEST(UsableAtReplicas, EqualDrivesDivideBytheReplicaCount) {
  EXPECT_EQ(UsableAtReplicas({512, 512, 512, 512}, 2), 1024u);
  EXPECT_EQ(UsableAtReplicas({5, 5}, 2), 5u);
  EXPECT_EQ(UsableAtReplicas({6, 6, 6}, 3), 6u);
}

TEST(UsableAtReplicas, ALargeDriveCannotHoldTwoCopiesOfTheSameChunk) {
  // Every chunk needs one copy off the 10-byte drive, so the three small ones cap it.
  EXPECT_EQ(UsableAtReplicas({10, 1, 1, 1}, 2), 3u);
  EXPECT_EQ(UsableAtReplicas({1, 10, 1, 1}, 2), 3u);  // order does not matter
  EXPECT_EQ(UsableAtReplicas({10, 10, 1}, 3), 1u);
  EXPECT_EQ(UsableAtReplicas({4, 3, 3}, 2), 5u);
}

TEST(UsableAtReplicas, FewerDrivesThanReplicasHoldNothing) {
  EXPECT_EQ(UsableAtReplicas({512}, 2), 0u);
  EXPECT_EQ(UsableAtReplicas({}, 1), 0u);
  EXPECT_EQ(UsableAtReplicas({7, 7}, 3), 0u);
}

TEST(UsableAtReplicas, ZeroReplicasCountsAsOne) { EXPECT_EQ(UsableAtReplicas({3, 4}, 0), 7u); }

}  // namespace
}  // namespace stripefs
