// Storage ↔ compute conversions for CPU kernels.
//
// A kernel computes narrow floats (float16, bfloat16, float8) in float32 and every other dtype in
// its own type (Compute<T>). It converts as it reads: load_chunk widens up to kChunk values of a
// strided run into a buffer on the kernel's stack, store_chunk rounds them back (to nearest even)
// as it writes. So no kernel needs a widened copy of a whole tensor, and narrow values are rounded
// exactly once, on store. Contiguous float32 <-> float16 / bfloat16 runs take AVX2 kernels chosen
// at run time, bit-identical to float_formats (tests/tensor/test_float_formats.cpp).
//
// Note [Conversion semantics]: floating -> floating rounds to nearest even (narrow formats via
// tensor/float_formats.h; float64 -> narrow goes through float32, as PyTorch's casts do).
// Floating -> integer truncates toward zero, saturates at the int64 range (NaN gives 0) and then
// wraps to the target width, which matches PyTorch on x86 for every value that fits in int64.
// Integer -> integer wraps. Anything -> bool is `value != 0` (NaN is true).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>


#include "tensor/cpu/convert_kernels.h"
#include "tensor/cpu/isa.h"
#include "tensor/dtype.h"
#include "tensor/error.h"

namespace weft::detail {

// The type a kernel computes storage type T in.
template <class T>
using Compute = std::conditional_t<kIsNarrowFloat<T>, float, T>;

// Values per conversion chunk: small enough for the stack, long enough to vectorise.
inline constexpr int64_t kChunk = 256;

inline int64_t saturating_trunc(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return static_cast<int64_t>(v);
}

// One value of storage type Src as storage type Dst (Note [Conversion semantics]).
template <class Dst, class Src>
Dst convert(Src s) {
  if constexpr (std::is_same_v<Dst, Src>) {
    return s;
  } else if constexpr (kIsNarrowFloat<Src>) {
    return convert<Dst>(to_float(s));
  } else if constexpr (kIsNarrowFloat<Dst>) {
    return from_float<Dst>(static_cast<float>(s));
  } else if constexpr (std::is_same_v<Dst, bool>) {
    return s != Src(0);
  } else if constexpr (std::is_integral_v<Dst> && std::is_floating_point_v<Src>) {
    return static_cast<Dst>(saturating_trunc(static_cast<double>(s)));
  } else {
    return static_cast<Dst>(s);
  }
}

// Contiguous float32 <-> float16 / bfloat16 runs take a vector kernel where the CPU has AVX2 and
// F16C, bfloat16 ones an AVX-512 kernel where it has that (tensor/cpu/convert_kernels.h, chosen at
// run time); it gives the same bits as convert().
// Returns false when there is none for this pair or level.
template <class Dst, class Src>
bool convert_contiguous_vector(Dst* d, const Src* s, int64_t n) {
  constexpr bool kToBits = std::is_same_v<Src, float> && (std::is_same_v<Dst, Half> || std::is_same_v<Dst, BFloat16>);
  constexpr bool kFromBits = std::is_same_v<Dst, float> && (std::is_same_v<Src, Half> || std::is_same_v<Src, BFloat16>);
  if constexpr (kToBits || kFromBits) {
    const CpuIsa isa = cpu_isa();
    if (isa < CpuIsa::Avx2) return false;
    const bool avx512 = isa >= CpuIsa::Avx512;
    if constexpr (kToBits) {
      auto* bits = reinterpret_cast<uint16_t*>(d);
      if constexpr (std::is_same_v<Dst, Half>) float_to_half_avx2(s, bits, n);
      else (avx512 ? float_to_bfloat16_avx512 : float_to_bfloat16_avx2)(s, bits, n);
    } else {
      const auto* bits = reinterpret_cast<const uint16_t*>(s);
      if constexpr (std::is_same_v<Src, Half>) half_to_float_avx2(bits, d, n);
      else (avx512 ? bfloat16_to_float_avx512 : bfloat16_to_float_avx2)(bits, d, n);
    }
    return true;
  }
  return false;
}

// n values of storage type Dst at d (byte stride dst_stride) from storage type Src at s.
template <class Dst, class Src>
void convert_run(char* d, int64_t dst_stride, const char* s, int64_t src_stride, int64_t n) {
  if (dst_stride == sizeof(Dst) && src_stride == sizeof(Src)) {
    Dst* dp = reinterpret_cast<Dst*>(d);
    const Src* sp = reinterpret_cast<const Src*>(s);
    if (convert_contiguous_vector(dp, sp, n)) return;
    for (int64_t i = 0; i < n; ++i) dp[i] = convert<Dst>(sp[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    Src v;
    std::memcpy(&v, s + i * src_stride, sizeof(Src));
    const Dst r = convert<Dst>(v);
    std::memcpy(d + i * dst_stride, &r, sizeof(Dst));
  }
}

// Widens n (≤ kChunk) values of storage type T, `stride` bytes apart, into buf.
template <class T>
void load_chunk(const char* p, int64_t stride, int64_t n, Compute<T>* buf) {
  convert_run<Compute<T>, T>(reinterpret_cast<char*>(buf), sizeof(Compute<T>), p, stride, n);
}

// Rounds n values from buf into storage type T, `stride` bytes apart.
template <class T>
void store_chunk(char* p, int64_t stride, int64_t n, const Compute<T>* buf) {
  convert_run<T, Compute<T>>(p, stride, reinterpret_cast<const char*>(buf), sizeof(Compute<T>), n);
}

// load_chunk / store_chunk for a dtype known only at run time: float32 or a narrow float. A kernel
// serves every narrow format with one float32 loop through these, looked up once per call, instead
// of one copy of the loop per format (tensor/cpu/convert.cpp).
using FloatChunkLoad = void (*)(const char* p, int64_t stride, int64_t n, float* buf);
using FloatChunkStore = void (*)(char* p, int64_t stride, int64_t n, const float* buf);
FloatChunkLoad float_chunk_load(DType d);
FloatChunkStore float_chunk_store(DType d);

// Calls fn(S{}) with S the storage type of a floating dtype (narrow or not); `op` names the caller
// when d is not floating.
template <class Fn>
void visit_floating_storage(DType d, const char* op, Fn&& fn) {
  WEFT_CHECK(is_floating(d), "[", op, "] internal: expected a floating dtype, got ", d);
  visit_dtype(d, [&](auto tag) {
    using S = decltype(tag);
    if constexpr (std::is_floating_point_v<S> || kIsNarrowFloat<S>) fn(tag);
  });
}

}  // namespace weft::detail
