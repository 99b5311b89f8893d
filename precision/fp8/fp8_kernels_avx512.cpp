// FP8 cast kernels for AVX-512 F/BW/VL/DQ (16 float lanes), bit-exact with the scalar reference
// (fp8_kernels_scalar.cpp). An ISA kernel unit: see Note [ISA kernel units] in tensor/cpu/simd.h.
//
// The same arithmetic as the AVX2 unit (fp8_kernels_avx2.cpp explains the encoding), with mask
// registers for the selections and vpmovdb / vpmovdw to narrow the 32-bit lanes to bytes and
// words in order.
// GCC 12's AVX-512 intrinsics read their own placeholder operands and so trip -Wuninitialized
// wherever they are inlined (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "precision/fp8/fp8_kernels.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

template <bool E5M2>
struct Layout {
  static constexpr int kDropped = E5M2 ? 21 : 20;
  static constexpr int kRebias = E5M2 ? (127 - 15) << 2 : (127 - 7) << 3;
  static constexpr int kMinNormalBits = E5M2 ? 0x38800000 : 0x3C800000;
  static constexpr float kSubnormalStep = E5M2 ? 1.52587890625e-05f : 0.001953125f;  // 2^-16, 2^-9
  static constexpr float kSubnormalGrid = E5M2 ? 128.0f : 16384.0f;
  static constexpr int kSubnormalGridBits = E5M2 ? 0x43000000 : 0x46800000;
  static constexpr int kMinNormalCode = E5M2 ? 0x04 : 0x08;
  static constexpr int kMaxCode = E5M2 ? 0x7B : 0x7E;
  static constexpr int kNonSaturatedOverflow = E5M2 ? 0x7C : 0x7F;
};

constexpr int kAbsMask = 0x7FFFFFFF;
constexpr int kFloatInf = 0x7F800000;
constexpr int kFloatQuietNan = 0x7FC00000;
constexpr int64_t kLanes = 16;

__m512i set1(int v) { return _mm512_set1_epi32(v); }

template <bool BF16>
__m512 load16(const void* src, int64_t i) {
  if constexpr (BF16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(src) + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    return _mm512_loadu_ps(static_cast<const float*>(src) + i);
  }
}

template <bool E5M2>
__m512i encode16(__m512 x, __m512 scale, __m512i overflow_code) {
  using L = Layout<E5M2>;
  const __m512i u = _mm512_castps_si512(_mm512_mul_ps(x, scale));
  const __m512i mag = _mm512_and_si512(u, set1(kAbsMask));
  const __m512i sign = _mm512_srli_epi32(_mm512_andnot_si512(set1(kAbsMask), u), 24);
  const __m512i kept_lsb = _mm512_and_si512(_mm512_srli_epi32(mag, L::kDropped), set1(1));
  const __m512i rounded = _mm512_add_epi32(_mm512_add_epi32(mag, set1((1 << (L::kDropped - 1)) - 1)), kept_lsb);
  const __m512i normal = _mm512_sub_epi32(_mm512_srli_epi32(rounded, L::kDropped), set1(L::kRebias));
  const __m512 on_grid = _mm512_add_ps(_mm512_castsi512_ps(mag), _mm512_set1_ps(L::kSubnormalGrid));
  const __m512i subnormal = _mm512_sub_epi32(_mm512_castps_si512(on_grid), set1(L::kSubnormalGridBits));
  __m512i code = _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(set1(L::kMinNormalBits), mag), normal, subnormal);
  code = _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(code, set1(L::kMaxCode)), code, overflow_code);
  code = _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(mag, set1(kFloatInf)), code, set1(0x7F));
  return _mm512_or_si512(code, sign);
}

template <bool E5M2>
__m512i decode16(__m512i code) {
  using L = Layout<E5M2>;
  const __m512i mag = _mm512_and_si512(code, set1(0x7F));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(code, set1(0x80)), 24);
  const __m512i rebiased = _mm512_add_epi32(_mm512_slli_epi32(mag, L::kDropped), set1(L::kRebias << L::kDropped));
  const __m512 normal = _mm512_castsi512_ps(rebiased);
  const __m512 subnormal = _mm512_mul_ps(_mm512_cvtepi32_ps(mag), _mm512_set1_ps(L::kSubnormalStep));
  __m512i bits = _mm512_castps_si512(
      _mm512_mask_blend_ps(_mm512_cmpgt_epi32_mask(set1(L::kMinNormalCode), mag), normal, subnormal));
  if constexpr (E5M2) bits = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(mag, set1(0x7C)), bits, set1(kFloatInf));
  bits = _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(mag, set1(L::kMaxCode + (E5M2 ? 1 : 0))), bits,
                                 set1(kFloatQuietNan));
  return _mm512_or_si512(bits, sign);  // after the NaN blend: a negative NaN code decodes to -NaN
}

__m512i to_bf16(__m512i u) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), set1(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, set1(0x7FFF)), lsb), 16);
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, set1(kAbsMask)), set1(kFloatInf));
  return _mm512_mask_blend_epi32(nan, rounded, set1(0x7FC0));
}

int horizontal_max(__m512i v) {
  alignas(64) int32_t lanes[kLanes];
  _mm512_store_si512(lanes, v);
  int32_t m = lanes[0];
  for (int i = 1; i < kLanes; ++i) m = lanes[i] > m ? lanes[i] : m;
  return m;
}

float float_of_bits(int bits) { return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(bits))); }

__m512i max_magnitude(__m512i running, __m512 x) {
  return _mm512_max_epi32(running, _mm512_and_si512(_mm512_castps_si512(x), set1(kAbsMask)));
}

template <bool E5M2, bool BF16>
[[gnu::always_inline]] inline void encode_block(const void* src, int64_t i, uint8_t* codes, uint16_t* decoded,
                                               __m512 scale, __m512i overflow, __m512i& amax) {
  const __m512 x = load16<BF16>(src, i);
  amax = max_magnitude(amax, x);
  const __m512i c = encode16<E5M2>(x, scale, overflow);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), _mm512_cvtepi32_epi8(c));
  if (decoded)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(decoded),
                        _mm512_cvtepi32_epi16(to_bf16(decode16<E5M2>(c))));
}

template <bool E5M2, bool BF16>
float encode(const Fp8EncodeArgs a) {  // by value: the output stores cannot alias it
  using L = Layout<E5M2>;
  const __m512 scale = _mm512_set1_ps(a.scale);
  const __m512i overflow = set1(a.saturate ? L::kMaxCode : L::kNonSaturatedOverflow);
  __m512i amax = _mm512_setzero_si512();
  const int64_t full = a.n - a.n % kLanes;
  const int64_t item = BF16 ? 2 : 4;
  for (int64_t i = 0; i < full; i += kLanes)
    encode_block<E5M2, BF16>(a.src, i, a.codes + i, a.decoded ? a.decoded + i : nullptr, scale, overflow, amax);
  if (full < a.n) {  // the tail through zero-padded buffers (zeros do not change the amax)
    const int64_t rest = a.n - full;
    alignas(64) uint8_t src[kLanes * 4] = {};
    alignas(64) uint8_t codes[kLanes];
    alignas(64) uint16_t decoded[kLanes];
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

template <bool E5M2, Output OUT>
[[gnu::always_inline]] inline void decode_block(const uint8_t* codes, void* out, __m512 scale_inv) {
  const __m512i v = decode16<E5M2>(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes))));
  if constexpr (OUT == Output::Bf16Exact) {
    _mm256_storeu_si256(static_cast<__m256i*>(out), _mm512_cvtepi32_epi16(to_bf16(v)));
    return;
  }
  const __m512 scaled = _mm512_mul_ps(_mm512_castsi512_ps(v), scale_inv);
  if constexpr (OUT == Output::F32) _mm512_storeu_ps(out, scaled);
  else _mm256_storeu_si256(static_cast<__m256i*>(out), _mm512_cvtepi32_epi16(to_bf16(_mm512_castps_si512(scaled))));
}

template <bool E5M2, Output OUT>
void decode(const uint8_t* codes, void* out, int64_t n, float scale_inv) {
  constexpr int64_t kItem = OUT == Output::F32 ? 4 : 2;
  const __m512 scale = _mm512_set1_ps(scale_inv);
  auto* dst = static_cast<uint8_t*>(out);
  const int64_t full = n - n % kLanes;
  for (int64_t i = 0; i < full; i += kLanes) decode_block<E5M2, OUT>(codes + i, dst + i * kItem, scale);
  if (full == n) return;
  alignas(64) uint8_t tail_codes[kLanes] = {};
  alignas(64) uint8_t tail_out[kLanes * kItem];
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
  __m512i m = _mm512_setzero_si512();
  const int64_t full = n - n % kLanes;
  for (int64_t i = 0; i < full; i += kLanes) m = max_magnitude(m, load16<BF16>(src, i));
  if (full < n) {
    alignas(64) uint8_t tail[kLanes * 4] = {};
    const int64_t item = BF16 ? 2 : 4;
    const uint8_t* from = static_cast<const uint8_t*>(src) + full * item;
    for (int64_t b = 0; b < (n - full) * item; ++b) tail[b] = from[b];
    m = max_magnitude(m, load16<BF16>(tail, 0));
  }
  return float_of_bits(horizontal_max(m));
}

// 16 values of one row: fma(acc, scale, bias) stored as float32 or bfloat16.
template <bool BF16_OUT>
[[gnu::always_inline]] inline void epilogue16(const float* acc, const float* bias, void* out, __m512 scale) {
  const __m512 v = _mm512_fmadd_ps(_mm512_loadu_ps(acc), scale, bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps());
  if constexpr (BF16_OUT)
    _mm256_storeu_si256(static_cast<__m256i*>(out), _mm512_cvtepi32_epi16(to_bf16(_mm512_castps_si512(v))));
  else
    _mm512_storeu_ps(out, v);
}

template <bool BF16_OUT>
void epilogue(const Fp8EpilogueArgs a) {  // by value, as encode
  constexpr int64_t kItem = BF16_OUT ? 2 : 4;
  const __m512 scale = _mm512_set1_ps(a.scale);
  auto* out = BF16_OUT ? static_cast<void*>(a.out_bf16) : static_cast<void*>(a.out_f32);
  const int64_t full = a.cols - a.cols % kLanes;
  for (int64_t i = 0; i < a.rows; ++i) {
    const float* acc = a.acc + i * a.cols;
    auto* row = static_cast<uint8_t*>(out) + i * a.cols * kItem;
    for (int64_t j = 0; j < full; j += kLanes)
      epilogue16<BF16_OUT>(acc + j, a.bias ? a.bias + j : nullptr, row + j * kItem, scale);
    if (full == a.cols) continue;
    alignas(64) float tail_acc[kLanes] = {}, tail_bias[kLanes] = {};
    alignas(64) uint8_t tail_out[kLanes * kItem];
    for (int64_t j = full; j < a.cols; ++j) {
      tail_acc[j - full] = acc[j];
      tail_bias[j - full] = a.bias ? a.bias[j] : 0.0f;
    }
    epilogue16<BF16_OUT>(tail_acc, tail_bias, tail_out, scale);
    for (int64_t b = 0; b < (a.cols - full) * kItem; ++b) row[full * kItem + b] = tail_out[b];
  }
}

}  // namespace

float fp8_encode_avx512(const Fp8EncodeArgs& a) {
  if (a.e5m2) return a.src_bf16 ? encode<true, true>(a) : encode<true, false>(a);
  return a.src_bf16 ? encode<false, true>(a) : encode<false, false>(a);
}

void fp8_decode_avx512(const Fp8DecodeArgs& a) {
  if (a.e5m2) decode_to<true>(a);
  else decode_to<false>(a);
}

float fp8_amax_avx512(const void* src, bool src_bf16, int64_t n) {
  return src_bf16 ? amax<true>(src, n) : amax<false>(src, n);
}

void fp8_epilogue_avx512(const Fp8EpilogueArgs& a) {
  if (a.out_bf16) epilogue<true>(a);
  else epilogue<false>(a);
}

}  // namespace weft::detail
