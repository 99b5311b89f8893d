// CPU copy with dtype conversion (Note [Conversion semantics] in tensor/cpu/convert.h) and fill.
#include <cstring>

#include "tensor/cpu/convert.h"
#include "tensor/cpu/cpu_backend.h"
#include "tensor/cpu/loops.h"

namespace weft::detail {

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
    for_each_strided<2>({&dst, &src}, [](const StridedRun<2>& run) {
      convert_run<Dst, Src>(run.ptr[0], run.stride[0], run.ptr[1], run.stride[1], run.n);
    });
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
