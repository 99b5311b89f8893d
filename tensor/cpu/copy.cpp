// CPU copy with dtype conversion (Note [Conversion semantics] in tensor/cpu/convert.h) and fill.
// The loops are few on purpose (issue 47: one loop per dtype pair was a seventh of a shipped
// program): a same-dtype copy moves bytes by item size, a pair with a narrow float goes through
// float32 chunks, and only pairs of the seven dtypes computed as stored get a loop each.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "tensor/cpu/convert.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/loops.h"

namespace weft::detail {
namespace {

// A same-dtype copy moves bytes: one loop per item size serves every dtype of that size.
template <class Bits>
void move_run(const StridedRun<2>& run) {
  if (run.stride[0] == sizeof(Bits) && run.stride[1] == sizeof(Bits)) {
    std::memcpy(run.ptr[0], run.ptr[1], static_cast<size_t>(run.n) * sizeof(Bits));
    return;
  }
  for (int64_t i = 0; i < run.n; ++i) {
    Bits v;
    std::memcpy(&v, run.ptr[1] + i * run.stride[1], sizeof(Bits));
    std::memcpy(run.ptr[0] + i * run.stride[0], &v, sizeof(Bits));
  }
}

void move(const Tensor& src, const Tensor& dst) {
  switch (itemsize(dst.dtype())) {
    case 1: for_each_strided<2>({&dst, &src}, move_run<uint8_t>); return;
    case 2: for_each_strided<2>({&dst, &src}, move_run<uint16_t>); return;
    case 4: for_each_strided<2>({&dst, &src}, move_run<uint32_t>); return;
    case 8: for_each_strided<2>({&dst, &src}, move_run<uint64_t>); return;
  }
  WEFT_FAIL("[copy] internal: no byte move for item size ", itemsize(dst.dtype()));
}

bool computed_in_float(DType d) { return d == kFloat32 || is_narrow_float(d); }

// Reads a chunk of dtype `src` as float32: a narrow float's (or float32's) own chunk load, else a
// wide dtype's conversion loop.
FloatChunkLoad widen_for(DType src) {
  if (computed_in_float(src)) return float_chunk_load(src);
  FloatChunkLoad widen = nullptr;
  WEFT_DISPATCH_ALL(src, Src, {
    if constexpr (!std::is_same_v<Compute<Src>, float>) {
      widen = [](const char* s, int64_t stride, int64_t n, float* buf) {
        convert_run<float, Src>(reinterpret_cast<char*>(buf), sizeof(float), s, stride, n);
      };
    }
  });
  return widen;
}

// Writes a chunk of float32 values as dtype `dst`, the other way round.
FloatChunkStore narrow_for(DType dst) {
  if (computed_in_float(dst)) return float_chunk_store(dst);
  FloatChunkStore narrow = nullptr;
  WEFT_DISPATCH_ALL(dst, Dst, {
    if constexpr (!std::is_same_v<Compute<Dst>, float>) {
      narrow = [](char* d, int64_t stride, int64_t n, const float* buf) {
        convert_run<Dst, float>(d, stride, reinterpret_cast<const char*>(buf), sizeof(float), n);
      };
    }
  });
  return narrow;
}

// A conversion with a narrow float on either side goes through float32 chunks, which is what
// convert() does for one value (Note [Conversion semantics]): one loop for every such pair. A
// contiguous float32 side is the chunk itself, so float32 <-> bfloat16 / float16 runs go straight
// to their vector kernels with no extra pass.
void convert_through_float(const StridedRun<2>& run, DType dst, DType src, FloatChunkStore narrow,
                           FloatChunkLoad widen) {
  float buf[kChunk];
  for (int64_t begin = 0; begin < run.n; begin += kChunk) {
    const int64_t n = std::min(kChunk, run.n - begin);
    char* d = run.ptr[0] + begin * run.stride[0];
    const char* s = run.ptr[1] + begin * run.stride[1];
    if (src == kFloat32 && run.stride[1] == sizeof(float)) {
      narrow(d, run.stride[0], n, reinterpret_cast<const float*>(s));
    } else if (dst == kFloat32 && run.stride[0] == sizeof(float)) {
      widen(s, run.stride[1], n, reinterpret_cast<float*>(d));
    } else {
      widen(s, run.stride[1], n, buf);
      narrow(d, run.stride[0], n, buf);
    }
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
  const DType to = dst.dtype(), from = src.dtype();
  if (to == from) return move(src, dst);
  if (is_narrow_float(to) || is_narrow_float(from)) {
    const FloatChunkStore narrow = narrow_for(to);
    const FloatChunkLoad widen = widen_for(from);
    for_each_strided<2>({&dst, &src}, [=](const StridedRun<2>& run) { convert_through_float(run, to, from, narrow, widen); });
    return;
  }
  // Both sides are computed as they are stored: one loop per pair.
  WEFT_DISPATCH_ALL(to, Dst, WEFT_DISPATCH_ALL(from, Src, {
    if constexpr (!kIsNarrowFloat<Dst> && !kIsNarrowFloat<Src> && !std::is_same_v<Dst, Src>) {
      for_each_strided<2>({&dst, &src}, [](const StridedRun<2>& run) {
        convert_run<Dst, Src>(run.ptr[0], run.stride[0], run.ptr[1], run.stride[1], run.n);
      });
    }
  }));
}

// A contiguous run is one typed fill, wide stores; a strided run goes value by value. (Every run
// went value by value before, about one a cycle: zeros for a GPT's q, k, v gradients, 12 × 64 ×
// 384 floats, took 145 µs on one core.)
void CpuBackend::fill(const Tensor& dst, double value) {
  WEFT_DISPATCH_ALL(dst.dtype(), T, {
    const T v = convert<T>(value);
    for_each_strided<1>({&dst}, [v](const StridedRun<1>& run) {
      if (run.stride[0] == static_cast<int64_t>(sizeof(T))) {
        std::fill_n(reinterpret_cast<T*>(run.ptr[0]), run.n, v);
        return;
      }
      for (int64_t i = 0; i < run.n; ++i) std::memcpy(run.ptr[0] + i * run.stride[0], &v, sizeof(T));
    });
  });
}

void check_index(int64_t index, int64_t n, const char* op) {
  WEFT_CHECK(index >= 0 && index < n, "[", op, "] index ", index, " is out of bounds for size ", n);
}

}  // namespace weft::detail
