// SPDX-License-Identifier: Apache-2.0
// The object channel: the object API of a mounted pool, for other processes
// on the machine. A mounted pool's metadata store is the daemon's alone, so
// ObjectPool::Open reaches such a pool through its daemon instead:
//
// - a Unix socket to connect, STATE/objects.sock in the daemon's state
//   directory (the pool's own directory unless -o state= moved it), mode
//   0600 and only the daemon's user (or root) admitted: the same trust as
//   opening the pool's directory in-process;
// - requests and data in a memory region the client shares with the daemon
//   (a memfd passed with SCM_RIGHTS, replaced by a larger one when a request
//   needs more; see api/channel_protocol.h). The daemon reads from the
//   drives and the RAM tier straight into it, or into an I/O buffer of the
//   client's (ObjectPool::alloc_buffer), and writes from it, so data crosses
//   no socket.
//
// A request is served by the daemon's one Namespace and ObjectStore, the
// same the mount uses: what the channel writes, the mount reads at once, and
// the other way round (the daemon tells the kernel which cached pages and
// entries a put or remove made stale).
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "stripefs/objects.h"

namespace stripefs::api {

inline constexpr const char* kChannelSocketName = "objects.sock";

// The socket a mount of meta_dir listens on by default (the daemon's default state directory).
std::string DefaultChannelSocket(const std::string& meta_dir);

class ChannelServer {
 public:
  // Listens on socket_path (a stale socket file there is replaced) and serves
  // pool to each process that connects, one thread per connection.
  static Result<std::unique_ptr<ChannelServer>> Start(const std::string& socket_path, std::unique_ptr<ObjectPool> pool);
  // Stops listening, ends every connection (waiting for a request in
  // progress), removes the socket file.
  virtual ~ChannelServer() = default;
};

// The pool behind the daemon listening on socket_path; null and *error set
// when none answers there (ENOENT or ECONNREFUSED: no daemon).
std::unique_ptr<ObjectPool> ConnectChannel(const std::string& socket_path, Error* error);

}  // namespace stripefs::api
