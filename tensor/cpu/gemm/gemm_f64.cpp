// weft's float64 GEMM (gemm_f64 in gemm.h): the five BLIS loops of gemm.cpp in their plainest form.
//
// float64 carries the 64-true precision (reference runs, gradient checks), whose products are the
// model's own, so a few rules serve every shape: both operands are always packed into the panels
// of the kernel set (gemm_kernels.h), with none of the float32 driver's read-in-place paths.
//   for jc over N by NC
//     for pc over K by KC            pack B(KC×NC) into KC×NR panels, the threads sharing the work
//       for ic over M by MC          (row blocks, in parallel) pack A(MC×KC) into MR×KC panels
//         for jr over NC by NR
//           for ir over MC by MR     one MR×NR tile of C: the microkernel
// Threads: a product taller than wide is split into row blocks, as many as a multiple of the
// threads, that share each packed block of B (Note [Threads sharing one packed B] in gemm.cpp);
// one square or wider than tall into column blocks, one product per thread, as gemm.cpp splits.
// A C narrower than a tile is computed transposed. K is cut into equal chunks whatever the thread
// count, so no element's arithmetic depends on it.
#include <algorithm>
#include <cstring>

#include "tensor/cpu/aligned_vector.h"
#include "tensor/cpu/gemm/gemm.h"
#include "tensor/cpu/gemm/gemm_kernels.h"
#include "tensor/cpu/gemm/partition.h"
#include "tensor/parallel.h"

namespace weft::detail {
namespace {

// Each thread of a split product gets at least this much work (2·M·N·K): ~10 µs on one core, many
// times what handing a range to a pool thread costs. (The MLP's three products with a dimension of
// 10, 1.3 MFLOP each, ran 1.1-1.8× faster on two threads than on one, split by columns.)
constexpr int64_t kWorkPerThread = int64_t{512} << 10;

const GemmKernelF64& kernel_f64_for(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar: return kGemmF64Scalar;
    case CpuIsa::Avx2: return kGemmF64Avx2;
    default: return kGemmF64Avx512;
  }
}

// Packs M(l, s) = src[l·lane_stride + s·step_stride], l < lanes, s < steps, into ceil(lanes/width)
// panels of steps × width values, dst[(panel·steps + s)·width + l % width], zero past `lanes`. A
// packs with its rows as lanes, B with its columns. Lanes with contiguous steps go to the kernel
// set's packer where it has one (a transpose in registers); otherwise the inner loop walks
// whichever stride is 1, so the source is read in order.
void pack_panels(const GemmKernelF64& ker, const double* src, int64_t lane_stride, int64_t step_stride, int64_t lanes,
                 int64_t steps, int width, double* dst) {
  if (step_stride == 1 && lane_stride != 1 && ker.pack_by_steps)
    return ker.pack_by_steps(src, lane_stride, lanes, steps, width, dst);
  for (int64_t l0 = 0; l0 < lanes; l0 += width, dst += steps * width) {
    const int count = static_cast<int>(std::min<int64_t>(width, lanes - l0));
    const double* panel = src + l0 * lane_stride;
    if (step_stride == 1 && lane_stride != 1) {
      for (int l = 0; l < count; ++l)
        for (int64_t s = 0; s < steps; ++s) dst[s * width + l] = panel[l * lane_stride + s];
      for (int64_t s = 0; s < steps; ++s) std::fill(dst + s * width + count, dst + (s + 1) * width, 0.0);
      continue;
    }
    for (int64_t s = 0; s < steps; ++s) {
      double* row = dst + s * width;
      const double* from = panel + s * step_stride;
      if (lane_stride == 1) std::copy(from, from + count, row);
      else
        for (int l = 0; l < count; ++l) row[l] = from[l * lane_stride];
      std::fill(row + count, row + width, 0.0);
    }
  }
}

thread_local AlignedVector<double> t_packed_a, t_packed_b, t_transposed;

double* grown(AlignedVector<double>& buffer, int64_t count) {
  if (buffer.size() < static_cast<size_t>(count)) buffer.resize(static_cast<size_t>(count));
  return buffer.data();
}

// c(m×n) (+)= a·b by the five loops on `threads` threads: C's row blocks, as many as a multiple of
// the threads where there are row tiles enough, against each block of B the threads packed together.
void gemm_blocked_f64(const GemmKernelF64& ker, int64_t m, int64_t n, int64_t k, const GemmMatrixF64& a,
                      const GemmMatrixF64& b, double* c, int64_t ldc, bool accumulate, int64_t threads) {
  const int64_t kc_step = even_step(k, ker.kc, 1);
  const int64_t nc_step = std::min<int64_t>(ker.nc, ceil_div(n, ker.nr) * ker.nr);
  const int64_t blocks_wanted = ceil_div(ceil_div(m, ker.mc), threads) * threads;
  const int64_t mc_step = even_step(m, ceil_div(m, std::min(blocks_wanted, ceil_div(m, ker.mr))), ker.mr);
  const int64_t row_blocks = ceil_div(m, mc_step);
  double* packed_b = grown(t_packed_b, kc_step * nc_step);

  for (int64_t jc = 0; jc < n; jc += nc_step) {
    const int64_t nc = std::min(nc_step, n - jc);
    const int64_t pack_parts = std::min(threads, ceil_div(nc, ker.nr));
    for (int64_t pc = 0; pc < k; pc += kc_step) {
      const int64_t kc = std::min(kc_step, k - pc);
      parallel_for_if(threads > 1, pack_parts, [&](int64_t part) {
        const PartRange cols = part_of(nc, ker.nr, pack_parts, part);
        pack_panels(ker, b.data + pc * b.rs + (jc + cols.first) * b.cs, b.cs, b.rs, cols.length, kc, ker.nr,
                    packed_b + cols.first * kc);
      });
      parallel_for_if(threads > 1, row_blocks, [&](int64_t block) {
        const int64_t ic = block * mc_step, mc = std::min(mc_step, m - ic);
        double* packed_a = grown(t_packed_a, ceil_div(mc_step, ker.mr) * ker.mr * kc_step);
        pack_panels(ker, a.data + ic * a.rs + pc * a.cs, a.rs, a.cs, mc, kc, ker.mr, packed_a);
        for (int64_t jr = 0; jr < nc; jr += ker.nr)
          for (int64_t ir = 0; ir < mc; ir += ker.mr)
            ker.micro({kc, packed_a + ir * kc, packed_b + jr * kc, c + (ic + ir) * ldc + jc + jr, ldc,
                       static_cast<int>(std::min<int64_t>(ker.mr, mc - ir)),
                       static_cast<int>(std::min<int64_t>(ker.nr, nc - jr)), accumulate || pc > 0});
      });
    }
  }
}

}  // namespace

const char* gemm_f64_kernel_name(CpuIsa isa) { return kernel_f64_for(isa).name; }

void gemm_f64(int64_t m, int64_t n, int64_t k, const GemmMatrixF64& a, const GemmMatrixF64& b, double* c, int64_t ldc,
              bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i) std::memset(c + i * ldc, 0, static_cast<size_t>(n) * sizeof(double));
    return;
  }
  const GemmKernelF64& ker = kernel_f64_for(cpu_isa());
  if (n < ker.nr && m > n) {
    // C narrower than a tile and taller than wide (the MLP's last layer: 128 × 10) is computed as
    // Cᵀ = Bᵀ·Aᵀ, whose tiles are full along its 128 columns instead of holding 10 of 16 (AVX-512,
    // 128×512·512×10 on one thread: 24.6 -> 35.8 GFLOP/s). K is cut as it would be: the same bits.
    double* t = grown(t_transposed, n * m);
    if (accumulate)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) t[j * m + i] = c[i * ldc + j];
    gemm_f64(n, m, k, {b.data, b.cs, b.rs}, {a.data, a.cs, a.rs}, t, m, accumulate);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = t[j * m + i];
    return;
  }
  const int64_t threads = std::clamp<int64_t>(2 * m * n * k / kWorkPerThread, 1, num_threads());
  if (threads > 1 && m <= n) {
    // Square or wider than tall: each thread computes its own columns of C as a product of its
    // own, packing only its columns of B (and all of A), with no barrier between threads.
    // Row blocks against a shared B would wait twice per block of B: the MLP's products with a
    // dimension of 10 ran slower on two threads that way than on one.
    const int64_t parts = std::min(threads, ceil_div(n, ker.nr));
    parallel_for(parts, [&](int64_t part) {
      const PartRange cols = part_of(n, ker.nr, parts, part);
      gemm_blocked_f64(ker, m, cols.length, k, a, {b.data + cols.first * b.cs, b.rs, b.cs}, c + cols.first, ldc,
                       accumulate, 1);
    });
    return;
  }
  gemm_blocked_f64(ker, m, n, k, a, b, c, ldc, accumulate, threads);
}

}  // namespace weft::detail
