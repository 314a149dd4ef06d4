// SPDX-License-Identifier: Apache-2.0
// The data and xattr patterns of stripefs-stress (see pattern.h).
#include "pattern.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <cstdio>
#include <vector>

namespace stress {

uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

namespace {

uint64_t ObjKey(uint32_t t, uint32_t o) { return Mix(0x5f3759df2b7e1516ULL ^ (uint64_t{t} << 40) ^ o); }
// 8 nibbles: the high nibbles of the bytes at [8q, 8q+8) of object o of thread t.
uint64_t HighNibbles(uint64_t key, uint64_t q) { return Mix(key ^ (q * 0x9e3779b97f4a7c15ULL)); }
uint64_t LowNibbles(uint64_t key, uint32_t n, uint64_t q) {
  return Mix(key ^ Mix(n + 0x632be59bd9b4e019ULL) ^ (q * 0xd6e8feb86659fd93ULL));
}

}  // namespace

void Fill(uint32_t t, uint32_t o, uint32_t n, uint64_t off, size_t len, uint8_t* out) {
  uint64_t key = ObjKey(t, o);
  for (uint64_t p = off; p < off + len;) {
    uint64_t q = p / 8, hi = HighNibbles(key, q), lo = LowNibbles(key, n, q);
    for (unsigned i = p % 8; i < 8 && p < off + len; ++i, ++p)
      out[p - off] = static_cast<uint8_t>((((hi >> (4 * i)) & 0xf) << 4) | ((lo >> (4 * i)) & 0xf));
  }
}

std::optional<uint64_t> FirstForeignByte(uint32_t t, uint32_t o, const uint8_t* data, uint64_t base, uint64_t len) {
  uint64_t key = ObjKey(t, o);
  for (uint64_t p = base; p < base + len;) {
    uint64_t q = p / 8, hi = HighNibbles(key, q);
    for (unsigned i = p % 8; i < 8 && p < base + len; ++i, ++p) {
      uint8_t b = data[p - base];
      if (b != 0 && (b >> 4) != ((hi >> (4 * i)) & 0xf)) return p;
    }
  }
  return std::nullopt;
}

std::optional<uint32_t> GuessObject(uint32_t t, const uint8_t* data, uint64_t size, uint32_t limit) {
  std::vector<uint64_t> at;
  for (uint64_t p = 0; p < size && at.size() < 64; ++p)
    if (data[p]) at.push_back(p);
  if (at.empty()) return std::nullopt;
  for (uint32_t o = 1; o < limit; ++o) {
    bool fits = true;
    for (uint64_t p : at)
      if (FirstForeignByte(t, o, data + p, p, 1)) {
        fits = false;
        break;
      }
    if (fits) return o;
  }
  return std::nullopt;
}

std::string Sha256(const uint8_t* data, size_t len) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data, len, md, &n, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned i = 0; i < n; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

std::string Hex(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt::format("{:02x}{}", p[i], i + 1 < n ? " " : "");
  return s;
}

std::string XattrValue(uint32_t t, uint32_t o, uint32_t n, size_t len) {
  std::string v = fmt::format("t{}.o{}.n{}.", t, o, n);
  while (v.size() < len) v.push_back(static_cast<char>('a' + (v.size() * 7 + n) % 26));
  return v;
}

std::optional<std::pair<uint32_t, uint32_t>> ParseXattrValue(const std::string& v) {
  unsigned t = 0, o = 0;
  int used = 0;
  if (std::sscanf(v.c_str(), "t%u.o%u.%n", &t, &o, &used) != 2 || used == 0) return std::nullopt;
  return std::make_pair(t, o);
}

std::optional<uint32_t> IdentityOf(uint32_t t, const std::map<std::string, std::string>& xattrs, uint32_t obj_limit,
                                   std::string* bad) {
  std::optional<uint32_t> id;
  auto take = [&](const std::string& x, const std::string& v) {
    auto p = ParseXattrValue(v);
    if (!p || p->first != t || p->second == 0 || p->second >= obj_limit) {
      if (bad->empty()) *bad = fmt::format("xattr {} holds '{}', which no operation of thread {} wrote", x, v.substr(0, 40), t);
    } else if (!id) {
      id = p->second;
    } else if (*id != p->second && bad->empty()) {
      *bad = fmt::format("xattr {} names object {}, the file is object {}", x, p->second, *id);
    }
  };
  if (auto it = xattrs.find(kObjXattr); it != xattrs.end()) take(it->first, it->second);
  for (const auto& [x, v] : xattrs)
    if (x != kObjXattr) take(x, v);
  return id;
}

}  // namespace stress
