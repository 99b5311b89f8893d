// The gzip wrapper (RFC 1952) around inflate_raw, and CRC-32 (see gzip.h).
//
// A member: a 10-byte header (magic 1f 8b, method 8, flags, mtime, extra flags, OS), the optional
// fields its flags announce (FEXTRA, FNAME, FCOMMENT, FHCRC, in that order), the DEFLATE stream,
// then CRC-32 and ISIZE (the size mod 2^32), both little-endian.
#include "io/gzip.h"

#include <algorithm>

#include "io/crc32.h"
#include "io/inflate.h"
#include "tensor/error.h"

namespace weft::io {
namespace {

// FTEXT (bit 0) only hints at the contents, and is ignored.
constexpr uint8_t kFlagHeaderCrc = 2, kFlagExtra = 4, kFlagName = 8, kFlagComment = 16;
constexpr uint8_t kReservedFlags = 0xE0;

uint32_t le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// One gzip member at data[0, size): appends its bytes to out and returns its length in the input.
size_t gunzip_member(const uint8_t* data, size_t size, std::vector<uint8_t>& out, size_t max_output) {
  auto need = [&](size_t end, const char* where) {
    WEFT_CHECK(end <= size, "[gunzip] truncated: the input ends inside ", where);
  };
  need(10, "a member's header");
  WEFT_CHECK(data[2] == 8, "[gunzip] unsupported compression method ", int(data[2]), "; expected 8 (deflate)");
  const uint8_t flags = data[3];
  WEFT_CHECK((flags & kReservedFlags) == 0, "[gunzip] corrupt header: reserved flag bits set (flags 0x",
             weft::detail::Hex{flags}, ")");
  size_t at = 10;
  if (flags & kFlagExtra) {
    need(at + 2, "a member's header (extra field length)");
    const size_t length = data[at] | size_t{data[at + 1]} << 8;
    need(at + 2 + length, "a member's header (extra field)");
    at += 2 + length;
  }
  for (const uint8_t field : {kFlagName, kFlagComment})
    if (flags & field) {  // zero-terminated
      while (at < size && data[at] != 0) ++at;
      need(at + 1, field == kFlagName ? "a member's header (file name)" : "a member's header (comment)");
      ++at;
    }
  if (flags & kFlagHeaderCrc) {
    need(at + 2, "a member's header (header CRC)");
    const uint32_t stored = data[at] | uint32_t{data[at + 1]} << 8;
    WEFT_CHECK((crc32(data, at) & 0xFFFF) == stored, "[gunzip] corrupt header: its CRC-16 does not match");
    at += 2;
  }
  const size_t start = out.size();
  at += detail::inflate_raw(data + at, size - at, out, max_output);
  need(at + 8, "a member's trailer (CRC-32 and size)");
  const uint32_t crc = le32(data + at), isize = le32(data + at + 4);
  const uint32_t actual_crc = crc32(out.data() + start, out.size() - start);
  WEFT_CHECK(actual_crc == crc, "[gunzip] corrupt data: CRC-32 mismatch (the data decodes to 0x",
             weft::detail::Hex{actual_crc}, ", the trailer says 0x", weft::detail::Hex{crc}, ")");
  const size_t written = out.size() - start;
  WEFT_CHECK(static_cast<uint32_t>(written) == isize, "[gunzip] corrupt data: size mismatch (the data decodes to ",
             written, " bytes, the trailer says ", isize, " mod 2^32)");
  return at + 8;
}

}  // namespace

bool is_gzip(const uint8_t* data, size_t size) { return size >= 2 && data[0] == 0x1F && data[1] == 0x8B; }

std::vector<uint8_t> gunzip(const uint8_t* data, size_t size, size_t max_output) {
  WEFT_CHECK(is_gzip(data, size), "[gunzip] not gzip data: expected the magic bytes 1f 8b");
  std::vector<uint8_t> out;
  // The last member's ISIZE: the whole size for the usual single member below 4 GiB.
  if (size >= 18) out.reserve(std::min<size_t>(le32(data + size - 4), max_output));
  size_t at = 0;
  do {
    WEFT_CHECK(is_gzip(data + at, size - at), "[gunzip] corrupt data: ", size - at, " bytes after the last member "
               "are not another gzip member");
    at += gunzip_member(data + at, size - at, out, max_output);
  } while (at < size);
  return out;
}

}  // namespace weft::io
