// CPU copy with dtype conversion, fill, and the widening helpers the other CPU kernels share.
//
// Note [Conversion semantics]: floating -> floating rounds to nearest even (narrow formats via
// tensor/float_formats.h; float64 -> narrow goes through float32, as PyTorch's casts do).
// Floating -> integer truncates toward zero, saturates at the int64 range (NaN gives 0) and then
// wraps to the target width, which matches PyTorch on x86 for every value that fits in int64.
// Integer -> integer wraps. Anything -> bool is `value != 0` (NaN is true).
#include <cmath>
#include <cstring>
#include <type_traits>

#ifdef __F16C__
#include <immintrin.h>
#endif

#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/loops.h"

namespace weft::detail {
namespace {

int64_t saturating_trunc(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return static_cast<int64_t>(v);
}

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

#ifdef __F16C__
// Where the CPU has F16C, contiguous float32 <-> float16 runs convert 8 values per instruction.
// F16C rounds to nearest even and keeps NaN quiet exactly as float_to_half / half_to_float do
// (tests/tensor/test_float_formats.cpp checks every code against it); the tail goes one by one.
void convert_contiguous(Half* d, const float* s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) d[i] = Half{float_to_half(s[i])};
}

void convert_contiguous(float* d, const Half* s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  for (; i < n; ++i) d[i] = half_to_float(s[i].bits);
}
#endif

template <class Dst, class Src>
void convert_run(const StridedRun<2>& run) {
  char* d = run.ptr[0];
  const char* s = run.ptr[1];
  if (run.stride[0] == sizeof(Dst) && run.stride[1] == sizeof(Src)) {
    Dst* dp = reinterpret_cast<Dst*>(d);
    const Src* sp = reinterpret_cast<const Src*>(s);
#ifdef __F16C__
    constexpr bool kFloatHalf = (std::is_same_v<Dst, Half> && std::is_same_v<Src, float>) ||
                                (std::is_same_v<Dst, float> && std::is_same_v<Src, Half>);
    if constexpr (kFloatHalf) return convert_contiguous(dp, sp, run.n);
#endif
    for (int64_t i = 0; i < run.n; ++i) dp[i] = convert<Dst>(sp[i]);
    return;
  }
  for (int64_t i = 0; i < run.n; ++i) {
    Src v;
    std::memcpy(&v, s + i * run.stride[1], sizeof(Src));
    const Dst r = convert<Dst>(v);
    std::memcpy(d + i * run.stride[0], &r, sizeof(Dst));
  }
}

}  // namespace

void CpuBackend::copy(const Tensor& src, const Tensor& dst) {
  WEFT_CHECK(src.shape() == dst.shape(), "[copy] internal: shapes differ: ", src.shape(), " vs ", dst.shape());
  if (dst.numel() == 0) return;
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    const int64_t bytes = static_cast<int64_t>(dst.nbytes());
    const int64_t chunks = bytes >= (1 << 22) ? num_threads() : 1;
    char* d = byte_ptr(dst);
    const char* s = byte_ptr(src);
    parallel_for(chunks, [&](int64_t c) {
      const int64_t begin = bytes * c / chunks, end = bytes * (c + 1) / chunks;
      std::memcpy(d + begin, s + begin, static_cast<size_t>(end - begin));
    });
    return;
  }
  WEFT_DISPATCH_ALL(dst.dtype(), Dst, WEFT_DISPATCH_ALL(src.dtype(), Src, {
    for_each_strided<2>({&dst, &src}, [](const StridedRun<2>& run) { convert_run<Dst, Src>(run); });
  }));
}

void CpuBackend::fill(const Tensor& dst, double value) {
  WEFT_DISPATCH_ALL(dst.dtype(), T, {
    const T v = convert<T>(value);
    for_each_strided<1>({&dst}, [v](const StridedRun<1>& run) {
      for (int64_t i = 0; i < run.n; ++i) std::memcpy(run.ptr[0] + i * run.stride[0], &v, sizeof(T));
    });
  });
}

Tensor widen_if_narrow(const Tensor& t) {
  if (!is_narrow_float(t.dtype())) return t;
  Tensor wide = make_tensor(t.shape(), kFloat32, t.device());
  CpuBackend().copy(t, wide);
  return wide;
}

Tensor compute_target(const Tensor& out) {
  return is_narrow_float(out.dtype()) ? make_tensor(out.shape(), kFloat32, out.device()) : out;
}

void store_from(const Tensor& scratch, const Tensor& out) {
  if (!scratch.is_same(out)) CpuBackend().copy(scratch, out);
}

void check_index(int64_t index, int64_t n, const char* op) {
  WEFT_CHECK(index >= 0 && index < n, "[", op, "] index ", index, " is out of bounds for size ", n);
}

}  // namespace weft::detail
