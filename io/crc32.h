// CRC-32 (ISO-HDLC: gzip's, zlib's, PNG's and zip's; reflected polynomial 0xEDB88320), the
// checksum of gzip members (io/gzip.h) and of the data region of the checkpoints weft writes
// (io/safetensors.h, Checksum::Crc32).
//
// crc32 takes eight bytes a step through eight tables ("slicing by 8"): table k holds the CRC of a
// byte followed by k zero bytes, so a step's eight lookups are independent of each other instead
// of a chain of eight dependent ones (~4x the bytes per second of the byte-at-a-time loop).
// crc32_bytewise is that loop, the reference the tests hold crc32 to.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::io {

// The CRC-32 of `size` bytes, continued from `crc` (the CRC of the bytes before them; 0 to start).
uint32_t crc32(const uint8_t* data, size_t size, uint32_t crc = 0);

// The same, a byte at a time: the scalar reference.
uint32_t crc32_bytewise(const uint8_t* data, size_t size, uint32_t crc = 0);

}  // namespace weft::io
