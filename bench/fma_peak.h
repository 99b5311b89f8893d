// The machine's fp32 FMA peak, measured rather than assumed (../shared/reference/cpu-kernels.md §2):
//   clock      a chain of dependent integer adds (1 cycle each) timed by each thread's CPU time,
//              on every thread at once, so the figure is the clock under full load (and time
//              the threads spent preempted by other processes does not count); the median of
//              fifteen rounds, as one round can come out far too fast;
//   FMA units  independent vfmadd231ps chains (12 on ymm; 24 on zmm where the CPU has AVX-512)
//              timed right after the adds, round after round: the best round's FMAs per cycle,
//              rounded to a whole number of FMA units (2 on Zen 3, 1 or 2 zmm units on Intel);
//              the median round's rate is printed too, as a measure of how busy the host was;
//   latency    one dependent vfmadd231ps chain, as a cross-check of the clock (4 on Zen 3-5 and
//              Skylake, 5 on Haswell).
// peak GFLOP/s = lanes × 2 (multiply and add) × FMA units × GHz × threads. A shared or throttled machine lowers the clock
// measured here and the GEMM alike, so the percentage stays meaningful.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

namespace bench {

struct FmaPeak {
  int threads = 1;
  double ghz = 0;                     // measured with every thread busy
  int lanes = 0;                      // floats per register of the widest vector the CPU has
  double best_fma_per_cycle = 0;      // per core, for that width: what fma_units() rounds
  double median_fma_per_cycle = 0;    // below the best when the host core was shared
  double fma_latency_cycles = 0;
  std::string vector;                 // "ymm (AVX2)", "zmm (AVX-512)", or "none"
  int fma_units() const { return lanes == 0 ? 0 : std::max(1, static_cast<int>(std::lround(best_fma_per_cycle))); }
  int flop_per_cycle() const { return 2 * lanes * fma_units(); }
  double gflops() const { return flop_per_cycle() * ghz * threads; }
  std::string explain() const;      // one line: how the peak was computed
};

FmaPeak measure_fma_peak(int threads);

}  // namespace bench
