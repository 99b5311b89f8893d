// DEFLATE decoding (RFC 1951), written from the RFC: stored, fixed-Huffman and dynamic-Huffman
// blocks, and back-references into what the stream wrote.
//
// Bits are read least significant first from a 64-bit buffer. Past the end of the input the buffer
// is filled with zeros, so a Huffman decoder can always look 15 bits ahead; consuming a bit that
// was not in the input is what reports truncation, at whatever point the input stops.
// A Huffman code decodes through a table indexed by its next kFastBits bits (codes up to that
// length, i.e. nearly all of them, in one lookup), and codes longer than that bit by bit over the
// canonical code (RFC 1951 3.2.2), which is also the reference the table is filled from.
#include "io/inflate.h"

#include <algorithm>
#include <array>

#include "tensor/error.h"

namespace weft::io::detail {
namespace {

constexpr int kMaxBits = 15;  // the longest Huffman code DEFLATE allows
constexpr int kFastBits = 10;
constexpr int kMaxLitLen = 288, kMaxDist = 32, kEndOfBlock = 256;

// Length symbols 257..285 and distance symbols 0..29: base value and extra bits (RFC 1951 3.2.5).
constexpr uint16_t kLengthBase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                      31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr uint8_t kLengthExtra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
constexpr uint16_t kDistBase[30] = {1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
                                    193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
constexpr uint8_t kDistExtra[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
// The order in which a dynamic block sends the code lengths of the code-length alphabet.
constexpr uint8_t kCodeLengthOrder[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

class BitReader {
 public:
  BitReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  // The next n <= 32 bits, not consumed (zeros beyond the input).
  uint32_t peek(int n) {
    if (count_ < n) refill();
    return static_cast<uint32_t>(buffer_ & ((uint64_t{1} << n) - 1));
  }
  void consume(int n) {
    WEFT_CHECK(n <= count_ - 8 * static_cast<int>(padding_), "[gunzip] truncated: the input ends inside the compressed data");
    buffer_ >>= n;
    count_ -= n;
  }
  uint32_t bits(int n) {
    const uint32_t v = peek(n);
    consume(n);
    return v;
  }
  // Drops the bits left in the current byte (a stored block starts on a byte boundary).
  void align_to_byte() { consume(count_ % 8); }
  // After align_to_byte: hands out the next n whole bytes of input.
  const uint8_t* take_bytes(size_t n) {
    const size_t at = position();
    WEFT_CHECK(n <= size_ - at, "[gunzip] truncated: the input ends inside a stored block");
    next_ = at + n;
    padding_ = 0;
    buffer_ = 0;
    count_ = 0;
    return data_ + at;
  }
  // The input bytes read so far, counting the byte that holds the last bit consumed.
  size_t position() const { return next_ - static_cast<size_t>(count_ / 8); }

 private:
  void refill() {
    while (count_ <= 56) {
      const uint64_t byte = next_ < size_ ? data_[next_] : 0;
      if (next_ >= size_) ++padding_;
      ++next_;
      buffer_ |= byte << count_;
      count_ += 8;
    }
  }

  const uint8_t* data_;
  size_t size_;
  size_t next_ = 0;     // the next byte to load, possibly past the end
  size_t padding_ = 0;  // zero bytes loaded past the end
  uint64_t buffer_ = 0;
  int count_ = 0;  // bits in buffer_
};

// A canonical Huffman code (RFC 1951 3.2.2) over up to kMaxLitLen symbols.
class Huffman {
 public:
  // From each symbol's code length (0: unused). Throws for an over-subscribed set of lengths, and
  // for an incomplete one unless `single_code_ok` and it has at most one code (RFC 1951 allows a
  // distance code of one symbol, or none in a block of literals only).
  void build(const uint8_t* lengths, int n, const char* what, bool single_code_ok) {
    counts_.fill(0);
    for (int s = 0; s < n; ++s) ++counts_[lengths[s]];
    counts_[0] = 0;
    int left = 1, codes = 0;
    for (int len = 1; len <= kMaxBits; ++len) {
      left = 2 * left - counts_[len];
      codes += counts_[len];
      WEFT_CHECK(left >= 0, "[gunzip] corrupt data: over-subscribed ", what, " code lengths");
    }
    WEFT_CHECK(left == 0 || (single_code_ok && codes <= 1), "[gunzip] corrupt data: incomplete ", what,
               " code lengths");
    // Symbols in code order: by length, then by symbol.
    std::array<int, kMaxBits + 2> offset{};
    for (int len = 1; len <= kMaxBits; ++len) offset[len + 1] = offset[len] + counts_[len];
    for (int s = 0; s < n; ++s)
      if (lengths[s] != 0) symbols_[offset[lengths[s]]++] = static_cast<uint16_t>(s);
    // The table: each code of up to kFastBits bits, bit-reversed (codes arrive most significant bit
    // first), at every index whose low bits it is.
    fast_.fill(0);
    std::array<int, kMaxBits + 1> next_code{};
    for (int len = 1, code = 0; len <= kMaxBits; ++len) {
      code = (code + counts_[len - 1]) << 1;
      next_code[len] = code;
    }
    for (int s = 0; s < n; ++s) {
      const int len = lengths[s];
      if (len == 0 || len > kFastBits) continue;
      const int code = next_code[len]++;
      int reversed = 0;
      for (int b = 0; b < len; ++b) reversed |= ((code >> b) & 1) << (len - 1 - b);
      for (int i = reversed; i < (1 << kFastBits); i += 1 << len) fast_[i] = static_cast<uint16_t>(len << 9 | s);
    }
  }

  int decode(BitReader& in) const {
    const uint32_t ahead = in.peek(kMaxBits);
    if (const uint16_t entry = fast_[ahead & ((1u << kFastBits) - 1)]; entry != 0) {
      in.consume(entry >> 9);
      return entry & 511;
    }
    // Bit by bit: `code` holds the first len bits read; codes of each length are consecutive
    // integers starting at `first`, and their symbols start at symbols_[index].
    int code = 0, first = 0, index = 0;
    for (int len = 1; len <= kMaxBits; ++len) {
      code |= static_cast<int>((ahead >> (len - 1)) & 1);
      if (code - first < counts_[len]) {
        in.consume(len);
        return symbols_[index + code - first];
      }
      index += counts_[len];
      first = (first + counts_[len]) << 1;
      code <<= 1;
    }
    WEFT_FAIL("[gunzip] corrupt data: a bit sequence that is no code of the block's Huffman code");
  }

 private:
  std::array<uint16_t, 1 << kFastBits> fast_{};  // len << 9 | symbol; 0 where no short code fits
  std::array<uint16_t, kMaxBits + 1> counts_{};
  std::array<uint16_t, kMaxLitLen> symbols_{};
};

class Inflater {
 public:
  Inflater(const uint8_t* data, size_t size, std::vector<uint8_t>& out, size_t max_output)
      : in_(data, size), out_(out), start_(out.size()), max_output_(max_output) {}

  size_t run() {
    bool last = false;
    while (!last) {
      last = in_.bits(1) == 1;
      switch (in_.bits(2)) {
        case 0: stored_block(); break;
        case 1: fixed_block(); break;
        case 2: dynamic_block(); break;
        default: WEFT_FAIL("[gunzip] corrupt data: invalid block type 3");
      }
    }
    return in_.position();
  }

 private:
  void reserve_output(size_t n) {
    WEFT_CHECK(n <= max_output_ - out_.size(), "[gunzip] the data decompresses to more than ", max_output_,
               " bytes, the limit");
  }

  void stored_block() {
    in_.align_to_byte();
    const uint32_t len = in_.bits(16), nlen = in_.bits(16);
    WEFT_CHECK(len == (~nlen & 0xFFFF), "[gunzip] corrupt data: a stored block's length ", len,
               " does not match its complement ", nlen);
    reserve_output(len);
    const uint8_t* bytes = in_.take_bytes(len);
    out_.insert(out_.end(), bytes, bytes + len);
  }

  void fixed_block() {
    static const std::array<Huffman, 2> fixed = [] {
      std::array<uint8_t, kMaxLitLen + kMaxDist> lengths{};
      std::fill(lengths.begin(), lengths.begin() + 144, 8);
      std::fill(lengths.begin() + 144, lengths.begin() + 256, 9);
      std::fill(lengths.begin() + 256, lengths.begin() + 280, 7);
      std::fill(lengths.begin() + 280, lengths.begin() + kMaxLitLen, 8);
      std::fill(lengths.begin() + kMaxLitLen, lengths.end(), 5);
      std::array<Huffman, 2> tables;
      tables[0].build(lengths.data(), kMaxLitLen, "literal/length", false);
      tables[1].build(lengths.data() + kMaxLitLen, kMaxDist, "distance", false);
      return tables;
    }();
    codes(fixed[0], fixed[1]);
  }

  void dynamic_block() {
    const int nlit = static_cast<int>(in_.bits(5)) + 257, ndist = static_cast<int>(in_.bits(5)) + 1;
    const int nclen = static_cast<int>(in_.bits(4)) + 4;
    WEFT_CHECK(nlit <= 286 && ndist <= 30, "[gunzip] corrupt data: a dynamic block declares ", nlit,
               " literal/length and ", ndist, " distance codes; expected at most 286 and 30");
    std::array<uint8_t, 19> clen{};
    for (int i = 0; i < nclen; ++i) clen[kCodeLengthOrder[i]] = static_cast<uint8_t>(in_.bits(3));
    Huffman clcode;
    clcode.build(clen.data(), 19, "code length", false);
    // The literal/length and distance code lengths form one sequence: a repeat may cross from one
    // into the other.
    std::array<uint8_t, 286 + 30> lengths{};
    for (int i = 0; i < nlit + ndist;) {
      const int symbol = clcode.decode(in_);
      if (symbol < 16) {
        lengths[i++] = static_cast<uint8_t>(symbol);
        continue;
      }
      uint8_t value = 0;
      int repeat;
      if (symbol == 16) {
        WEFT_CHECK(i > 0, "[gunzip] corrupt data: a repeat of the previous code length comes first");
        value = lengths[i - 1];
        repeat = 3 + static_cast<int>(in_.bits(2));
      } else if (symbol == 17) {
        repeat = 3 + static_cast<int>(in_.bits(3));
      } else {
        repeat = 11 + static_cast<int>(in_.bits(7));
      }
      WEFT_CHECK(i + repeat <= nlit + ndist, "[gunzip] corrupt data: code lengths repeat past the ", nlit + ndist,
                 " the block declares");
      std::fill(lengths.begin() + i, lengths.begin() + i + repeat, value);
      i += repeat;
    }
    WEFT_CHECK(lengths[kEndOfBlock] != 0, "[gunzip] corrupt data: a dynamic block without an end-of-block code");
    Huffman litlen, dist;
    litlen.build(lengths.data(), nlit, "literal/length", true);
    dist.build(lengths.data() + nlit, ndist, "distance", true);
    codes(litlen, dist);
  }

  // The symbols of one Huffman-coded block, up to its end-of-block code.
  void codes(const Huffman& litlen, const Huffman& dist) {
    for (;;) {
      const int symbol = litlen.decode(in_);
      if (symbol < kEndOfBlock) {
        reserve_output(1);
        out_.push_back(static_cast<uint8_t>(symbol));
        continue;
      }
      if (symbol == kEndOfBlock) return;
      const int l = symbol - 257;
      WEFT_CHECK(l < 29, "[gunzip] corrupt data: invalid length symbol ", symbol);
      const size_t length = kLengthBase[l] + in_.bits(kLengthExtra[l]);
      const int d = dist.decode(in_);
      WEFT_CHECK(d < 30, "[gunzip] corrupt data: invalid distance symbol ", d);
      const size_t distance = kDistBase[d] + in_.bits(kDistExtra[d]);
      WEFT_CHECK(distance <= out_.size() - start_, "[gunzip] corrupt data: a back-reference ", distance,
                 " bytes back, with only ", out_.size() - start_, " written");
      reserve_output(length);
      // Byte by byte: the source may overlap what is being written (a run).
      for (size_t i = 0; i < length; ++i) {
        const uint8_t byte = out_[out_.size() - distance];
        out_.push_back(byte);
      }
    }
  }

  BitReader in_;
  std::vector<uint8_t>& out_;
  size_t start_;
  size_t max_output_;
};

}  // namespace

size_t inflate_raw(const uint8_t* data, size_t size, std::vector<uint8_t>& out, size_t max_output) {
  return Inflater(data, size, out, max_output).run();
}

}  // namespace weft::io::detail
