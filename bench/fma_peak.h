// The machine's fp32 FMA peak, measured rather than assumed (../shared/reference/cpu-kernels.md §2):
//   clock      a chain of dependent integer adds (1 cycle each) timed by each thread's CPU time,
//              on every thread at once, so the figure is the clock under full load (and time
//              the threads spent preempted by other processes does not count);
//   FMA rate   independent vfmadd231ps chains (12 on ymm; 24 on zmm where the CPU has AVX-512),
//              floating-point operations per cycle per core at the measured clock;
//   latency    one dependent vfmadd231ps chain, as a cross-check of the clock (4 on Zen 3-5 and
//              Skylake, 5 on Haswell).
// peak GFLOP/s = FLOP/cycle/core × GHz × threads. A shared or throttled machine lowers the clock
// measured here and the GEMM alike, so the percentage stays meaningful.
#pragma once

#include <string>

namespace bench {

struct FmaPeak {
  int threads = 1;
  double ghz = 0;                   // measured with every thread busy
  double flop_per_cycle = 0;        // per core, best vector width the CPU has
  double fma_latency_cycles = 0;
  std::string vector;               // "ymm (AVX2)", "zmm (AVX-512)", or "none"
  double gflops() const { return flop_per_cycle * ghz * threads; }
  std::string explain() const;      // one line: how the peak was computed
};

FmaPeak measure_fma_peak(int threads);

}  // namespace bench
