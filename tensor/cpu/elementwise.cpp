// CPU elementwise kernels: unary, binary (incl. fused activation backward rules) and where.
//
// Each op is a small scalar function (tensor/elementwise_math.h, shared with the CUDA kernels);
// `run_unary` / `run_binary` apply it over strided runs,
// with a tight loop for the contiguous case (which the compiler vectorises) and a strided loop
// otherwise. Narrow floats are widened chunk by chunk as they are read (tensor/cpu/convert.h),
// through one float32 loop per op whichever narrow format it is: instantiating every op for every
// dtype made this file a third of a shipped program's code (issue 47).
// The op is a template argument so the switch happens once per call, not per element, and the
// per-element functors are forced inline, so the contiguous loops vectorise whatever the op's size.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <type_traits>

#include "tensor/cpu/convert.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/loops.h"
#include "tensor/elementwise_math.h"

#if defined(__GNUC__)
#define WEFT_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define WEFT_ALWAYS_INLINE inline
#endif

namespace weft::detail {
namespace {

// Applies f over a run of one input. Out and In are storage types of dtypes computed as they are
// stored (not narrow floats); f takes and returns those values.
template <class Out, class In, class Fn>
void elementwise_run(const StridedRun<2>& run, Fn f) {
  if (run.stride[0] == sizeof(Out) && run.stride[1] == sizeof(In)) {
    Out* o = reinterpret_cast<Out*>(run.ptr[0]);
    const In* x = reinterpret_cast<const In*>(run.ptr[1]);
    for (int64_t i = 0; i < run.n; ++i) o[i] = f(x[i]);
  } else {
    for (int64_t i = 0; i < run.n; ++i) {
      In x;
      std::memcpy(&x, run.ptr[1] + i * run.stride[1], sizeof(In));
      const Out r = f(x);
      std::memcpy(run.ptr[0] + i * run.stride[0], &r, sizeof(Out));
    }
  }
}

// The same over a run of two inputs of one storage type.
template <class Out, class In, class Fn>
void elementwise_run(const StridedRun<3>& run, Fn f) {
  Out* o = reinterpret_cast<Out*>(run.ptr[0]);
  if (run.stride[0] == sizeof(Out) && run.stride[1] == sizeof(In) && run.stride[2] == sizeof(In)) {
    const In* a = reinterpret_cast<const In*>(run.ptr[1]);
    const In* b = reinterpret_cast<const In*>(run.ptr[2]);
    for (int64_t i = 0; i < run.n; ++i) o[i] = f(a[i], b[i]);
    return;
  }
  if (run.stride[0] == sizeof(Out) && run.stride[1] == sizeof(In) && run.stride[2] == 0) {
    const In* a = reinterpret_cast<const In*>(run.ptr[1]);
    In b;
    std::memcpy(&b, run.ptr[2], sizeof(In));
    for (int64_t i = 0; i < run.n; ++i) o[i] = f(a[i], b);
    return;
  }
  for (int64_t i = 0; i < run.n; ++i) {
    In a, b;
    std::memcpy(&a, run.ptr[1] + i * run.stride[1], sizeof(In));
    std::memcpy(&b, run.ptr[2] + i * run.stride[2], sizeof(In));
    const Out r = f(a, b);
    std::memcpy(run.ptr[0] + i * run.stride[0], &r, sizeof(Out));
  }
}

// Where a narrow-input op's results go: rounded into the input's narrow dtype, or stored as they
// are when the op is a predicate (bool).
template <class R>
struct NarrowResults {
  FloatChunkStore round;
  void operator()(char* p, int64_t stride, int64_t n, const R* r) const {
    if constexpr (std::is_same_v<R, bool>) store_chunk<bool>(p, stride, n, r);
    else round(p, stride, n, r);
  }
};

// The float32 loops of the narrow floats: the input widened chunk by chunk on the stack (`load`,
// whichever narrow format it is), f applied, the results stored. One such loop per op serves
// float16, bfloat16 and both float8s.
template <class Fn>
void narrow_run(const StridedRun<2>& run, FloatChunkLoad load, FloatChunkStore round, Fn f) {
  using R = decltype(f(0.0f));
  const NarrowResults<R> store{round};
  float x[kChunk];
  R r[kChunk];
  for (int64_t begin = 0; begin < run.n; begin += kChunk) {
    const int64_t n = std::min(kChunk, run.n - begin);
    load(run.ptr[1] + begin * run.stride[1], run.stride[1], n, x);
    for (int64_t i = 0; i < n; ++i) r[i] = f(x[i]);
    store(run.ptr[0] + begin * run.stride[0], run.stride[0], n, r);
  }
}

// The same over a run of two narrow inputs of one dtype.
template <class Fn>
void narrow_run(const StridedRun<3>& run, FloatChunkLoad load, FloatChunkStore round, Fn f) {
  using R = decltype(f(0.0f, 0.0f));
  const NarrowResults<R> store{round};
  float a[kChunk], b[kChunk];
  R r[kChunk];
  for (int64_t begin = 0; begin < run.n; begin += kChunk) {
    const int64_t n = std::min(kChunk, run.n - begin);
    load(run.ptr[1] + begin * run.stride[1], run.stride[1], n, a);
    load(run.ptr[2] + begin * run.stride[2], run.stride[2], n, b);
    for (int64_t i = 0; i < n; ++i) r[i] = f(a[i], b[i]);
    store(run.ptr[0] + begin * run.stride[0], run.stride[0], n, r);
  }
}

// The per-element functions, as functors whose call is forced inline (a lambda's attribute is not
// reliably honoured): a call left in the loop keeps it from vectorising.
template <UnaryOp OP, class T>
struct UnaryFn {
  double p0, p1;
  WEFT_ALWAYS_INLINE auto operator()(T v) const { return unary_scalar<OP, T>(v, p0, p1); }
};
template <BinaryOp OP, class T>
struct BinaryFn {
  WEFT_ALWAYS_INLINE auto operator()(T u, T v) const { return binary_scalar<OP, T>(u, v); }
};

// The storage type of an op's result: bool for predicates, else the input's storage type.
template <class Result, class In>
using OutStorage = std::conditional_t<std::is_same_v<Result, bool>, bool, In>;

// Narrow inputs take one float32 loop (narrow_run), every other dtype a loop of its own.
template <UnaryOp OP>
void run_unary(const Tensor& x, const Tensor& out, double p0, double p1) {
  const DType in = x.dtype();
  if (is_narrow_float(in)) {
    const FloatChunkLoad load = float_chunk_load(in);
    const FloatChunkStore round = float_chunk_store(in);
    for_each_strided<2>({&out, &x}, [=](const StridedRun<2>& run) { narrow_run(run, load, round, UnaryFn<OP, float>{p0, p1}); });
    return;
  }
  WEFT_DISPATCH_ALL(in, S, {
    if constexpr (kIsNarrowFloat<S>) {
      WEFT_FAIL("[cpu] internal: narrow dtype ", in, " missed the float32 loop");
    } else if constexpr (kUnarySupports<OP, S>) {
      using Out = OutStorage<decltype(unary_scalar<OP, S>(S{}, 0.0, 0.0)), S>;
      for_each_strided<2>({&out, &x}, [p0, p1](const StridedRun<2>& run) {
        elementwise_run<Out, S>(run, UnaryFn<OP, S>{p0, p1});
      });
    } else {
      WEFT_FAIL("[cpu] internal: unary op ", static_cast<int>(OP), " needs a floating input, got ", in);
    }
  });
}

template <BinaryOp OP>
void run_binary(const Tensor& a, const Tensor& b, const Tensor& out) {
  const DType in = a.dtype();
  if (is_narrow_float(in)) {
    const FloatChunkLoad load = float_chunk_load(in);
    const FloatChunkStore round = float_chunk_store(in);
    for_each_strided<3>({&out, &a, &b}, [=](const StridedRun<3>& run) { narrow_run(run, load, round, BinaryFn<OP, float>{}); });
    return;
  }
  WEFT_DISPATCH_ALL(in, S, {
    if constexpr (kIsNarrowFloat<S>) {
      WEFT_FAIL("[cpu] internal: narrow dtype ", in, " missed the float32 loop");
    } else if constexpr (kBinarySupports<OP, S>) {
      using Out = OutStorage<decltype(binary_scalar<OP, S>(S{}, S{})), S>;
      for_each_strided<3>({&out, &a, &b}, [](const StridedRun<3>& run) {
        elementwise_run<Out, S>(run, BinaryFn<OP, S>{});
      });
    } else {
      WEFT_FAIL("[cpu] internal: binary op ", static_cast<int>(OP), " is not defined for ", in);
    }
  });
}

}  // namespace

void CpuBackend::unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) {
  switch (op) {
#define WEFT_UNARY_CASE(NAME) case UnaryOp::NAME: run_unary<UnaryOp::NAME>(x, out, p0, p1); break;
    WEFT_UNARY_CASE(Neg) WEFT_UNARY_CASE(Abs) WEFT_UNARY_CASE(Sign) WEFT_UNARY_CASE(Exp)
    WEFT_UNARY_CASE(Log) WEFT_UNARY_CASE(Sqrt) WEFT_UNARY_CASE(Rsqrt) WEFT_UNARY_CASE(Relu)
    WEFT_UNARY_CASE(Gelu) WEFT_UNARY_CASE(GeluTanh) WEFT_UNARY_CASE(Silu) WEFT_UNARY_CASE(Sigmoid)
    WEFT_UNARY_CASE(Tanh) WEFT_UNARY_CASE(Clamp) WEFT_UNARY_CASE(PowScalar)
    WEFT_UNARY_CASE(LogicalNot) WEFT_UNARY_CASE(IsFinite)
#undef WEFT_UNARY_CASE
  }
}

void CpuBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (op) {
#define WEFT_BINARY_CASE(NAME) case BinaryOp::NAME: run_binary<BinaryOp::NAME>(a, b, out); break;
    WEFT_BINARY_CASE(Add) WEFT_BINARY_CASE(Sub) WEFT_BINARY_CASE(Mul) WEFT_BINARY_CASE(Div)
    WEFT_BINARY_CASE(Pow) WEFT_BINARY_CASE(Maximum) WEFT_BINARY_CASE(Minimum)
    WEFT_BINARY_CASE(Eq) WEFT_BINARY_CASE(Ne) WEFT_BINARY_CASE(Lt) WEFT_BINARY_CASE(Le)
    WEFT_BINARY_CASE(Gt) WEFT_BINARY_CASE(Ge)
    WEFT_BINARY_CASE(ReluBackward) WEFT_BINARY_CASE(GeluBackward) WEFT_BINARY_CASE(GeluTanhBackward)
    WEFT_BINARY_CASE(SiluBackward) WEFT_BINARY_CASE(SigmoidBackward) WEFT_BINARY_CASE(TanhBackward)
#undef WEFT_BINARY_CASE
  }
}

// A select copies bytes, so it needs no conversion whatever the dtype.
void CpuBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const size_t item = itemsize(out.dtype());
  for_each_strided<4>({&out, &cond, &a, &b}, [item](const StridedRun<4>& run) {
    for (int64_t i = 0; i < run.n; ++i) {
      bool c;
      std::memcpy(&c, run.ptr[1] + i * run.stride[1], 1);
      std::memcpy(run.ptr[0] + i * run.stride[0], run.ptr[c ? 2 : 3] + i * run.stride[c ? 2 : 3], item);
    }
  });
}

}  // namespace weft::detail
