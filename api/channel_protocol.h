// SPDX-License-Identifier: Apache-2.0
// What the two ends of the object channel (api/object_channel.h) say on its
// socket. Each request is a Request, then name_len bytes of name; each reply
// a Reply, then text_len bytes of text. Data lies in the shared region, from
// its start: a put's or append's data_len bytes, a read's got bytes.
#pragma once

#include <cstdint>

namespace stripefs::api::channel {

// Changed whenever Request, Reply or the meaning of an op changes: the
// daemon refuses a client of another version (EPROTO) at kMap.
inline constexpr uint64_t kVersion = 1;

enum Op : uint32_t {
  kMap = 1,  // the region: a memfd in SCM_RIGHTS, length its size, offset kVersion
  kPut,      // name, data_len bytes; text: the object's URI
  kAppend,   // name, data_len bytes
  kRead,     // name, offset, length (at most the region's size); got, object_size
  kSize,     // name; object_size
  kRemove,   // name
  kList,     // name is the directory; text: the names, each ended by '\0'
  kSync,
  kStats,    // text: the Stats struct's bytes
};

struct Request {
  uint32_t op = 0;
  uint32_t name_len = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t data_len = 0;
};

struct Reply {
  int32_t code = 0;  // 0 or an errno; text is then the message
  uint32_t text_len = 0;
  uint64_t got = 0;
  uint64_t object_size = 0;
};

// The longest name or text either end accepts.
inline constexpr uint32_t kTextMax = 64 << 20;

}  // namespace stripefs::api::channel
