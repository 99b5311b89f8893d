// The QuantFormat table and its scalar reference kernels (the vector kernels that follow them are
// chosen by the tensor-level functions: blockwise.cpp, llm_int8.cpp, gemm_4bit.cpp).
//
// Where a multiply meets an add the rounding is spelled out (std::fma where bitsandbytes' own
// build fuses them), so the results do not depend on whether this compiler contracts them.
#include "precision/quant/quant_format.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <string>

#include "precision/quant/codebooks.h"
#include "tensor/enum_check.h"
#include "tensor/error.h"

namespace weft::precision::quant {
namespace {

// ---- 4-bit (NF4, FP4): bitsandbytes' default backend, which its CPU backend uses to quantize ----

// The table sorted by value, the code of each sorted entry, and the midpoints between neighbours.
// FP4 has two zeros (codes 0 and 8); ties keep code order, as PyTorch's argsort leaves them.
struct SortedTable {
  std::array<uint8_t, 16> code_of{};
  std::array<float, 15> bounds{};
};

SortedTable sort_table(const std::array<float, 16>& table) {
  SortedTable s;
  for (int i = 0; i < 16; ++i) s.code_of[i] = static_cast<uint8_t>(i);
  std::stable_sort(s.code_of.begin(), s.code_of.end(), [&](uint8_t a, uint8_t b) { return table[a] < table[b]; });
  for (int i = 0; i < 15; ++i) {
    const float sum = table[s.code_of[i]] + table[s.code_of[i + 1]];
    s.bounds[i] = sum / 2.0f;
  }
  return s;
}

const SortedTable& sorted_table(QuantKind kind) {
  static const SortedTable nf4 = sort_table(nf4_code());
  static const SortedTable fp4 = sort_table(fp4_code());
  return kind == QuantKind::NF4 ? nf4 : fp4;
}

// torch.bucketize(v, bounds): the number of bounds strictly below v, so a value exactly on a
// midpoint takes the lower code. NaN compares false everywhere and lands on the first code. All
// 15 bounds are counted, not only those before the first one at or above v (the same number, as
// they are sorted): a scan that stopped there mispredicted its exit on most values (4096² nf4 on
// one thread: 208 -> 142 ms; halving the bounds, four dependent steps a value, was slower still).
uint8_t nearest_4bit(float v, const SortedTable& t) {
  int below = 0;
  for (int i = 0; i < 15; ++i) below += t.bounds[i] < v ? 1 : 0;
  return t.code_of[below];
}

template <QuantKind kKind>
void quantize_4bit(const float* x, int64_t n, int64_t block, uint8_t* packed, float* absmax) {
  const SortedTable& table = sorted_table(kKind);
  const int64_t full_blocks = n / block;
  auto code_of = [&](float scaled) { return nearest_4bit(std::clamp(scaled, -1.0f, 1.0f), table); };
  std::fill(packed, packed + (n + 1) / 2, uint8_t{0});
  auto put = [&](int64_t i, uint8_t code) { packed[i / 2] |= i % 2 == 0 ? static_cast<uint8_t>(code << 4) : code; };
  for (int64_t b = 0; b < full_blocks; ++b) {
    const float* xb = x + b * block;
    absmax[b] = absmax_of(xb, block);
    // Full blocks: multiply by the reciprocal of absmax (floored at 1e-38 so zeros stay zeros).
    const float inverse = 1.0f / std::max(absmax[b], 1e-38f);
    for (int64_t i = 0; i < block; ++i) {
      const float scaled = xb[i] * inverse;
      put(b * block + i, code_of(scaled));
    }
  }
  if (const int64_t rest = n - full_blocks * block; rest > 0) {
    // The partial last block divides instead, and keeps its floored absmax.
    const float* xb = x + full_blocks * block;
    const float am = std::max(absmax_of(xb, rest), 1e-38f);
    absmax[full_blocks] = am;
    for (int64_t i = 0; i < rest; ++i) {
      const float scaled = xb[i] / am;
      put(full_blocks * block + i, code_of(scaled));
    }
  }
  // An odd count pads one code for the value 0.
  if (n % 2 == 1) put(n, nearest_4bit(0.0f, table));
}

template <QuantKind kKind>
void dequantize_4bit(const uint8_t* packed, const float* absmax, int64_t n, int64_t block, float* out) {
  const std::array<float, 16>& table = table_4bit_decode(kKind);
  for (int64_t start = 0; start < n; start += block) {  // block by block: no division per value
    const float a = absmax[start / block];
    for (int64_t i = start; i < std::min(n, start + block); ++i) {
      const uint8_t byte = packed[i / 2];
      const uint8_t code = i % 2 == 0 ? byte >> 4 : byte & 0x0F;
      out[i] = table[code] * a;
    }
  }
}

// ---- 8-bit dynamic: bitsandbytes' CPU kernel, which looks codes up in a 65536-entry table ----

constexpr int kLutSize = 65536;

// Entry i covers the normalized value -1 + 2i/65535 and holds the code nearest to it (ties to the
// lower code), found by walking the midpoints between neighbouring codes.
std::array<uint8_t, kLutSize> build_dynamic_lut() {
  const std::array<float, 256>& code = dynamic_code();
  std::array<float, 255> mid{};
  for (int i = 0; i < 255; ++i) {
    const float sum = code[i] + code[i + 1];
    mid[i] = 0.5f * sum;
  }
  std::array<uint8_t, kLutSize> lut{};
  int c = 0;
  for (int i = 0; i < kLutSize; ++i) {
    const float twice = 2.0f * static_cast<float>(i);
    const float frac = twice / static_cast<float>(kLutSize - 1);
    const float v = -1.0f + frac;
    while (c < 255 && mid[c] < v) ++c;
    lut[i] = static_cast<uint8_t>(c);
  }
  return lut;
}

uint8_t dynamic_code_of(float normalized) {
  static const std::array<uint8_t, kLutSize> lut = build_dynamic_lut();
  if (std::isnan(normalized)) return lut[0];
  const float v = std::clamp(normalized, -1.0f, 1.0f);
  const float half = (v + 1.0f) * 0.5f;  // exact: a power-of-two scale
  const float rounded = std::fma(half, static_cast<float>(kLutSize - 1), 0.5f);
  return lut[static_cast<uint16_t>(rounded)];
}

void quantize_dynamic(const float* x, int64_t n, int64_t block, uint8_t* codes, float* absmax) {
  for (int64_t start = 0, b = 0; start < n; start += block, ++b) {
    const int64_t len = std::min(block, n - start);
    float m = 0.0f;
    for (int64_t i = 0; i < len; ++i) m = std::max(m, std::fabs(x[start + i]));  // NaN is skipped
    absmax[b] = m;
    if (m == 0.0f) {
      std::fill(codes + start, codes + start + len, uint8_t{0});
      continue;
    }
    const float inverse = 1.0f / m;
    for (int64_t i = 0; i < len; ++i) {
      const float normalized = x[start + i] * inverse;
      codes[start + i] = dynamic_code_of(normalized);
    }
  }
}

void dequantize_dynamic(const uint8_t* codes, const float* absmax, int64_t n, int64_t block, float* out) {
  const std::array<float, 256>& code = dynamic_code();
  for (int64_t start = 0; start < n; start += block) {  // block by block: no division per value
    const float a = absmax[start / block];
    for (int64_t i = start; i < std::min(n, start + block); ++i) out[i] = code[codes[i]] * a;
  }
}

// ---- LLM.int8() rows ----

// round-half-even(x · (127 / absmax)) as a signed byte; a zero row gives zeros. PyTorch evaluates
// `127.0 / tensor` as reciprocal(tensor) · 127, two roundings, and so does this.
void quantize_int8_rows(const float* x, int64_t n, int64_t row, uint8_t* codes, float* absmax) {
  for (int64_t start = 0, r = 0; start < n; start += row, ++r) {
    const int64_t len = std::min(row, n - start);
    absmax[r] = absmax_of(x + start, len);
    const float reciprocal = 1.0f / absmax[r];
    const float scale = reciprocal * 127.0f;
    if (!(absmax[r] > 0.0f) || !std::isfinite(absmax[r]) || !std::isfinite(scale)) {
      // A zero row (0 · inf), or one holding NaN or Inf (x · 0 would be NaN for the Inf itself),
      // or one too small for its scale to be finite: PyTorch's int8 cast of NaN gives 0.
      std::fill(codes + start, codes + start + len, uint8_t{0});
      continue;
    }
    // |x| <= absmax, so every product lies in [-127, 127] (to within rounding), well inside
    // round_half_even's range.
    for (int64_t i = 0; i < len; ++i) {
      const float q = round_half_even(x[start + i] * scale);
      codes[start + i] = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int32_t>(q)));
    }
  }
}

// code · absmax · (1/127), in that order (bitsandbytes' int8_vectorwise_dequant). Row by row, so
// the loop vectorises (a division per value to find its row was most of the time).
void dequantize_int8_rows(const uint8_t* codes, const float* absmax, int64_t n, int64_t row, float* out) {
  constexpr float kInverse127 = 7.874015718698502e-3f;
  for (int64_t start = 0, r = 0; start < n; start += row, ++r) {
    const int64_t len = std::min(row, n - start);
    const float a = absmax[r];
    for (int64_t i = start; i < start + len; ++i) {
      const float scaled = static_cast<float>(static_cast<int8_t>(codes[i])) * a;
      out[i] = scaled * kInverse127;
    }
  }
}

constexpr QuantFormat kQuantFormats[] = {
    {QuantKind::NF4, "nf4", 4, 64, 32, 4096, quantize_4bit<QuantKind::NF4>, dequantize_4bit<QuantKind::NF4>},
    {QuantKind::FP4, "fp4", 4, 64, 32, 4096, quantize_4bit<QuantKind::FP4>, dequantize_4bit<QuantKind::FP4>},
    {QuantKind::Int8Dynamic, "int8_dynamic", 8, 4096, 64, 4096, quantize_dynamic, dequantize_dynamic},
    {QuantKind::LlmInt8, "llm_int8", 8, 0, 1, int64_t{1} << 40, quantize_int8_rows, dequantize_int8_rows},
};

std::string format_names() {
  std::string names;
  for (const QuantFormat& f : kQuantFormats) names += (names.empty() ? "" : ", ") + std::string(f.name);
  return names;
}

}  // namespace

std::span<const QuantFormat> quant_formats() { return kQuantFormats; }

const std::array<float, 16>& table_4bit_decode(QuantKind kind) {
  WEFT_CHECK(kind == QuantKind::NF4 || kind == QuantKind::FP4, "[table_4bit_decode] expected nf4 or fp4");
  return kind == QuantKind::NF4 ? nf4_code() : fp4_cpu_decode_code();
}

Table4bitSearch table_4bit_search(QuantKind kind) {
  WEFT_CHECK(kind == QuantKind::NF4 || kind == QuantKind::FP4, "[table_4bit_search] expected nf4 or fp4");
  const SortedTable& t = sorted_table(kind);
  return {t.bounds.data(), t.code_of.data()};
}

float absmax_of(const float* x, int64_t n) {
  // On the bits of |x|, integer order is float order, with every NaN above infinity: an integer
  // max (which vectorises, unlike a NaN-aware float one) finds the largest magnitude or a NaN.
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t magnitude = std::bit_cast<uint32_t>(x[i]) & 0x7FFFFFFFu;
    m = magnitude > m ? magnitude : m;
  }
  return std::bit_cast<float>(m);
}

const QuantFormat& quant_format(QuantKind kind) {
  weft::detail::check_enum(kind, static_cast<int>(std::size(kQuantFormats)), "quant_format", "QuantKind");
  return kQuantFormats[static_cast<int>(kind)];
}

const QuantFormat& quant_format(std::string_view name) {
  for (const QuantFormat& f : kQuantFormats)
    if (f.name == name) return f;
  WEFT_FAIL("[quant_format] expected one of ", format_names(), ", got '", name, "'");
}

int64_t quantized_bytes(const QuantFormat& format, int64_t n, int64_t block) {
  const int64_t blocks = (n + block - 1) / block;
  return (n * format.bits + 7) / 8 + blocks * 4;
}

void check_block_size(const QuantFormat& format, int64_t block, std::string_view op) {
  const bool power_of_two = block > 0 && (block & (block - 1)) == 0;
  if (format.kind == QuantKind::LlmInt8) {
    WEFT_CHECK(block > 0, "[", op, "] llm_int8 rows must hold at least one value, got ", block);
    return;
  }
  WEFT_CHECK(power_of_two && block >= format.min_block_size && block <= format.max_block_size, "[", op, "] ",
             format.name, " block size must be a power of two in [", format.min_block_size, ", ",
             format.max_block_size, "], got ", block);
}

}  // namespace weft::precision::quant
