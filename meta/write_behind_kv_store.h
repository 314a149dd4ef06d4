// SPDX-License-Identifier: Apache-2.0
// A KvStore in front of a remote one (etcd), for the one process that writes
// a pool. Every call to a remote store is a network round trip, and a commit
// also waits for a replicated log: about a millisecond each, where RocksDB
// takes microseconds. So this store
//   - answers commit() at once and sends the changes behind the caller: one
//     thread sends them in order, every commit that queued while the last
//     send was in flight merged into the next one (each commit stays whole
//     inside one send, so each stays atomic);
//   - keeps what it wrote and read, and answers get() from memory. That is
//     safe only because the pool has one writer (the store's own lock says
//     so), and so nothing else changes the keys behind it;
//   - knows prefixes whose every key it holds (known_empty(), and prefixes
//     scanned to the end), and answers gets and scans under them from
//     memory; any other scan waits until every earlier commit is sent.
// The durability is RocksDB's without sync: a commit survives once sync()
// or a sync commit returns. A process killed before that loses the last
// commits not yet sent (a few milliseconds' worth), never part of one, and
// the store it leaves is the state after some earlier commit.
//
// When a send fails (the cluster lost its majority), the changes stay queued
// and are sent again every retry_interval until one succeeds. Meanwhile
// every new change, sync and scan fails at once with the send's error, and
// gets of keys held in memory go on answering.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>

#include "meta/kv_store.h"

namespace stripefs::meta {

struct WriteBehindOptions {
  // Bytes of keys and values kept for get(); past it the clean ones are
  // dropped, all at once, and read again on demand.
  size_t cache_bytes = 256u << 20;
  // Changes queued and not yet sent; a commit beyond it waits.
  size_t max_queued_ops = 100'000;
  // One send: at most this many ops and bytes, unless a single commit is larger.
  size_t max_send_ops = 120;
  size_t max_send_bytes = 1u << 20;
  std::chrono::milliseconds retry_interval{1000};
};

std::unique_ptr<KvStore> NewWriteBehindKvStore(std::unique_ptr<KvStore> inner, const WriteBehindOptions& options = {});

}  // namespace stripefs::meta
