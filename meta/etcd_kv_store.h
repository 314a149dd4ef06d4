// SPDX-License-Identifier: Apache-2.0
// KvStore on etcd's v3 API, so a pool's metadata survives the loss of a
// machine: etcd replicates it with Raft and answers a write only once a
// majority of its members has it in a synced log.
//
// A pool lives under a key prefix of its own. One daemon at a time writes
// it: opening a store for writing takes the writer lock (a key bound to an
// etcd lease that this store keeps alive), and every commit is a Txn that
// first checks the lock is still this store's, so a writer that lost it
// (paused past its lease, cut off from the cluster) can no longer write.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "meta/kv_store.h"

namespace stripefs::meta {

struct EtcdTarget {
  std::vector<std::string> endpoints;  // host:port, at least one
  std::string prefix;                  // the pool's keys start with it; never empty
  std::string uri() const;             // etcd://host:port[,host:port...]/prefix
};

// Whether a --meta argument names an etcd pool rather than a directory.
bool IsEtcdUri(std::string_view meta);
// s with every character but letters, digits, '.' and '-' made '_', for a file name.
std::string SafeFileName(std::string_view s);
// Where a mount's daemon keeps its state (pid file, log, the object
// channel's socket) unless -o state= says: a RocksDB pool's own directory,
// or for an etcd pool, which has no directory here, one under /run/stripefs
// named after its address.
std::string DefaultStateDir(const std::string& meta);
// Parses etcd://HOST:PORT[,HOST:PORT...]/PREFIX.
Result<EtcdTarget> ParseEtcdUri(std::string_view uri);

struct EtcdOptions {
  // How long one request may take, retries included, before it fails with
  // kIOError. This bounds how long a caller waits when the cluster has lost
  // its majority.
  std::chrono::milliseconds request_timeout{5000};
  // The writer lock's lease. A daemon killed with -9 holds the pool this
  // long; the next writer waits for it (up to lock_wait).
  std::chrono::seconds lease_ttl{10};
  std::chrono::milliseconds lock_wait{15000};
  // The cluster's space quota, which df reports free space against. etcd's
  // API does not tell it; this is etcd's default --quota-backend-bytes.
  uint64_t quota_bytes = 2ull << 30;
};

// kCreate refuses a prefix that already holds keys; kReadWrite and
// kReadOnly refuse one that holds no pool. kReadOnly takes no lock and
// refuses every change.
Result<std::unique_ptr<KvStore>> OpenEtcdKvStore(const EtcdTarget& target, OpenMode mode,
                                                 const EtcdOptions& options = {});

}  // namespace stripefs::meta
