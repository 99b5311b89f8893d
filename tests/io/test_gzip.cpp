// gunzip (io/gzip.h), weft's own inflate: hand-made streams (tests/io/deflate_writer.h) of
// stored, fixed-Huffman and dynamic-Huffman blocks, with back-references that overlap their output
// and extra bits; gzip's optional header fields and several members; files written by the gzip program at three levels, when it is installed; and
// every class of corruption refused with its reason: bad magic, method or flags, truncation at
// every byte, trailing bytes, CRC-32 and size mismatches, a bad block type or stored length,
// over-subscribed or incomplete codes, bad code-length repeats, a missing end-of-block code,
// symbols and distances out of range, and output past the limit.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>

#include "deflate_writer.h"
#include "io/all.h"
#include "io/gzip.h"
#include "temp_dir.h"

using namespace weft;
using testing::BitWriter;
using testing::bytes_of;
using testing::fixed_symbol;
using testing::gzip_member;

namespace {

std::vector<uint8_t> gunzip(const std::vector<uint8_t>& file, size_t max_output = size_t{1} << 30) {
  return io::gunzip(file.data(), file.size(), max_output);
}

std::string error_of(const std::vector<uint8_t>& file, size_t max_output = size_t{1} << 30) {
  try {
    gunzip(file, max_output);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A fixed-Huffman block: "abc", then a run of length 9 at distance 3 (it overlaps what it
// writes), then 'Z', a copy of length 13 (symbol 266, one extra bit) from distance 7 (symbol 5,
// one extra bit), and the end of block.
//   -> "abc" "abcabcabc" "Z" "abcabcZ" "abcabc"
std::vector<uint8_t> fixed_deflate() {
  BitWriter w;
  w.bits(1, 1);  // BFINAL
  w.bits(1, 2);  // BTYPE 01
  for (char c : std::string("abc")) fixed_symbol(w, c);
  fixed_symbol(w, 257 + 6);  // length 9
  w.code(2, 5);              // distance 3
  fixed_symbol(w, 'Z');
  fixed_symbol(w, 266);  // lengths 13-14
  w.bits(0, 1);          // 13
  w.code(5, 5);          // distances 7-8
  w.bits(0, 1);          // 7
  fixed_symbol(w, 256);
  return w.bytes();
}
const std::string kFixedText = "abcabcabcabcZabcabcZabcabc";

// A dynamic-Huffman block whose code lengths are sent with every code-length symbol (literal
// lengths, 16, 17, 18):
//   literal/length code: 'x' 'y' 'z' '{' of 3 bits, end-of-block 256 and length 257 (3) of 2 bits;
//   distance code: one symbol (0: distance 1) of 1 bit, the incomplete code RFC 1951 allows;
//   code-length code: symbols 0-12 of 4 bits, 13-18 of 5 bits (complete).
// Contents: "xyz{", then length 3 at distance 1. -> "xyz{{{{"
struct DynamicBlock {
  std::vector<int> litlen = std::vector<int>(258, 0);
  std::vector<int> dist = {1};
  std::vector<int> clen = std::vector<int>(19, 0);
  DynamicBlock() {
    for (int s = 'x'; s <= '{'; ++s) litlen[static_cast<size_t>(s)] = 3;
    litlen[256] = litlen[257] = 2;
    for (int s = 0; s < 19; ++s) clen[static_cast<size_t>(s)] = s <= 12 ? 4 : 5;
  }
};
constexpr int kCodeLengthOrder[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

// Writes the block header and code lengths; `lengths` is the run-length coded sequence of
// (code-length symbol, extra bits value).
void dynamic_header(BitWriter& w, int nlit, int ndist, const std::vector<int>& clen,
                    const std::vector<std::pair<int, int>>& lengths) {
  w.bits(1, 1);  // BFINAL
  w.bits(2, 2);  // BTYPE 10
  w.bits(static_cast<uint32_t>(nlit - 257), 5);
  w.bits(static_cast<uint32_t>(ndist - 1), 5);
  w.bits(19 - 4, 4);
  for (int s : kCodeLengthOrder) w.bits(static_cast<uint32_t>(clen[static_cast<size_t>(s)]), 3);
  const auto codes = testing::canonical_codes(clen);
  for (const auto& [symbol, extra] : lengths) {
    w.code(codes[static_cast<size_t>(symbol)], clen[static_cast<size_t>(symbol)]);
    if (symbol == 16) w.bits(static_cast<uint32_t>(extra), 2);
    if (symbol == 17) w.bits(static_cast<uint32_t>(extra), 3);
    if (symbol == 18) w.bits(static_cast<uint32_t>(extra), 7);
  }
}

// The run-length coding of DynamicBlock's lengths: 120 zeros (18), 3 ('x'), three repeats of it
// (16), 132 zeros (18), 2 2 (256, 257), then the distance length 1.
const std::vector<std::pair<int, int>> kDynamicLengths = {{18, 120 - 11}, {3, 0}, {16, 0}, {18, 132 - 11},
                                                          {2, 0},         {2, 0}, {1, 0}};

std::vector<uint8_t> dynamic_deflate() {
  const DynamicBlock b;
  BitWriter w;
  dynamic_header(w, 258, 1, b.clen, kDynamicLengths);
  const auto lit = testing::canonical_codes(b.litlen);
  for (char c : std::string("xyz{")) w.code(lit[static_cast<size_t>(c)], 3);
  w.code(lit[257], 2);  // length 3
  w.code(0, 1);         // distance 1
  w.code(lit[256], 2);
  return w.bytes();
}

// The file the gzip program writes for `data` at `level`, without a name or time in its header (so
// the header is the 10 fixed bytes); empty when gzip is not installed.
std::vector<uint8_t> gzip_program(const std::vector<uint8_t>& data, const std::string& level, const test::TempDir& dir) {
  const std::string in = (dir.path() / "data").string(), out = (dir.path() / ("data" + level + ".gz")).string();
  std::ofstream(in, std::ios::binary).write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (std::system(("gzip -n -c " + level + " '" + in + "' > '" + out + "' 2>/dev/null").c_str()) != 0) return {};
  std::ifstream f(out, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Text with long and short repeats and some noise: what real files give gzip to find.
std::vector<uint8_t> sample_text(size_t size) {
  const char* words[] = {"tensor ", "gradient ", "weft ", "the ", "of ", "shard ", "\n", "0.125 ", "loss "};
  std::vector<uint8_t> out;
  uint32_t state = 12345;
  while (out.size() < size) {
    state = state * 1664525u + 1013904223u;
    const char* w = words[(state >> 16) % 9];
    out.insert(out.end(), w, w + std::char_traits<char>::length(w));
    if ((state >> 8) % 7 == 0) out.push_back(static_cast<uint8_t>(state >> 24));
  }
  out.resize(size);
  return out;
}

}  // namespace

TEST_CASE("gunzip decodes stored blocks: one, several, and an empty file") {
  const auto hello = bytes_of("hello, stored world");
  CHECK(gunzip(testing::gzip_stored(hello)) == hello);
  CHECK(gunzip(gzip_member(testing::stored_deflate(hello, 4), hello)) == hello);  // 5 blocks
  CHECK(gunzip(testing::gzip_stored({})).empty());
}

TEST_CASE("gunzip decodes a fixed-Huffman block with overlapping and extra-bit back-references") {
  const auto want = bytes_of(kFixedText);
  CHECK(gunzip(gzip_member(fixed_deflate(), want)) == want);
}

TEST_CASE("gunzip decodes a dynamic-Huffman block whose lengths use every repeat code") {
  const auto want = bytes_of("xyz{{{{");
  CHECK(gunzip(gzip_member(dynamic_deflate(), want)) == want);
}

TEST_CASE("gunzip reads the optional header fields and checks the header CRC") {
  const auto text = bytes_of("fields");
  std::vector<uint8_t> file = testing::gzip_stored(text);
  // FEXTRA (2 bytes), FNAME "a.txt", FCOMMENT "hi", FHCRC, inserted after the 10-byte header.
  std::vector<uint8_t> header(file.begin(), file.begin() + 10);
  header[3] = 4 | 8 | 16 | 2;
  for (uint8_t b : {2, 0, 0xAB, 0xCD}) header.push_back(b);
  for (char c : std::string("a.txt")) header.push_back(static_cast<uint8_t>(c));
  header.push_back(0);
  for (char c : std::string("hi")) header.push_back(static_cast<uint8_t>(c));
  header.push_back(0);
  const uint32_t crc = io::crc32(header.data(), header.size());
  header.push_back(static_cast<uint8_t>(crc));
  header.push_back(static_cast<uint8_t>(crc >> 8));
  std::vector<uint8_t> with_fields = header;
  with_fields.insert(with_fields.end(), file.begin() + 10, file.end());
  CHECK(gunzip(with_fields) == text);
  with_fields[header.size() - 1] ^= 1;
  CHECK(contains(error_of(with_fields), "[gunzip] corrupt header: its CRC-16 does not match"));
}

TEST_CASE("gunzip concatenates the members of a multi-member file") {
  const auto a = bytes_of(kFixedText), b = bytes_of("xyz{{{{");
  std::vector<uint8_t> file = gzip_member(fixed_deflate(), a);
  const auto second = gzip_member(dynamic_deflate(), b);
  file.insert(file.end(), second.begin(), second.end());
  const auto third = testing::gzip_stored({});
  file.insert(file.end(), third.begin(), third.end());
  std::vector<uint8_t> want = a;
  want.insert(want.end(), b.begin(), b.end());
  CHECK(gunzip(file) == want);
}

TEST_CASE("gunzip decodes what the gzip program writes, at every level, one member or two") {
  test::TempDir dir;
  const std::vector<uint8_t> text = sample_text(300000);
  for (const std::string level : {"-1", "-6", "-9"}) {
    CAPTURE(level);
    const std::vector<uint8_t> file = gzip_program(text, level, dir);
    if (file.empty()) {
      MESSAGE("the gzip program is not installed; skipping");
      return;
    }
    CHECK(file.size() < text.size() / 2);  // really compressed: Huffman blocks, not stored ones
    CHECK(gunzip(file) == text);
    std::vector<uint8_t> twice = file;
    twice.insert(twice.end(), file.begin(), file.end());
    std::vector<uint8_t> want = text;
    want.insert(want.end(), text.begin(), text.end());
    CHECK(gunzip(twice) == want);
  }
}

TEST_CASE("gunzip refuses a bad magic, method or flags, and bytes after the last member") {
  std::vector<uint8_t> file = testing::gzip_stored(bytes_of("x"));
  auto with = [&](size_t at, uint8_t value) {
    std::vector<uint8_t> f = file;
    f[at] = value;
    return error_of(f);
  };
  CHECK(contains(with(1, 0x8C), "[gunzip] not gzip data: expected the magic bytes 1f 8b"));
  CHECK(contains(with(2, 7), "[gunzip] unsupported compression method 7; expected 8 (deflate)"));
  CHECK(contains(with(3, 0x20), "[gunzip] corrupt header: reserved flag bits set (flags 0x20)"));
  CHECK(contains(error_of({}), "not gzip data"));
  file.push_back(0);
  CHECK(contains(error_of(file), "[gunzip] corrupt data: 1 bytes after the last member are not another gzip member"));
}

TEST_CASE("gunzip refuses a file truncated at any byte, naming where it ends") {
  std::vector<uint8_t> file = gzip_member(fixed_deflate(), bytes_of(kFixedText));
  const auto dynamic = gzip_member(dynamic_deflate(), bytes_of("xyz{{{{"));
  const auto stored = testing::gzip_stored(bytes_of("stored bytes"));
  for (const auto& whole : {file, dynamic, stored})
    for (size_t n = 0; n < whole.size(); ++n) {
      CAPTURE(n);
      const std::string error = error_of({whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n)});
      CHECK(contains(error, n < 2 ? "not gzip data" : "[gunzip] truncated: the input ends inside"));
    }
  CHECK(contains(error_of({stored.begin(), stored.begin() + 5}), "truncated: the input ends inside a member's header"));
  CHECK(contains(error_of({stored.begin(), stored.begin() + 20}), "truncated: the input ends inside a stored block"));
  CHECK(contains(error_of({stored.begin(), stored.end() - 3}), "inside a member's trailer (CRC-32 and size)"));
}

TEST_CASE("gunzip refuses a CRC-32 or size that does not match the data, and every flipped bit") {
  const auto text = bytes_of(kFixedText);
  std::vector<uint8_t> file = gzip_member(fixed_deflate(), text);
  std::vector<uint8_t> bad_crc = file;
  bad_crc[bad_crc.size() - 8] ^= 1;
  CHECK(contains(error_of(bad_crc), "[gunzip] corrupt data: CRC-32 mismatch"));
  std::vector<uint8_t> bad_size = file;
  bad_size[bad_size.size() - 4] ^= 1;
  CHECK(contains(error_of(bad_size), "[gunzip] corrupt data: size mismatch (the data decodes to 26 bytes, "
                                     "the trailer says 27 mod 2^32)"));
  // Every bit after the header but the last byte of the DEFLATE stream (whose high bits may be
  // padding that decoders ignore). In the hand-made stream every such bit counts, and the CRC-32 or
  // the decoder catches each one; gzip's streams have a few bits that change nothing (zlib decodes
  // those flips to the same bytes too), so there a flip is refused or gives the original bytes.
  auto flips = [](const std::vector<uint8_t>& whole, const std::function<void(const std::vector<uint8_t>&)>& check) {
    for (size_t at = 10; at < whole.size(); ++at)
      for (int bit = 0; bit < 8 && at != whole.size() - 9; ++bit) {
        std::vector<uint8_t> flipped = whole;
        flipped[at] = static_cast<uint8_t>(flipped[at] ^ (1 << bit));
        CAPTURE(at);
        CAPTURE(bit);
        check(flipped);
      }
  };
  flips(file, [](const std::vector<uint8_t>& flipped) { CHECK(contains(error_of(flipped), "[gunzip] ")); });
  test::TempDir dir;
  const std::vector<uint8_t> sample = sample_text(2000);
  flips(gzip_program(sample, "-9", dir), [&](const std::vector<uint8_t>& flipped) {
    const std::string error = error_of(flipped);
    if (error.empty()) CHECK(gunzip(flipped) == sample);
    else CHECK(contains(error, "[gunzip] "));
  });
}

TEST_CASE("gunzip refuses corrupt blocks with the reason") {
  const auto member = [](const BitWriter& w) { return gzip_member(w.bytes(), {}); };
  {
    BitWriter w;
    w.bits(1, 1);
    w.bits(3, 2);
    CHECK(contains(error_of(member(w)), "[gunzip] corrupt data: invalid block type 3"));
  }
  {
    BitWriter w;
    w.bits(1, 1);
    w.bits(0, 2);
    w.align();
    w.bits(5, 16);
    w.bits(0xFFFA ^ 1, 16);
    CHECK(contains(error_of(member(w)), "a stored block's length 5 does not match its complement 65531"));
  }
  {  // a back-reference before the start of the output
    BitWriter w;
    w.bits(1, 1);
    w.bits(1, 2);
    fixed_symbol(w, 'a');
    fixed_symbol(w, 257);  // length 3
    w.code(1, 5);          // distance 2
    CHECK(contains(error_of(member(w)), "a back-reference 2 bytes back, with only 1 written"));
  }
  for (int symbol : {286, 287}) {  // fixed code lengths name them, the format does not
    BitWriter w;
    w.bits(1, 1);
    w.bits(1, 2);
    fixed_symbol(w, 'a');
    fixed_symbol(w, symbol);
    CHECK(contains(error_of(member(w)), "invalid length symbol " + std::to_string(symbol)));
  }
  for (uint32_t symbol : {30u, 31u}) {
    BitWriter w;
    w.bits(1, 1);
    w.bits(1, 2);
    fixed_symbol(w, 'a');
    fixed_symbol(w, 257);
    w.code(symbol, 5);
    CHECK(contains(error_of(member(w)), "invalid distance symbol " + std::to_string(symbol)));
  }
}

TEST_CASE("gunzip refuses bad dynamic-block codes with the reason") {
  const DynamicBlock b;
  auto error_with = [](int nlit, int ndist, const std::vector<int>& clen, const std::vector<std::pair<int, int>>& lengths) {
    BitWriter w;
    dynamic_header(w, nlit, ndist, clen, lengths);
    return error_of(gzip_member(w.bytes(), {}));
  };
  CHECK(contains(error_with(287, 1, b.clen, {}), "a dynamic block declares 287 literal/length and 1 distance codes; "
                                                   "expected at most 286 and 30"));
  CHECK(contains(error_with(258, 31, b.clen, {}), "declares 258 literal/length and 31 distance codes"));
  std::vector<int> incomplete_clen = b.clen;
  incomplete_clen[18] = 0;
  CHECK(contains(error_with(258, 1, incomplete_clen, {}), "incomplete code length code lengths"));
  std::vector<int> oversubscribed_clen(19, 1);
  CHECK(contains(error_with(258, 1, oversubscribed_clen, {}), "over-subscribed code length code lengths"));
  CHECK(contains(error_with(258, 1, b.clen, {{16, 0}}), "a repeat of the previous code length comes first"));
  CHECK(contains(error_with(258, 1, b.clen, {{18, 127}, {18, 127}, {18, 127}}), "code lengths repeat past the 259"));
  // No end-of-block code: 'x'..'{' and 257 only.
  CHECK(contains(error_with(258, 1, b.clen, {{18, 120 - 11}, {2, 0}, {16, 0}, {18, 133 - 11}, {2, 0}, {1, 0}}),
                 "a dynamic block without an end-of-block code"));
  // Literal/length lengths: 'x' 1 bit, 'y' 3, 256 2 (incomplete); 'x', 'y', 256 1 bit each (over-subscribed).
  CHECK(contains(error_with(258, 1, b.clen, {{18, 120 - 11}, {1, 0}, {3, 0}, {18, 134 - 11}, {2, 0}, {0, 0}, {1, 0}}),
                 "incomplete literal/length code lengths"));
  CHECK(contains(error_with(258, 1, b.clen, {{18, 120 - 11}, {1, 0}, {1, 0}, {18, 134 - 11}, {1, 0}, {0, 0}, {1, 0}}),
                 "over-subscribed literal/length code lengths"));
}

TEST_CASE("gunzip stops output past its limit before writing it") {
  const auto text = bytes_of(kFixedText);
  CHECK(gunzip(gzip_member(fixed_deflate(), text), text.size()) == text);
  CHECK(contains(error_of(gzip_member(fixed_deflate(), text), text.size() - 1),
                 "[gunzip] the data decompresses to more than 25 bytes, the limit"));
  CHECK(contains(error_of(testing::gzip_stored(text), 10), "more than 10 bytes"));
}
