// SPDX-License-Identifier: Apache-2.0
// A connection to an etcd cluster through its v3 gRPC API: each call is
// retried while the channel moves to another member, a member has no
// leader, or an attempt goes unanswered for a quarter of the request
// timeout, until the request timeout; gRPC's errors become stripefs
// Statuses that name the cluster.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/status.h"
#include "meta/etcd/etcd_v3.grpc.pb.h"
#include "meta/etcd_kv_store.h"

namespace stripefs::meta {

class EtcdClient {
 public:
  static Result<std::unique_ptr<EtcdClient>> Connect(const EtcdTarget& target, std::chrono::milliseconds timeout);

  // `what` names the request in an error: "etcd URI: WHAT: why".
  Status range(const etcdserverpb::RangeRequest& req, etcdserverpb::RangeResponse* resp, const char* what);
  Status txn(const etcdserverpb::TxnRequest& req, etcdserverpb::TxnResponse* resp, const char* what);
  Status compact(int64_t revision);
  Result<int64_t> grant_lease(int64_t ttl_seconds);
  // The lease's seconds left after the refresh; 0 or less once it is gone.
  Result<int64_t> keep_alive(int64_t lease);
  Status revoke_lease(int64_t lease);
  // The answering member's status (its database size).
  Status status(etcdserverpb::StatusResponse* resp);

  const EtcdTarget& target() const { return target_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  EtcdClient(EtcdTarget target, std::shared_ptr<grpc::Channel> channel, std::chrono::milliseconds timeout);
  template <class Stub, class Req, class Resp>
  Status call(const char* what, grpc::Status (Stub::*method)(grpc::ClientContext*, const Req&, Resp*), Stub* stub,
              const Req& req, Resp* resp);
  Status convert(const char* what, const grpc::Status& s) const;

  const EtcdTarget target_;
  const std::chrono::milliseconds timeout_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  const std::unique_ptr<etcdserverpb::Lease::Stub> lease_;
  const std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance_;
};

}  // namespace stripefs::meta
