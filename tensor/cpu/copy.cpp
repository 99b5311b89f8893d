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

#include "tensor/cpu/convert_kernels.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/isa.h"
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

// Contiguous float32 <-> float16 / bfloat16 runs take a vector kernel where the CPU has AVX2 and
// F16C (convert_kernels.h); it gives the same bits as the scalar conversions below. Returns false
// when there is none for this pair or level.
template <class Dst, class Src>
bool convert_contiguous_vector(Dst* d, const Src* s, int64_t n) {
  constexpr bool kToBits = std::is_same_v<Src, float> && (std::is_same_v<Dst, Half> || std::is_same_v<Dst, BFloat16>);
  constexpr bool kFromBits = std::is_same_v<Dst, float> && (std::is_same_v<Src, Half> || std::is_same_v<Src, BFloat16>);
  if constexpr (kToBits || kFromBits) {
    if (cpu_isa() < CpuIsa::Avx2) return false;
    if constexpr (kToBits) {
      auto* bits = reinterpret_cast<uint16_t*>(d);
      if constexpr (std::is_same_v<Dst, Half>) float_to_half_avx2(s, bits, n);
      else float_to_bfloat16_avx2(s, bits, n);
    } else {
      const auto* bits = reinterpret_cast<const uint16_t*>(s);
      if constexpr (std::is_same_v<Src, Half>) half_to_float_avx2(bits, d, n);
      else bfloat16_to_float_avx2(bits, d, n);
    }
    return true;
  }
  return false;
}

template <class Dst, class Src>
void convert_run(const StridedRun<2>& run) {
  char* d = run.ptr[0];
  const char* s = run.ptr[1];
  if (run.stride[0] == sizeof(Dst) && run.stride[1] == sizeof(Src)) {
    Dst* dp = reinterpret_cast<Dst*>(d);
    const Src* sp = reinterpret_cast<const Src*>(s);
    if (convert_contiguous_vector(dp, sp, run.n)) return;
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
