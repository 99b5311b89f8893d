// Clock and FMA-throughput microbenchmarks for fma_peak.h. Inline assembly, so that the compiler
// can neither vectorise nor shorten the chains; the AVX-512 one runs only where the CPU has it.
#include "fma_peak.h"

#include <time.h>

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

// 100 dependent adds per iteration: 100 cycles.
void add_chain() {
  long x = 0;
  for (long i = 0; i < kIterations; ++i) asm volatile(".rept 100\n\taddq $1, %0\n\t.endr" : "+r"(x));
}

// 10 × 12 independent ymm FMAs per iteration: 120 FMAs × 16 FLOP.
void ymm_fma_chains() {
  for (long i = 0; i < kIterations / 4; ++i)
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
__attribute__((target("avx512f"))) void zmm_fma_chains() {
  for (long i = 0; i < kIterations / 8; ++i)
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

}  // namespace

std::string FmaPeak::explain() const {
  char line[512];
  std::snprintf(line, sizeof line,
                "FMA peak %.1f GFLOP/s = %.1f FLOP/cycle/core (%s, measured with independent FMA chains) x %.2f GHz "
                "(measured: dependent adds, %d threads busy) x %d threads; dependent FMA latency %.2f cycles",
                gflops(), flop_per_cycle, vector.c_str(), ghz, threads, threads, fma_latency_cycles);
  return line;
}

FmaPeak measure_fma_peak(int threads) {
  FmaPeak p;
  p.threads = threads;
  p.ghz = 100.0 * kIterations / best_seconds(threads, add_chain) * 1e-9;
  const weft::CpuFeatures& f = weft::cpu_features();
  if (!(f.avx2 && f.fma)) {
    p.vector = "none";
    return p;
  }
  const double ymm = 120.0 * 16 * (kIterations / 4) / best_seconds(threads, ymm_fma_chains) * 1e-9 / p.ghz;
  p.fma_latency_cycles = p.ghz * 1e9 * best_seconds(1, ymm_fma_latency) / (100.0 * (kIterations / 20));
  p.flop_per_cycle = ymm;
  p.vector = "ymm (AVX2)";
  if (f.avx512f) {
    const double zmm = 240.0 * 32 * (kIterations / 8) / best_seconds(threads, zmm_fma_chains) * 1e-9 / p.ghz;
    if (zmm > ymm) {
      p.flop_per_cycle = zmm;
      p.vector = "zmm (AVX-512)";
    }
  }
  return p;
}

}  // namespace bench
