// gzip decompression of our own (RFC 1951 DEFLATE inside the RFC 1952 gzip wrapper), so that the
// dataset readers take .gz files without zlib: the core library depends on nothing but the C and
// C++ runtimes.
//
// gunzip() decodes every member of a gzip file (concatenated members, as `cat a.gz b.gz` makes,
// give their outputs one after the other) and checks what the format lets it check: the header's
// fields and optional header CRC, each DEFLATE block (block type, stored lengths, Huffman codes
// neither over-subscribed nor, beyond the single-code case RFC 1951 allows, incomplete, every
// length, distance and back-reference within bounds), and each member's CRC-32 and ISIZE
// trailer. Anything else — truncated input at any byte, trailing bytes that are not a member, a
// corrupt stream — throws weft::Error "[gunzip] ..." naming what is wrong, and output beyond
// `max_output` bytes is refused before it is written (a decompression bomb stops there).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::io {

// True when data starts with the gzip magic bytes 1f 8b.
bool is_gzip(const uint8_t* data, size_t size);

// The decompressed bytes of a whole gzip file.
std::vector<uint8_t> gunzip(const uint8_t* data, size_t size, size_t max_output = size_t{1} << 36);

}  // namespace weft::io
