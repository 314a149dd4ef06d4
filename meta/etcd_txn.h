// SPDX-License-Identifier: Apache-2.0
// How a Transaction becomes etcd Txns within etcd's limits: at most
// --max-txn-ops (128 by default) ops and --max-request-bytes (1.5 MiB) per
// request, and no key changed twice in one Txn.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "meta/kv_store.h"

namespace stripefs::meta {

// Below etcd's defaults, with room for the lock compare and the framing.
inline constexpr size_t kMaxTxnOps = 120;
inline constexpr size_t kMaxTxnBytes = 1 << 20;

using OpRefs = std::vector<const Transaction::Op*>;

// The last op of each key, in the order of first appearance: what a
// WriteBatch that applies ops in order leaves behind.
OpRefs LastOpPerKey(const Transaction& txn);
bool FitsOneTxn(const OpRefs& ops);
// ops in order, cut into runs that each fit one Txn. An op too large for
// any Txn is alone in its run (and etcd refuses it).
std::vector<OpRefs> GroupsThatFit(const OpRefs& ops);

// A self-delimiting encoding of ops, to stage them as values.
std::string EncodeOps(const OpRefs& ops);
Result<std::vector<Transaction::Op>> DecodeOps(std::string_view blob);

}  // namespace stripefs::meta
