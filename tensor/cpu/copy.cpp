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

// n values of dtype `src` at s (`stride` bytes apart) as float32 into buf.
void widen_chunk(DType src, const char* s, int64_t stride, int64_t n, float* buf) {
  if (computed_in_float(src)) return load_float_chunk(src, s, stride, n, buf);
  WEFT_DISPATCH_ALL(src, Src, {
    if constexpr (!std::is_same_v<Compute<Src>, float>)
      convert_run<float, Src>(reinterpret_cast<char*>(buf), sizeof(float), s, stride, n);
  });
}

// n float32 values from buf as dtype `dst` at d (`stride` bytes apart).
void narrow_chunk(DType dst, char* d, int64_t stride, int64_t n, const float* buf) {
  if (computed_in_float(dst)) return store_float_chunk(dst, d, stride, n, buf);
  WEFT_DISPATCH_ALL(dst, Dst, {
    if constexpr (!std::is_same_v<Compute<Dst>, float>)
      convert_run<Dst, float>(d, stride, reinterpret_cast<const char*>(buf), sizeof(float), n);
  });
}

// A conversion with a narrow float on either side goes through float32 chunks, which is what
// convert() does for one value (Note [Conversion semantics]): one loop for every such pair. A
// contiguous float32 side is the chunk itself, so float32 <-> bfloat16 / float16 runs go straight
// to their vector kernels with no extra pass.
void convert_through_float(const StridedRun<2>& run, DType dst, DType src) {
  float buf[kChunk];
  for (int64_t begin = 0; begin < run.n; begin += kChunk) {
    const int64_t n = std::min(kChunk, run.n - begin);
    char* d = run.ptr[0] + begin * run.stride[0];
    const char* s = run.ptr[1] + begin * run.stride[1];
    if (src == kFloat32 && run.stride[1] == sizeof(float)) {
      narrow_chunk(dst, d, run.stride[0], n, reinterpret_cast<const float*>(s));
    } else if (dst == kFloat32 && run.stride[0] == sizeof(float)) {
      widen_chunk(src, s, run.stride[1], n, reinterpret_cast<float*>(d));
    } else {
      widen_chunk(src, s, run.stride[1], n, buf);
      narrow_chunk(dst, d, run.stride[0], n, buf);
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
    for_each_strided<2>({&dst, &src}, [to, from](const StridedRun<2>& run) { convert_through_float(run, to, from); });
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

void CpuBackend::fill(const Tensor& dst, double value) {
  WEFT_DISPATCH_ALL(dst.dtype(), T, {
    const T v = convert<T>(value);
    for_each_strided<1>({&dst}, [v](const StridedRun<1>& run) {
      for (int64_t i = 0; i < run.n; ++i) std::memcpy(run.ptr[0] + i * run.stride[0], &v, sizeof(T));
    });
  });
}

void check_index(int64_t index, int64_t n, const char* op) {
  WEFT_CHECK(index >= 0 && index < n, "[", op, "] index ", index, " is out of bounds for size ", n);
}

}  // namespace weft::detail
