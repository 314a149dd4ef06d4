// SPDX-License-Identifier: Apache-2.0
// EtcdClient (see etcd_client.h) and the etcd:// address.
#include "meta/etcd_client.h"

#include <cctype>
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netdb.h>

#include <algorithm>
#include <thread>

namespace stripefs::meta {

namespace pb = etcdserverpb;
// gRPC takes deadlines on the system clock.
using Clock = std::chrono::system_clock;

std::string EtcdTarget::uri() const {
  std::string s = "etcd://";
  for (size_t i = 0; i < endpoints.size(); ++i) s += (i ? "," : "") + endpoints[i];
  return s + "/" + prefix;
}

bool IsEtcdUri(std::string_view meta) { return meta.starts_with("etcd://"); }

std::string SafeFileName(std::string_view s) {
  std::string name;
  for (char c : s) name += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '_';
  return name;
}

std::string DefaultStateDir(const std::string& meta) {
  if (!IsEtcdUri(meta)) return meta;
  return "/run/stripefs/etcd_" + SafeFileName(std::string_view(meta).substr(7));
}

Result<EtcdTarget> ParseEtcdUri(std::string_view uri) {
  auto bad = [&](const std::string& why) {
    return Status::Invalid("bad etcd address '" + std::string(uri) + "': " + why +
                           " (expected etcd://HOST:PORT[,HOST:PORT...]/PREFIX)");
  };
  if (!IsEtcdUri(uri)) return bad("it does not start with etcd://");
  std::string_view rest = uri.substr(7);
  size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash + 1 == rest.size()) return bad("no /PREFIX");
  EtcdTarget t;
  t.prefix = std::string(rest.substr(slash + 1));
  std::string_view hosts = rest.substr(0, slash);
  while (!hosts.empty()) {
    size_t comma = hosts.find(',');
    std::string_view ep = hosts.substr(0, comma);
    size_t colon = ep.rfind(':');
    if (ep.empty() || colon == std::string_view::npos || colon == 0 || colon + 1 == ep.size() ||
        ep.substr(colon + 1).find_first_not_of("0123456789") != std::string_view::npos) {
      return bad("endpoint '" + std::string(ep) + "' is not HOST:PORT");
    }
    t.endpoints.emplace_back(ep);
    if (comma == std::string_view::npos) break;
    hosts = hosts.substr(comma + 1);
    if (hosts.empty()) return bad("an empty endpoint after ','");
  }
  if (t.endpoints.empty()) return bad("no endpoint");
  return t;
}

namespace {

// gRPC's "ipv4:" target lists every member, so the channel moves to another
// when the one it uses goes away. Names are resolved here, once.
Result<std::string> ChannelTarget(const EtcdTarget& t) {
  std::string target = "ipv4:";
  for (size_t i = 0; i < t.endpoints.size(); ++i) {
    const std::string& ep = t.endpoints[i];
    size_t colon = ep.rfind(':');
    addrinfo hints{};
    hints.ai_family = AF_INET;
    addrinfo* res = nullptr;
    if (int rc = getaddrinfo(ep.substr(0, colon).c_str(), nullptr, &hints, &res); rc != 0) {
      return Status::Invalid("cannot resolve etcd endpoint " + ep + ": " + gai_strerror(rc));
    }
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, ip, sizeof ip);
    freeaddrinfo(res);
    target += (i ? "," : "") + std::string(ip) + ep.substr(colon);
  }
  return target;
}


}  // namespace

Result<std::unique_ptr<EtcdClient>> EtcdClient::Connect(const EtcdTarget& target, std::chrono::milliseconds timeout) {
  SFS_ASSIGN_OR_RETURN(std::string where, ChannelTarget(target));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  // Without it a dead member is noticed only when a request times out.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  auto channel = grpc::CreateCustomChannel(where, grpc::InsecureChannelCredentials(), args);
  return std::unique_ptr<EtcdClient>(new EtcdClient(target, std::move(channel), timeout));
}

EtcdClient::EtcdClient(EtcdTarget target, std::shared_ptr<grpc::Channel> channel, std::chrono::milliseconds timeout)
    : target_(std::move(target)),
      timeout_(timeout),
      channel_(std::move(channel)),
      kv_(pb::KV::NewStub(channel_)),
      lease_(pb::Lease::NewStub(channel_)),
      maintenance_(pb::Maintenance::NewStub(channel_)) {}

template <class Stub, class Req, class Resp>
Status EtcdClient::call(const char* what, grpc::Status (Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
                        Stub* stub, const Req& req, Resp* resp) {
  const auto deadline = Clock::now() + timeout_;
  // A request a follower forwarded to a leader that has just died is lost
  // without an answer, so one attempt may not wait the whole timeout: a
  // later attempt reaches the leader elected meanwhile. Every request
  // stripefs sends is safe to apply twice (reads, and puts and deletes of
  // whole keys under the writer lock's compare).
  const auto attempt_time = std::max<Clock::duration>(timeout_ / 4, std::chrono::milliseconds(100));
  for (;;) {
    const auto attempt_deadline = std::min(deadline, Clock::now() + attempt_time);
    grpc::ClientContext ctx;
    ctx.set_deadline(attempt_deadline);
    ctx.set_wait_for_ready(true);  // wait for a connection instead of failing at once
    // A member that knows of no leader answers UNAVAILABLE at once instead
    // of holding the request until an election ends.
    ctx.AddMetadata("hasleader", "true");
    grpc::Status s = (stub->*method)(&ctx, req, resp);
    if (s.ok()) return Status::OK();
    // UNAVAILABLE: the member went away mid-call, has no leader, or its
    // leader changed. DEADLINE_EXCEEDED before the request's own deadline:
    // this attempt went unanswered.
    const bool again = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                       (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && attempt_deadline < deadline);
    if (again && Clock::now() + std::chrono::milliseconds(50) < deadline) {
      if (s.error_code() == grpc::StatusCode::UNAVAILABLE) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    return convert(what, s);
  }
}

Status EtcdClient::convert(const char* what, const grpc::Status& s) const {
  std::string where = "etcd " + target_.uri() + ": " + what + ": ";
  switch (s.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::UNAVAILABLE:
      return Status::IOError(where + "no answer within " + std::to_string(timeout_.count()) +
                             " ms (are a majority of the cluster's members up?): " + s.error_message());
    case grpc::StatusCode::RESOURCE_EXHAUSTED:  // etcd's space quota
      return Status::NoSpace(where + s.error_message());
    default:
      return Status::IOError(where + s.error_message());
  }
}

Status EtcdClient::range(const pb::RangeRequest& req, pb::RangeResponse* resp, const char* what) {
  return call(what, &pb::KV::Stub::Range, kv_.get(), req, resp);
}

Status EtcdClient::txn(const pb::TxnRequest& req, pb::TxnResponse* resp, const char* what) {
  return call(what, &pb::KV::Stub::Txn, kv_.get(), req, resp);
}

Status EtcdClient::compact(int64_t revision) {
  pb::CompactionRequest req;
  req.set_revision(revision);
  pb::CompactionResponse resp;
  return call("compact", &pb::KV::Stub::Compact, kv_.get(), req, &resp);
}

Result<int64_t> EtcdClient::grant_lease(int64_t ttl_seconds) {
  pb::LeaseGrantRequest req;
  req.set_ttl(ttl_seconds);
  pb::LeaseGrantResponse resp;
  SFS_RETURN_IF_ERROR(call("grant a lease", &pb::Lease::Stub::LeaseGrant, lease_.get(), req, &resp));
  if (!resp.error().empty()) return Status::IOError("etcd " + target_.uri() + ": grant a lease: " + resp.error());
  return resp.id();
}

Result<int64_t> EtcdClient::keep_alive(int64_t lease) {
  // One short stream per refresh: a stream's deadline covers all of it, and
  // a refresh must not wait longer than a request.
  grpc::ClientContext ctx;
  ctx.set_deadline(Clock::now() + timeout_);
  auto stream = lease_->LeaseKeepAlive(&ctx);
  pb::LeaseKeepAliveRequest req;
  req.set_id(lease);
  pb::LeaseKeepAliveResponse resp;
  bool answered = stream->Write(req) && stream->WritesDone() && stream->Read(&resp);
  grpc::Status s = stream->Finish();
  if (!answered) return s.ok() ? Status::IOError("etcd " + target_.uri() + ": keep the lease: no answer") : convert("keep the lease", s);
  return resp.ttl();
}

Status EtcdClient::revoke_lease(int64_t lease) {
  pb::LeaseRevokeRequest req;
  req.set_id(lease);
  pb::LeaseRevokeResponse resp;
  return call("release the lease", &pb::Lease::Stub::LeaseRevoke, lease_.get(), req, &resp);
}

Status EtcdClient::status(pb::StatusResponse* resp) {
  return call("read the cluster's status", &pb::Maintenance::Stub::Status, maintenance_.get(), pb::StatusRequest(), resp);
}

}  // namespace stripefs::meta
