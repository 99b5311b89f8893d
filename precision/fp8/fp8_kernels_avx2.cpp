// FP8 cast kernels for AVX2 (8 float lanes), bit-exact with the scalar reference
// (fp8_kernels_scalar.cpp). An ISA kernel unit: see Note [ISA kernel units] in tensor/cpu/simd.h.
//
// Encoding a float v to an FP8 code with round-to-nearest-even, without a per-element branch:
//   normal range   the float's bits already hold (exponent, mantissa); adding half an FP8 ulp
//                  minus one plus the lowest kept bit, then shifting the dropped bits out, rounds
//                  to nearest even, and a carry out of the mantissa lands in the exponent as it
//                  should. Rebiasing the exponent is one subtraction on the shifted bits.
//   subnormal      |v| + M, where M is the power of two whose float ulp is the FP8 subnormal step
//                  (2^14 for E4M3: ulp 2^-9; 2^7 for E5M2: ulp 2^-16), is rounded by the FPU to
//                  nearest even on exactly that grid, so its low mantissa bits are the code.
//   then           codes past the largest finite one become the overflow code, NaN the NaN code,
//                  and the sign bit is put back on top.
// Decoding puts the code's exponent and mantissa into a float's fields and rebiases (normal
// codes); a subnormal code is its mantissa (an integer below 8) times the subnormal step, exactly.
#include "precision/fp8/fp8_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

// The constants of one format, named after the E4M3 / E5M2 layouts (quantization-fp8.md §B.3).
template <bool E5M2>
struct Layout {
  static constexpr int kDropped = E5M2 ? 21 : 20;            // float mantissa bits the code drops
  static constexpr int kRebias = E5M2 ? (127 - 15) << 2 : (127 - 7) << 3;
  static constexpr int kMinNormalBits = E5M2 ? 0x38800000 : 0x3C800000;  // 2^-14, 2^-6
  static constexpr float kSubnormalStep = E5M2 ? 1.52587890625e-05f : 0.001953125f;  // 2^-16, 2^-9
  static constexpr float kSubnormalGrid = E5M2 ? 128.0f : 16384.0f;
  static constexpr int kSubnormalGridBits = E5M2 ? 0x43000000 : 0x46800000;
  static constexpr int kMinNormalCode = E5M2 ? 0x04 : 0x08;
  static constexpr int kMaxCode = E5M2 ? 0x7B : 0x7E;
  static constexpr int kNonSaturatedOverflow = E5M2 ? 0x7C : 0x7F;  // Inf, or NaN (E4M3 has no Inf)
};

constexpr int kAbsMask = 0x7FFFFFFF;
constexpr int kFloatInf = 0x7F800000;
constexpr int kFloatQuietNan = 0x7FC00000;

__m256i set1(int v) { return _mm256_set1_epi32(v); }

template <bool BF16>
__m256 load8(const void* src, int64_t i) {
  if constexpr (BF16) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(src) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    return _mm256_loadu_ps(static_cast<const float*>(src) + i);
  }
}

// 8 codes (one per 32-bit lane) of x · scale.
template <bool E5M2>
__m256i encode8(__m256 x, __m256 scale, __m256i overflow_code) {
  using L = Layout<E5M2>;
  const __m256i u = _mm256_castps_si256(_mm256_mul_ps(x, scale));
  const __m256i mag = _mm256_and_si256(u, set1(kAbsMask));
  const __m256i sign = _mm256_srli_epi32(_mm256_andnot_si256(set1(kAbsMask), u), 24);
  const __m256i kept_lsb = _mm256_and_si256(_mm256_srli_epi32(mag, L::kDropped), set1(1));
  const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(mag, set1((1 << (L::kDropped - 1)) - 1)), kept_lsb);
  const __m256i normal = _mm256_sub_epi32(_mm256_srli_epi32(rounded, L::kDropped), set1(L::kRebias));
  const __m256 on_grid = _mm256_add_ps(_mm256_castsi256_ps(mag), _mm256_set1_ps(L::kSubnormalGrid));
  const __m256i subnormal = _mm256_sub_epi32(_mm256_castps_si256(on_grid), set1(L::kSubnormalGridBits));
  __m256i code = _mm256_blendv_epi8(normal, subnormal, _mm256_cmpgt_epi32(set1(L::kMinNormalBits), mag));
  code = _mm256_blendv_epi8(code, overflow_code, _mm256_cmpgt_epi32(code, set1(L::kMaxCode)));
  code = _mm256_blendv_epi8(code, set1(0x7F), _mm256_cmpgt_epi32(mag, set1(kFloatInf)));
  return _mm256_or_si256(code, sign);
}

// The float32 bits of 8 codes' values (NaN as the quiet NaN with the code's sign, as the scalar
// decoder and .to(kFloat32) give it).
template <bool E5M2>
__m256i decode8(__m256i code) {
  using L = Layout<E5M2>;
  const __m256i mag = _mm256_and_si256(code, set1(0x7F));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(code, set1(0x80)), 24);
  const __m256i rebiased = _mm256_add_epi32(_mm256_slli_epi32(mag, L::kDropped), set1(L::kRebias << L::kDropped));
  const __m256 normal = _mm256_castsi256_ps(rebiased);
  const __m256 subnormal = _mm256_mul_ps(_mm256_cvtepi32_ps(mag), _mm256_set1_ps(L::kSubnormalStep));
  const __m256i is_subnormal = _mm256_cmpgt_epi32(set1(L::kMinNormalCode), mag);
  __m256i bits = _mm256_castps_si256(_mm256_blendv_ps(normal, subnormal, _mm256_castsi256_ps(is_subnormal)));
  if constexpr (E5M2) bits = _mm256_blendv_epi8(bits, set1(kFloatInf), _mm256_cmpeq_epi32(mag, set1(0x7C)));
  bits = _mm256_blendv_epi8(bits, set1(kFloatQuietNan), _mm256_cmpgt_epi32(mag, set1(L::kMaxCode + (E5M2 ? 1 : 0))));
  return _mm256_or_si256(bits, sign);
}

// float32 bits -> bfloat16 bits in the low half of each lane, as float_to_bfloat16.
__m256i to_bf16(__m256i u) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), set1(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, set1(0x7FFF)), lsb), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, set1(kAbsMask)), set1(kFloatInf));
  return _mm256_blendv_epi8(rounded, set1(0x7FC0), nan);
}

// 32 codes held one per 32-bit lane in c[0..3] -> 32 bytes in order.
__m256i pack_bytes(const __m256i c[4]) {
  const __m256i words = _mm256_packus_epi16(_mm256_packus_epi32(c[0], c[1]), _mm256_packus_epi32(c[2], c[3]));
  return _mm256_permutevar8x32_epi32(words, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// 16 values held one per 32-bit lane (< 2^16) in a, b -> 16 uint16 in order.
__m256i pack_words(__m256i a, __m256i b) { return _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8); }

int horizontal_max(__m256i v) {
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  int32_t m = lanes[0];
  for (int i = 1; i < 8; ++i) m = lanes[i] > m ? lanes[i] : m;
  return m;
}

float float_of_bits(int bits) { return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(bits))); }

// The largest magnitude's bits; the integer order of non-negative float bits is the float order
// and puts every NaN above Inf, so a NaN survives (Note [FP8 amax]).
__m256i max_magnitude(__m256i running, __m256 x) {
  return _mm256_max_epi32(running, _mm256_and_si256(_mm256_castps_si256(x), set1(kAbsMask)));
}

constexpr int64_t kBlock = 32;

// One block of 32 elements at src + i.
template <bool E5M2, bool BF16>
[[gnu::always_inline]] inline void encode_block(const void* src, int64_t i, uint8_t* codes, uint16_t* decoded,
                                               __m256 scale, __m256i overflow, __m256i& amax) {
  __m256i c[4];
  for (int k = 0; k < 4; ++k) {
    const __m256 x = load8<BF16>(src, i + 8 * k);
    amax = max_magnitude(amax, x);
    c[k] = encode8<E5M2>(x, scale, overflow);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes), pack_bytes(c));
  if (decoded == nullptr) return;
  for (int k = 0; k < 4; k += 2) {
    const __m256i a = to_bf16(decode8<E5M2>(c[k])), b = to_bf16(decode8<E5M2>(c[k + 1]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(decoded + 8 * k), pack_words(a, b));
  }
}

template <bool E5M2, bool BF16>
float encode(const Fp8EncodeArgs a) {  // by value: the output stores cannot alias it
  using L = Layout<E5M2>;
  const __m256 scale = _mm256_set1_ps(a.scale);
  const __m256i overflow = set1(a.saturate ? L::kMaxCode : L::kNonSaturatedOverflow);
  __m256i amax = _mm256_setzero_si256();
  const int64_t full = a.n - a.n % kBlock;
  const int64_t item = BF16 ? 2 : 4;
  for (int64_t i = 0; i < full; i += kBlock)
    encode_block<E5M2, BF16>(a.src, i, a.codes + i, a.decoded ? a.decoded + i : nullptr, scale, overflow, amax);
  if (full < a.n) {  // the tail through zero-padded buffers (zeros do not change the amax)
    const int64_t rest = a.n - full;
    alignas(32) uint8_t src[kBlock * 4] = {};
    alignas(32) uint8_t codes[kBlock];
    alignas(32) uint16_t decoded[kBlock];
    const uint8_t* from = static_cast<const uint8_t*>(a.src) + full * item;
    for (int64_t b = 0; b < rest * item; ++b) src[b] = from[b];
    encode_block<E5M2, BF16>(src, 0, codes, a.decoded ? decoded : nullptr, scale, overflow, amax);
    for (int64_t j = 0; j < rest; ++j) {
      a.codes[full + j] = codes[j];
      if (a.decoded) a.decoded[full + j] = decoded[j];
    }
  }
  return float_of_bits(horizontal_max(amax));
}

// What a decode writes: float32 values · scale_inv, those rounded to bfloat16, or (scale_inv = 1)
// the exact bfloat16 values, which need no product (their rounding only makes a NaN the canonical
// bfloat16 NaN, as float_to_bfloat16 does).
enum class Output { F32, Bf16, Bf16Exact };

// 16 codes at codes[0..16) -> 16 outputs.
template <bool E5M2, Output OUT>
[[gnu::always_inline]] inline void decode_block(const uint8_t* codes, void* out, __m256 scale_inv) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes));
  __m256i v[2] = {decode8<E5M2>(_mm256_cvtepu8_epi32(bytes)),
                  decode8<E5M2>(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8)))};
  if constexpr (OUT == Output::Bf16Exact) {
    const __m256i words = pack_words(to_bf16(v[0]), to_bf16(v[1]));
    _mm256_storeu_si256(static_cast<__m256i*>(out), words);
    return;
  }
  for (__m256i& x : v) x = _mm256_castps_si256(_mm256_mul_ps(_mm256_castsi256_ps(x), scale_inv));
  if constexpr (OUT == Output::F32) {
    _mm256_storeu_si256(static_cast<__m256i*>(out), v[0]);
    _mm256_storeu_si256(static_cast<__m256i*>(out) + 1, v[1]);
  } else {
    _mm256_storeu_si256(static_cast<__m256i*>(out), pack_words(to_bf16(v[0]), to_bf16(v[1])));
  }
}

template <bool E5M2, Output OUT>
void decode(const uint8_t* codes, void* out, int64_t n, float scale_inv) {
  constexpr int64_t kStep = 16;
  constexpr int64_t kItem = OUT == Output::F32 ? 4 : 2;
  const __m256 scale = _mm256_set1_ps(scale_inv);
  auto* dst = static_cast<uint8_t*>(out);
  const int64_t full = n - n % kStep;
  for (int64_t i = 0; i < full; i += kStep) decode_block<E5M2, OUT>(codes + i, dst + i * kItem, scale);
  if (full == n) return;
  alignas(32) uint8_t tail_codes[kStep] = {};
  alignas(32) uint8_t tail_out[kStep * kItem];
  for (int64_t j = 0; j < n - full; ++j) tail_codes[j] = codes[full + j];
  decode_block<E5M2, OUT>(tail_codes, tail_out, scale);
  for (int64_t b = 0; b < (n - full) * kItem; ++b) dst[full * kItem + b] = tail_out[b];
}

template <bool E5M2>
void decode_to(const Fp8DecodeArgs& a) {
  if (a.out_f32) decode<E5M2, Output::F32>(a.codes, a.out_f32, a.n, a.scale_inv);
  else if (a.scale_inv == 1.0f) decode<E5M2, Output::Bf16Exact>(a.codes, a.out_bf16, a.n, 1.0f);
  else decode<E5M2, Output::Bf16>(a.codes, a.out_bf16, a.n, a.scale_inv);
}

template <bool BF16>
float amax(const void* src, int64_t n) {
  __m256i m = _mm256_setzero_si256();
  const int64_t full = n - n % 8;
  for (int64_t i = 0; i < full; i += 8) m = max_magnitude(m, load8<BF16>(src, i));
  if (full < n) {
    alignas(32) uint8_t tail[8 * 4] = {};
    const int64_t item = BF16 ? 2 : 4;
    const uint8_t* from = static_cast<const uint8_t*>(src) + full * item;
    for (int64_t b = 0; b < (n - full) * item; ++b) tail[b] = from[b];
    m = max_magnitude(m, load8<BF16>(tail, 0));
  }
  return float_of_bits(horizontal_max(m));
}

// 8 values of one row: fma(acc, scale, bias) stored as float32 or bfloat16.
template <bool BF16_OUT>
[[gnu::always_inline]] inline void epilogue8(const float* acc, const float* bias, void* out, __m256 scale) {
  const __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(acc), scale, bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps());
  if constexpr (BF16_OUT) {
    const __m256i words = to_bf16(_mm256_castps_si256(v));
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
    _mm_storeu_si128(static_cast<__m128i*>(out), packed);
  } else {
    _mm256_storeu_ps(static_cast<float*>(out), v);
  }
}

template <bool BF16_OUT>
void epilogue(const Fp8EpilogueArgs a) {  // by value, as encode
  constexpr int64_t kItem = BF16_OUT ? 2 : 4;
  const __m256 scale = _mm256_set1_ps(a.scale);
  auto* out = BF16_OUT ? static_cast<void*>(a.out_bf16) : static_cast<void*>(a.out_f32);
  const int64_t full = a.cols - a.cols % 8;
  for (int64_t i = 0; i < a.rows; ++i) {
    const float* acc = a.acc + i * a.cols;
    auto* row = static_cast<uint8_t*>(out) + i * a.cols * kItem;
    for (int64_t j = 0; j < full; j += 8)
      epilogue8<BF16_OUT>(acc + j, a.bias ? a.bias + j : nullptr, row + j * kItem, scale);
    if (full == a.cols) continue;
    alignas(32) float tail_acc[8] = {}, tail_bias[8] = {};
    alignas(32) uint8_t tail_out[8 * kItem];
    for (int64_t j = full; j < a.cols; ++j) {
      tail_acc[j - full] = acc[j];
      tail_bias[j - full] = a.bias ? a.bias[j] : 0.0f;
    }
    epilogue8<BF16_OUT>(tail_acc, tail_bias, tail_out, scale);
    for (int64_t b = 0; b < (a.cols - full) * kItem; ++b) row[full * kItem + b] = tail_out[b];
  }
}

}  // namespace

float fp8_encode_avx2(const Fp8EncodeArgs& a) {
  if (a.e5m2) return a.src_bf16 ? encode<true, true>(a) : encode<true, false>(a);
  return a.src_bf16 ? encode<false, true>(a) : encode<false, false>(a);
}

void fp8_decode_avx2(const Fp8DecodeArgs& a) {
  if (a.e5m2) decode_to<true>(a);
  else decode_to<false>(a);
}

float fp8_amax_avx2(const void* src, bool src_bf16, int64_t n) {
  return src_bf16 ? amax<true>(src, n) : amax<false>(src, n);
}

void fp8_epilogue_avx2(const Fp8EpilogueArgs& a) {
  if (a.out_bf16) epilogue<true>(a);
  else epilogue<false>(a);
}

}  // namespace weft::detail
