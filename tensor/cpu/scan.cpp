// CPU kernel of cumsum (tensor/scan_kernels.h) on a contiguous (outer, n, inner) array: each
// outer block runs n steps down its inner columns with one accumulator per column, so reads and
// writes walk memory in order. float64 and float32 accumulate in float64 (PyTorch's CPU
// accumulator for both), narrow floats in float32, integers and bool in int64, added as unsigned
// so that overflow wraps (as PyTorch's does) instead of being undefined. Every output is rounded
// from the accumulator once. The work is split over the pool by outer blocks, and by column
// ranges when there is a single block.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "tensor/cpu/convert.h"
#include "tensor/cpu/loops.h"
#include "tensor/scan_kernels.h"

namespace weft::detail {
namespace {

template <class S>
using ScanAccumulator =
    std::conditional_t<kIsNarrowFloat<S>, float, std::conditional_t<std::is_floating_point_v<S>, double, uint64_t>>;

template <class S>
ScanAccumulator<S> load(S v) {
  if constexpr (std::is_same_v<ScanAccumulator<S>, uint64_t>) return static_cast<uint64_t>(static_cast<int64_t>(v));
  else return static_cast<ScanAccumulator<S>>(convert<Compute<S>>(v));
}

template <class S>
S store(ScanAccumulator<S> acc) {
  if constexpr (std::is_same_v<ScanAccumulator<S>, uint64_t>) return convert<S>(static_cast<int64_t>(acc));
  else return convert<S>(static_cast<Compute<S>>(acc));
}

// Columns [begin, end) of one (n, inner) block.
template <class S>
void scan_block(const S* x, S* out, int64_t n, int64_t inner, int64_t begin, int64_t end, bool reverse) {
  std::vector<ScanAccumulator<S>> acc(static_cast<size_t>(end - begin), 0);
  for (int64_t step = 0; step < n; ++step) {
    const int64_t j = reverse ? n - 1 - step : step;
    const S* xr = x + j * inner;
    S* outr = out + j * inner;
    for (int64_t i = begin; i < end; ++i) {
      auto& a = acc[static_cast<size_t>(i - begin)];
      a += load(xr[i]);
      outr[i] = store<S>(a);
    }
  }
}

}  // namespace

void cpu_cumsum(const CumsumLaunch& a) {
  WEFT_CHECK(a.x.dim() == 3 && a.x.is_contiguous() && a.x.shape() == a.out.shape() && a.x.dtype() == a.out.dtype(),
             "[cumsum] internal: expected contiguous (outer, n, inner) operands of one shape and dtype, got ",
             a.x.shape(), " and ", a.out.shape());
  const int64_t outer = a.x.size(0), n = a.x.size(1), inner = a.x.size(2);
  if (a.x.numel() == 0) return;
  const bool worth_threads = a.x.numel() >= kParallelGrain;
  // With one block the columns are split instead, in ranges of at least 64.
  const int64_t column_ranges = worth_threads && outer == 1 ? std::clamp<int64_t>(inner / 64, 1, num_threads()) : 1;
  WEFT_DISPATCH_ALL(a.x.dtype(), S, {
    const S* x = static_cast<const S*>(a.x.data_ptr());
    S* out = static_cast<S*>(a.out.data_ptr());
    parallel_for_if(worth_threads, outer * column_ranges, [&](int64_t job) {
      const int64_t o = job / column_ranges, range = job % column_ranges;
      scan_block(x + o * n * inner, out + o * n * inner, n, inner, inner * range / column_ranges,
                 inner * (range + 1) / column_ranges, a.reverse);
    });
  });
}

}  // namespace weft::detail
