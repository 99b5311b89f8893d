// Clock and FMA-throughput microbenchmarks for fma_peak.h. Inline assembly, so that the compiler
// can neither vectorise nor shorten the chains; the AVX-512 one runs only where the CPU has it.
#include "fma_peak.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "weft.h"

namespace bench {
namespace {

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Runs fn on `threads` threads at once and returns the slowest one's CPU seconds: the time each
// thread actually ran, so another process taking the core for a while does not lower the clock.
template <class Fn>
double on_all_threads(int threads, Fn fn) {
  std::vector<double> seconds(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      const double start = thread_cpu_seconds();
      fn();
      seconds[static_cast<size_t>(t)] = thread_cpu_seconds() - start;
    });
  for (auto& th : pool) th.join();
  double worst = 0;
  for (double s : seconds) worst = std::max(worst, s);
  return worst;
}

constexpr long kIterations = 500'000;

// 100 dependent adds per iteration: 100 cycles. Register + register: Golden Cove cores (Sapphire
// Rapids) fold chains of add-immediate in the renamer and ran `addq $1` at ~8 per cycle, which
// measured a 24.6 GHz clock.
void add_chain() {
  long x = 0;
  const long one = 1;
  for (long i = 0; i < kIterations; ++i) asm volatile(".rept 100\n\taddq %1, %0\n\t.endr" : "+r"(x) : "r"(one));
}

// 10 × 12 independent ymm FMAs per iteration: 120 FMAs × 16 FLOP.
constexpr long kYmmLoops = kIterations / 2;
void ymm_fma_chains() {
  for (long i = 0; i < kYmmLoops; ++i)
    asm volatile(
        ".rept 10\n\t"
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm4\n\tvfmadd231ps %%ymm0, %%ymm1, %%ymm5\n\t"
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm6\n\tvfmadd231ps %%ymm0, %%ymm1, %%ymm7\n\t"
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm8\n\tvfmadd231ps %%ymm0, %%ymm1, %%ymm9\n\t"
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm10\n\tvfmadd231ps %%ymm0, %%ymm1, %%ymm11\n\t"
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm12\n\tvfmadd231ps %%ymm0, %%ymm1, %%ymm13\n\t"
        "vfmadd231ps %%ymm0, %%ymm1, %%ymm14\n\tvfmadd231ps %%ymm0, %%ymm1, %%ymm15\n\t"
        ".endr" ::: "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
        "xmm15");
}

// 100 dependent ymm FMAs per iteration.
void ymm_fma_latency() {
  for (long i = 0; i < kIterations / 20; ++i)
    asm volatile(".rept 100\n\tvfmadd231ps %%ymm0, %%ymm1, %%ymm4\n\t.endr" ::: "xmm4");
}

// 10 × 24 independent zmm FMAs per iteration: 240 FMAs × 32 FLOP.
constexpr long kZmmLoops = kIterations / 4;
__attribute__((target("avx512f"))) void zmm_fma_chains() {
  for (long i = 0; i < kZmmLoops; ++i)
    asm volatile(
        ".rept 10\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm8\n\tvfmadd231ps %%zmm0, %%zmm1, %%zmm9\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm10\n\tvfmadd231ps %%zmm0, %%zmm1, %%zmm11\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm12\n\tvfmadd231ps %%zmm0, %%zmm1, %%zmm13\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm14\n\tvfmadd231ps %%zmm0, %%zmm1, %%zmm15\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm16\n\tvfmadd231ps %%zmm0, %%zmm1, %%zmm17\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm18\n\tvfmadd231ps %%zmm0, %%zmm1, %%zmm19\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm20\n\tvfmadd231ps %%zmm0, %%zmm1, %%zmm21\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm22\n\tvfmadd231ps %%zmm0, %%zmm1, %%zmm23\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm24\n\tvfmadd231ps %%zmm0, %%zmm1, %%zmm25\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm26\n\tvfmadd231ps %%zmm0, %%zmm1, %%zmm27\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm28\n\tvfmadd231ps %%zmm0, %%zmm1, %%zmm29\n\t"
        "vfmadd231ps %%zmm0, %%zmm1, %%zmm30\n\tvfmadd231ps %%zmm0, %%zmm1, %%zmm31\n\t"
        ".endr" ::: "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18",
        "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30",
        "xmm31");
}

// The best of a few runs: background load only ever slows a run down.
template <class Fn>
double best_seconds(int threads, Fn fn) {
  double best = 1e30;
  for (int r = 0; r < 9; ++r) best = std::min(best, on_all_threads(threads, fn));
  return best;
}

struct Rate {
  double ghz;                   // the median clock of the rounds
  double best_fma_per_cycle;    // per core: the best round's
  double median_fma_per_cycle;  // and the median round's
};

// Times the add chain and an FMA kernel back to back on every thread, round after round, so each
// round's FMAs per cycle compare two runs of the same moment. This VM's vCPUs share their host
// cores with other tenants: for seconds at a time an FMA-heavy neighbour on the sibling
// hyperthread cuts our FMA rate by a third or a half while the adds barely notice (one thread
// measured 1.37 FMAs/cycle in the median round on Zen 3, whose two units give 2). The best round,
// rounded to whole units, is what the core can do; the median says how contended it was. The
// clock is the rounds' median, not their best: once in a few runs one round of the adds came out
// 1.5x too fast (a 5.97 GHz clock on a 3.98 GHz Xeon, so a peak of 764 GFLOP/s), as if the
// thread's CPU-time clock had missed part of it, and the best round took it.
template <class Fn>
Rate measure_rate(int threads, Fn fma_kernel, double fmas_per_thread) {
  constexpr int kRoundsOfRate = 15;
  std::vector<double> per_cycle, clocks;
  for (int r = 0; r < kRoundsOfRate; ++r) {
    const double ghz = 100.0 * kIterations / on_all_threads(threads, add_chain) * 1e-9;
    const double fma_seconds = on_all_threads(threads, fma_kernel);
    per_cycle.push_back(fmas_per_thread / fma_seconds * 1e-9 / ghz);
    clocks.push_back(ghz);
  }
  std::sort(per_cycle.begin(), per_cycle.end());
  std::sort(clocks.begin(), clocks.end());
  return {clocks[kRoundsOfRate / 2], per_cycle.back(), per_cycle[kRoundsOfRate / 2]};
}

}  // namespace

std::string FmaPeak::explain() const {
  char line[640];
  std::snprintf(line, sizeof line,
                "FMA peak %.1f GFLOP/s = %d FLOP/cycle/core (%s: %d lanes x 2 x %d FMA units; independent FMA chains "
                "measured %.2f FMAs/cycle in the best of 15 rounds, %.2f in the median one) x %.2f GHz (measured: "
                "dependent adds, %d threads busy, median round) x %d threads; dependent FMA latency %.2f cycles",
                gflops(), flop_per_cycle(), vector.c_str(), lanes, fma_units(), best_fma_per_cycle, median_fma_per_cycle,
                ghz, threads, threads, fma_latency_cycles);
  return line;
}

FmaPeak measure_fma_peak(int threads) {
  FmaPeak p;
  p.threads = threads;
  const weft::CpuFeatures& f = weft::cpu_features();
  if (!(f.avx2 && f.fma)) {
    p.ghz = 100.0 * kIterations / best_seconds(threads, add_chain) * 1e-9;
    p.vector = "none";
    return p;
  }
  const Rate ymm = measure_rate(threads, ymm_fma_chains, 120.0 * kYmmLoops);
  p.ghz = ymm.ghz;
  p.lanes = 8;
  p.best_fma_per_cycle = ymm.best_fma_per_cycle;
  p.median_fma_per_cycle = ymm.median_fma_per_cycle;
  p.vector = "ymm (AVX2)";
  if (f.avx512f) {
    const Rate zmm = measure_rate(threads, zmm_fma_chains, 240.0 * kZmmLoops);
    if (16 * zmm.best_fma_per_cycle > 8 * ymm.best_fma_per_cycle) {
      p.lanes = 16;
      p.best_fma_per_cycle = zmm.best_fma_per_cycle;
      p.median_fma_per_cycle = zmm.median_fma_per_cycle;
      p.vector = "zmm (AVX-512)";
    }
  }
  p.fma_latency_cycles = p.ghz * 1e9 * best_seconds(1, ymm_fma_latency) / (100.0 * (kIterations / 20));
  return p;
}

}  // namespace bench
