// SPDX-License-Identifier: Apache-2.0
// Shared by unit tests that need an empty namespace over a key-value store.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "meta/kv_store.h"
#include "meta/namespace.h"

namespace stripefs::testing_support {

// Formats kv with an empty root (owned by 0:0) and opens the namespace on it;
// null (with a test failure) when either step fails.
inline std::unique_ptr<meta::Namespace> FormatAndOpenNamespace(meta::KvStore* kv) {
  meta::Transaction txn;
  meta::Namespace::Format(&txn, 0, 0);
  Status committed = kv->commit(txn, true);
  EXPECT_TRUE(committed.ok()) << committed.message();
  auto ns = meta::Namespace::Open(kv, "test-uuid");
  EXPECT_TRUE(ns.ok()) << ns.status().message();
  return ns.ok() ? std::move(ns).value() : nullptr;
}

}  // namespace stripefs::testing_support
