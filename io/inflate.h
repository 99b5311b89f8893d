// The DEFLATE decoder (RFC 1951) behind gunzip (io/gzip.h). Internal to io/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::io::detail {

// Decodes the raw DEFLATE stream that starts at data[0] and appends its bytes to `out`; returns how
// many input bytes the stream took (it ends on the byte holding its final block's last bit).
// Back-references reach only bytes this stream wrote. Throws weft::Error "[gunzip] ..." for a
// corrupt or truncated stream, or when `out` would grow beyond `max_output` bytes.
size_t inflate_raw(const uint8_t* data, size_t size, std::vector<uint8_t>& out, size_t max_output);

}  // namespace weft::io::detail
