// CRC-32C (Castagnoli), the checksum of every stored 4 KiB block.
#pragma once
#include <cstddef>
#include <cstdint>

namespace stripefs {
// Hardware (SSE4.2) when the CPU has it, a table otherwise; same result.
uint32_t Crc32c(const void* data, size_t len, uint32_t seed = 0);
}  // namespace stripefs
