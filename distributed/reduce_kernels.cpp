// Reduction loops for collectives. Plain loops, no intrinsics: they run over buffers that just
// came off the network, and with the operator chosen outside the loop the compiler vectorises them.
#include "distributed/reduce_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tensor/error.h"
#include "tensor/float_formats.h"

namespace weft::distributed::detail {
namespace {

// How a stored element widens to the type it is combined in, and narrows back.
template <class T>
struct Widen {
  using Acc = T;
  static Acc load(T v) { return v; }
  static T store(Acc v) { return v; }
};
template <>
struct Widen<Half> {
  using Acc = float;
  static float load(Half v) { return half_to_float(v.bits); }
  static Half store(float v) { return Half{float_to_half(v)}; }
};
template <>
struct Widen<BFloat16> {
  using Acc = float;
  static float load(BFloat16 v) { return bfloat16_to_float(v.bits); }
  static BFloat16 store(float v) { return BFloat16{float_to_bfloat16(v)}; }
};

// Note [Max and min of floats on every rank]: std::max(a, b) returns a when b is NaN and b when
// a is, so two ranks combining "own, peer's" would disagree where one of them holds a NaN, and a
// NaN (an overflowed gradient norm, an FP8 amax) would vanish on one of them. As torch.maximum
// does, a NaN wins; and −0 counts as less than +0 (IEEE 754-2019 maximum / minimum), so the
// result's bits do not depend on the order of the operands either.
//
// extreme<true> is that max, extreme<false> that min.
template <bool kMax, class Acc>
Acc extreme(Acc a, Acc b) {
  if constexpr (std::is_floating_point_v<Acc>) {
    if (a != a) return a;
    if (b != b) return b;
    if (a == b) return std::signbit(a) == kMax ? b : a;  // ±0: max takes +0, min −0
  }
  return (kMax ? a < b : b < a) ? b : a;
}

// Calls f with the binary function of `op`, chosen once per call rather than per element so
// that the loops below compile to vector code.
template <class Acc, class F>
void with_op(ReduceOp op, F&& f) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return f([](Acc a, Acc b) { return a + b; });
    case ReduceOp::Max: return f([](Acc a, Acc b) { return extreme<true>(a, b); });
    case ReduceOp::Min: return f([](Acc a, Acc b) { return extreme<false>(a, b); });
  }
}

template <class T>
void combine_typed(ReduceOp op, void* out, const void* a, const void* b, size_t n) {
  using W = Widen<T>;
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  with_op<typename W::Acc>(op, [&](auto apply) {
    for (size_t i = 0; i < n; ++i) o[i] = W::store(apply(W::load(x[i]), W::load(y[i])));
  });
}

template <class T>
void reduce_blocks_typed(ReduceOp op, void* out, const void* in, size_t blocks, size_t n) {
  using W = Widen<T>;
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(in);
  with_op<typename W::Acc>(op, [&](auto apply) {
    for (size_t i = 0; i < n; ++i) {
      typename W::Acc acc = W::load(x[i]);
      for (size_t r = 1; r < blocks; ++r) acc = apply(acc, W::load(x[r * n + i]));
      if (op == ReduceOp::Avg) acc = static_cast<typename W::Acc>(acc / static_cast<typename W::Acc>(blocks));
      o[i] = W::store(acc);
    }
  });
}

// Calls f with a function that divides an Acc by `divisor`. Dividing by a power of two is
// multiplying by its exact reciprocal (same rounding, and a multiply vectorises cheaply); other
// divisors divide.
template <class Acc, class F>
void with_divisor(double divisor, F&& f) {
  const auto d = static_cast<Acc>(divisor);
  const auto bits = static_cast<uint64_t>(divisor);
  if (std::is_floating_point_v<Acc> && static_cast<double>(bits) == divisor && bits > 0 && (bits & (bits - 1)) == 0) {
    const Acc reciprocal = Acc(1) / d;
    return f([reciprocal](Acc v) { return static_cast<Acc>(v * reciprocal); });
  }
  f([d](Acc v) { return static_cast<Acc>(v / d); });
}

template <class T>
void divide_typed(void* x, size_t n, double divisor) {
  using W = Widen<T>;
  auto* p = static_cast<T*>(x);
  with_divisor<typename W::Acc>(divisor, [&](auto divide) {
    for (size_t i = 0; i < n; ++i) p[i] = W::store(divide(W::load(p[i])));
  });
}

// The sum is rounded to T before it is divided, so the bits are those of combine then divide.
template <class T>
void sum_and_divide_typed(void* out, const void* a, const void* b, size_t n, double divisor) {
  using W = Widen<T>;
  auto* o = static_cast<T*>(out);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  with_divisor<typename W::Acc>(divisor, [&](auto divide) {
    for (size_t i = 0; i < n; ++i) o[i] = W::store(divide(W::load(W::store(W::load(x[i]) + W::load(y[i])))));
  });
}

template <class From, class To>
void cast_and_divide_typed(const void* in, void* out, size_t n, double divisor) {
  using Acc = typename Widen<To>::Acc;
  const auto* x = static_cast<const From*>(in);
  auto* o = static_cast<To*>(out);
  with_divisor<Acc>(divisor, [&](auto divide) {
    for (size_t i = 0; i < n; ++i) {
      const Acc cast = Widen<To>::load(Widen<To>::store(static_cast<Acc>(Widen<From>::load(x[i]))));
      o[i] = Widen<To>::store(divide(cast));
    }
  });
}

template <class F>
void dispatch(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Float64: return f(double{});
    case DType::Float32: return f(float{});
    case DType::Float16: return f(Half{});
    case DType::BFloat16: return f(BFloat16{});
    case DType::Int8: return f(int8_t{});
    case DType::UInt8: return f(uint8_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    default: WEFT_FAIL("[", op, "] cannot reduce ", dtype, " buffers");
  }
}

}  // namespace

void combine(DType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t n) {
  dispatch(dtype, "combine", [&](auto tag) { combine_typed<decltype(tag)>(op, out, a, b, n); });
}

void reduce_blocks(DType dtype, ReduceOp op, void* out, const void* in, size_t blocks, size_t n) {
  dispatch(dtype, "reduce_scatter", [&](auto tag) { reduce_blocks_typed<decltype(tag)>(op, out, in, blocks, n); });
}

void divide(DType dtype, void* x, size_t n, double divisor) {
  dispatch(dtype, "all_reduce", [&](auto tag) { divide_typed<decltype(tag)>(x, n, divisor); });
}

void sum_and_divide(DType dtype, void* out, const void* a, const void* b, size_t n, double divisor) {
  dispatch(dtype, "all_reduce", [&](auto tag) { sum_and_divide_typed<decltype(tag)>(out, a, b, n, divisor); });
}

void cast_and_divide(DType from, const void* in, DType to, void* out, size_t n, double divisor) {
  WEFT_CHECK(to == DType::Float16 || to == DType::BFloat16, "[cast_and_divide] expected a float16 or bfloat16 target, got ",
             to);
  dispatch(from, "cast_and_divide", [&](auto from_tag) {
    using From = decltype(from_tag);
    if constexpr (std::is_floating_point_v<typename Widen<From>::Acc>) {
      if (to == DType::Float16) cast_and_divide_typed<From, Half>(in, out, n, divisor);
      else cast_and_divide_typed<From, BFloat16>(in, out, n, divisor);
    } else {
      WEFT_FAIL("[cast_and_divide] expected a floating-point buffer, got ", from);
    }
  });
}

}  // namespace weft::distributed::detail
