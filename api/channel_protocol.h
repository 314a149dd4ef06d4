// SPDX-License-Identifier: Apache-2.0
// What the two ends of the object channel (api/object_channel.h) say.
//
// The region a client shares with the daemon starts with a Control block;
// the payload (a put's data, a read's bytes, a listing) follows it. A
// request is posted in the Control block and answered there; both ends
// poll for kSpin before they sleep on the state word (a futex), so a
// request that follows another closely costs no wake-up. The socket carries
// only what shared memory cannot: the region's memfd, and the connection's
// end when either side goes away.
//
// Setup: the client sends the first kMap on the socket (a Request with the
// memfd in SCM_RIGHTS) and the daemon answers on the socket (a Reply, then
// text_len bytes of message). Every later request goes through Control; a
// later kMap (a larger region) also sends its memfd on the socket, with one
// byte, and is answered in the old region's Control.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace stripefs::api::channel {

// Changed whenever Request, Reply, Control or the meaning of an op changes:
// the daemon refuses a client of another version (EPROTO) at kMap.
inline constexpr uint64_t kVersion = 2;

enum Op : uint32_t {
  kMap = 1,  // a new region: its memfd on the socket, length its size, offset kVersion
  kPut,      // name, data_len bytes of payload; text: the object's URI
  kAppend,   // name, data_len bytes of payload
  kRead,     // name, offset, length (at most the payload's size, or the buffer's room); got, object_size.
             // With buffer: into that I/O buffer from buffer_offset on, not the payload
  kSize,     // name; object_size
  kRemove,   // name
  kList,     // name is the directory; text: the names, each ended by '\0'
             // (ERANGE with object_size the bytes needed when the payload is too small)
  kSync,
  kStats,    // text: the Stats struct's bytes
  kAddBuffer,     // an I/O buffer: its memfd on the socket, with one byte; length its size; got its id
  kRemoveBuffer,  // offset: the id of the buffer to forget
};

struct Request {
  uint32_t op = 0;
  uint32_t name_len = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t data_len = 0;
  uint32_t buffer = 0;  // kRead: an I/O buffer's id (kAddBuffer), or 0 for the payload
  uint32_t unused = 0;
  uint64_t buffer_offset = 0;
};

struct Reply {
  int32_t code = 0;       // 0 or an errno; then text is the message (in Control)
  uint32_t text_len = 0;  // text: in the payload, or the message in Control
  uint64_t got = 0;
  uint64_t object_size = 0;
};

// Control::state.
enum State : uint32_t {
  kAnswered = 0,  // no request pending: the last one answered (or none yet)
  kPosted = 1,    // a request waits for the daemon
};

inline constexpr uint32_t kNameMax = 16 << 10;
inline constexpr uint32_t kMessageMax = 4 << 10;

struct Control {
  std::atomic<uint32_t> state{kAnswered};  // the futex word both ends wait on
  std::atomic<uint32_t> daemon_sleeps{0};  // set while the daemon sleeps on state: wake it
  std::atomic<uint32_t> client_sleeps{0};  // the same for the client
  Request request;
  Reply reply;
  char name[kNameMax];
  char message[kMessageMax];
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

// Where the payload starts in the region (page-aligned, as O_DIRECT reads want).
inline constexpr size_t kPayloadOffset = (sizeof(Control) + 4095) / 4096 * 4096;

// How long each end polls for the other before it sleeps; and how long a
// sleep lasts before it checks that the other end is still there.
inline constexpr std::chrono::microseconds kSpin{100};
inline constexpr std::chrono::milliseconds kSleepSlice{100};

}  // namespace stripefs::api::channel
