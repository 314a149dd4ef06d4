// SPDX-License-Identifier: Apache-2.0
// The bytes and xattr values stripefs-stress writes, made so that data can be
// checked without its history: byte p written by operation n of thread t to
// object o has a high nibble that depends on (t, o, p) only and a low nibble
// that depends on n as well (see stress.cc). Also the digests and hex dumps
// its reports use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace stress {

// splitmix64's finalizer: the patterns' hash, and each thread's RNG seed.
uint64_t Mix(uint64_t x);

// The xattr that names a file's object ("t<t>.o<o>."), set when it is created.
inline constexpr const char* kObjXattr = "user.obj";

// Fills out[0, len) with the bytes operation n of thread t writes to object o at file offset off.
void Fill(uint32_t t, uint32_t o, uint32_t n, uint64_t off, size_t len, uint8_t* out);

// The first offset in data (bytes [base, base+len) of a file of object o of
// thread t) holding a byte that no write to that object could have put there
// (zeros are holes and always allowed).
std::optional<uint64_t> FirstForeignByte(uint32_t t, uint32_t o, const uint8_t* data, uint64_t base, uint64_t len);

// The object whose writes could have produced data, searched among ids [1, limit)
// on up to 64 non-zero bytes (for a file whose user.obj is missing).
std::optional<uint32_t> GuessObject(uint32_t t, const uint8_t* data, uint64_t size, uint32_t limit);

std::string Sha256(const uint8_t* data, size_t len);
std::string Hex(const uint8_t* p, size_t n);

// "t<t>.o<o>.n<n>." then filler up to len bytes: an xattr value that names its thread and object.
std::string XattrValue(uint32_t t, uint32_t o, uint32_t n, size_t len);

// Parses what XattrValue made (and what user.obj holds: "t<t>.o<o>.").
std::optional<std::pair<uint32_t, uint32_t>> ParseXattrValue(const std::string& v);

// The object a file of thread t belongs to, by its xattrs: user.obj first,
// then any value an operation wrote. Ids must be below obj_limit. Sets *bad
// (when empty) to the first value that does not fit.
std::optional<uint32_t> IdentityOf(uint32_t t, const std::map<std::string, std::string>& xattrs, uint32_t obj_limit,
                                   std::string* bad);

}  // namespace stress
