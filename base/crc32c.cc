// SPDX-License-Identifier: Apache-2.0
// CRC-32C with the SSE4.2 instruction where available (8 bytes a step) and a
// byte-wise table otherwise.
#include "base/crc32c.h"

#include <array>
#include <cstring>

namespace stripefs {
namespace {

constexpr uint32_t kPoly = 0x82F63B78;  // reflected Castagnoli polynomial

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto kTable = MakeTable();

uint32_t Software(const uint8_t* p, size_t n, uint32_t crc) {
  while (n--) crc = kTable[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t Hardware(const uint8_t* p, size_t n, uint32_t crc) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}
// Three independent streams of `len` bytes each (len a multiple of 8).
__attribute__((target("sse4.2"))) void Hardware3(const uint8_t* a, const uint8_t* b, const uint8_t* c, size_t len,
                                                 uint32_t* out) {
  uint64_t x = 0xffffffff, y = 0xffffffff, z = 0xffffffff;
  for (size_t i = 0; i < len; i += 8) {
    uint64_t va, vb, vc;
    std::memcpy(&va, a + i, 8);
    std::memcpy(&vb, b + i, 8);
    std::memcpy(&vc, c + i, 8);
    x = __builtin_ia32_crc32di(x, va);
    y = __builtin_ia32_crc32di(y, vb);
    z = __builtin_ia32_crc32di(z, vc);
  }
  out[0] = ~static_cast<uint32_t>(x);
  out[1] = ~static_cast<uint32_t>(y);
  out[2] = ~static_cast<uint32_t>(z);
}
const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");
#endif

}  // namespace

uint32_t Crc32c(const void* data, size_t len, uint32_t seed) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t crc = ~seed;
#if defined(__x86_64__)
  if (kHaveSse42) return ~Hardware(p, len, crc);
#endif
  return ~Software(p, len, crc);
}

void Crc32cBlocks(const void* data, size_t block, size_t count, uint32_t* out) {
  const auto* p = static_cast<const uint8_t*>(data);
  size_t i = 0;
#if defined(__x86_64__)
  if (kHaveSse42 && block % 8 == 0) {
    for (; i + 3 <= count; i += 3) Hardware3(p + i * block, p + (i + 1) * block, p + (i + 2) * block, block, out + i);
  }
#endif
  for (; i < count; ++i) out[i] = Crc32c(p + i * block, block);
}

}  // namespace stripefs
