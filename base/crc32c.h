// SPDX-License-Identifier: Apache-2.0
// CRC-32C (Castagnoli), the checksum of every stored 4 KiB block.
#pragma once
#include <cstddef>
#include <cstdint>

namespace stripefs {
// Hardware (SSE4.2) when the CPU has it, a table otherwise; same result.
uint32_t Crc32c(const void* data, size_t len, uint32_t seed = 0);
// Crc32c of each of the `count` consecutive blocks of `block` bytes at data,
// into out[0..count). Three blocks are summed side by side: the CRC
// instruction's latency, not its throughput, limits one stream.
void Crc32cBlocks(const void* data, size_t block, size_t count, uint32_t* out);
}  // namespace stripefs
