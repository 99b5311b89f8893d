// Matrix product throughput: weft::matmul against Eigen and OpenBLAS in the same run, on the
// example MLP's products (forward and backward, in the layouts training uses), on the char GPT's
// weight gradients (gᵀ·x over its 768 tokens: A stored by columns, C narrow) and on squares,
// in float32, with bfloat16 inputs and (--dtype fp64 or all) in float64, as GFLOP/s and as a share
// of the machine's measured FMA peak (fma_peak.h; float64 has half its lanes). PyTorch is measured
// by bench/matmul_torch.py on the same cases (float32 and bf16), and bench/compare_matmul.sh puts
// them all in one table.
//
// Peers run as a user gets them: Eigen compiled for this machine (-march=native, eigen_peer.cpp)
// with OpenMP (its GEMM's threading), OpenBLAS with its own threads and whatever core type its
// run-time detection (or OPENBLAS_CORETYPE) picks.
// weft runs its default GEMM (its own kernels, chosen for this CPU); the header says which.
//
// Timing: each library runs its calls in blocks, the libraries one after another with a pause
// between (OpenMP pools keep spinning after a call and would slow whoever runs next), for three
// rounds; t is the median call over all rounds and GFLOP/s = 2·M·N·K / t. The median ignores calls
// that waited a time slice for a preempted thread. Results are compared before any timing.
//
// Output: a table, then one line of JSON starting with {"bench":"matmul".
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bf16_peak.h"
#include "eigen_peer.h"
#include "fma_peak.h"
#include "weft.h"

#ifdef WEFT_BENCH_OPENBLAS
#include <cblas.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int threads = 0;  // 0: weft's default (all cores unless WEFT_NUM_THREADS/OMP_NUM_THREADS say otherwise)
  double min_time = 0.6;
  bool fp32 = true, bf16 = true, fp64 = false;
  std::string only;  // run only cases whose name contains this
  bool cpu_clock = false;  // time calls by the calling thread's CPU time (meaningful with one thread)
};

// C(m×n) = A(m×k)·B(k×n); A is stored as (k, m) row-major when a_t (a transposed view), B as
// (n, k) when b_t.
struct Case {
  const char* name;
  int64_t m, k, n;
  bool a_t, b_t;
};

const Case kCases[] = {
    {"mlp fwd1 x·W1t", 128, 784, 512, false, true},  {"mlp fwd2 h·W2t", 128, 512, 512, false, true},
    {"mlp fwd3 h·W3t", 128, 512, 10, false, true},   {"mlp dX3 g·W3", 128, 10, 512, false, false},
    {"mlp dW3 gt·h", 10, 128, 512, true, false},     {"mlp dX2 g·W2", 128, 512, 512, false, false},
    {"mlp dW2 gt·h", 512, 128, 512, true, false},    {"mlp dW1 gt·x", 512, 128, 784, true, false},
    {"gpt dW qkv gt·x", 384, 768, 128, true, false}, {"gpt dW proj gt·y", 128, 768, 128, true, false},
    {"gpt dW fc gt·x", 512, 768, 128, true, false},
    {"square 512", 512, 512, 512, false, false},     {"square 1024", 1024, 1024, 1024, false, false},
    {"square 2048", 2048, 2048, 2048, false, false},
};

constexpr int kRounds = 3;
constexpr int kMinCallsPerRound = 2;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Lets the previous library's worker threads stop spinning before the next one starts.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(100)); }

// One library's calls of one case. The constructor makes the warm-up call.
class Timer {
 public:
  Timer(std::function<void()> fn, bool cpu_clock) : fn_(std::move(fn)), cpu_clock_(cpu_clock) { fn_(); }
  void round(double seconds) {
    const auto start = Clock::now();
    for (int i = 0; i < kMinCallsPerRound || seconds_since(start) < seconds; ++i) {
      const auto t0 = Clock::now();
      const double c0 = cpu_clock_ ? thread_cpu_seconds() : 0;
      fn_();
      per_call_.push_back(cpu_clock_ ? thread_cpu_seconds() - c0 : seconds_since(t0));
    }
  }
  double median_seconds() {
    std::nth_element(per_call_.begin(), per_call_.begin() + static_cast<int64_t>(per_call_.size() / 2), per_call_.end());
    return per_call_[per_call_.size() / 2];
  }

 private:
  std::function<void()> fn_;
  bool cpu_clock_;
  std::vector<double> per_call_;
};

// Largest |x - y| relative to the largest |y|.
template <class T>
double relative_error(const std::vector<double>& x, const T* y) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::fabs(x[i] - static_cast<double>(y[i])));
    scale = std::max(scale, std::fabs(static_cast<double>(y[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

template <class T>
void check_close(const char* who, const Case& c, const std::vector<double>& want, const T* got) {
  const double err = relative_error(want, got);
  if (err > 1e-4) {
    std::fprintf(stderr, "bench_matmul: %s disagrees with weft on %s (relative error %.3g); not timing it\n", who,
                 c.name, err);
    std::exit(1);
  }
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      o.threads = std::atoi(argv[++i]);
    } else if (arg == "--min-time" && i + 1 < argc) {
      o.min_time = std::atof(argv[++i]);
    } else if (arg == "--dtype" && i + 1 < argc) {
      const std::string d = argv[++i];
      o.fp32 = d == "fp32" || d == "both" || d == "all";
      o.bf16 = d == "bf16" || d == "both" || d == "all";
      o.fp64 = d == "fp64" || d == "all";
    } else if (arg == "--only" && i + 1 < argc) {
      o.only = argv[++i];
    } else if (arg == "--cpu-clock") {
      o.cpu_clock = true;
    } else {
      std::fprintf(stderr,
                   "usage: bench_matmul [--threads N] [--min-time SECONDS] [--dtype fp32|bf16|fp64|both|all] [--only TEXT]\n"
                   "                    [--cpu-clock]\n"
                   "  --threads N     threads for weft, Eigen and OpenBLAS (default: weft's default)\n"
                   "  --min-time S    timed seconds per library and case, over %d rounds (default 0.6)\n"
                   "  --dtype D       input dtype(s) to measure (default both: fp32 and bf16; all adds fp64;\n"
                   "                  bf16 has no Eigen/OpenBLAS peer)\n"
                   "  --only TEXT     only the cases whose name contains TEXT (e.g. 'mlp', 'square')\n"
                   "  --cpu-clock     time by the calling thread's CPU time, not wall time: with --threads 1\n"
                   "                  on a busy machine, time spent preempted does not count\n",
                   kRounds);
      std::exit(arg == "--help" ? 0 : 2);
    }
  }
  if (o.cpu_clock && o.threads != 1) {
    std::fprintf(stderr, "bench_matmul: --cpu-clock needs --threads 1 (other threads' time would not count)\n");
    std::exit(2);
  }
  if (o.threads < 0 || o.min_time <= 0 || !(o.fp32 || o.bf16 || o.fp64)) {
    std::fprintf(stderr,
                 "bench_matmul: --threads must be >= 1, --min-time > 0, --dtype fp32, bf16, fp64, both or all\n");
    std::exit(2);
  }
  return o;
}

struct Result {
  const Case* c;
  const char* dtype;
  double weft = 0, eigen = 0, openblas = 0;  // GFLOP/s; 0: not measured
};

const char* case_dtype_name(weft::DType dtype) {
  return dtype == weft::kFloat32 ? "fp32" : dtype == weft::kFloat64 ? "fp64" : "bf16";
}

#ifdef WEFT_BENCH_OPENBLAS
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const float* a, int lda, const float* b,
               int ldb, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const double* a, int lda, const double* b,
               int ldb, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}
#endif

// Eigen's and OpenBLAS's product of the stored operands (float or double), checked against weft's
// result, then added to the timers.
template <class T>
void add_peers(const Case& c, const weft::Tensor& a_store, const weft::Tensor& b_store, const std::vector<double>& want,
               Result& r, const Options& opt, std::vector<std::pair<double*, Timer>>& timers,
               std::vector<std::vector<T>>& outputs) {
  const T* ap = a_store.data<T>();
  const T* bp = b_store.data<T>();
  T* c_eigen = outputs.emplace_back(static_cast<size_t>(c.m * c.n)).data();
  auto eigen = [&c, ap, bp, c_eigen] { bench::eigen_gemm(c.m, c.n, c.k, ap, c.a_t, bp, c.b_t, c_eigen); };
  eigen();
  check_close("Eigen", c, want, c_eigen);
  timers.emplace_back(&r.eigen, Timer(eigen, opt.cpu_clock));
#ifdef WEFT_BENCH_OPENBLAS
  T* c_blas = outputs.emplace_back(static_cast<size_t>(c.m * c.n)).data();
  auto gemm = [&c, ap, bp, c_blas] {
    blas_gemm(c.a_t ? CblasTrans : CblasNoTrans, c.b_t ? CblasTrans : CblasNoTrans, static_cast<int>(c.m),
              static_cast<int>(c.n), static_cast<int>(c.k), ap, static_cast<int>(c.a_t ? c.m : c.k), bp,
              static_cast<int>(c.b_t ? c.k : c.n), c_blas, static_cast<int>(c.n));
  };
  gemm();
  check_close("OpenBLAS", c, want, c_blas);
  timers.emplace_back(&r.openblas, Timer(gemm, opt.cpu_clock));
#endif
}

Result run_case(const Case& c, weft::DType dtype, const Options& opt, weft::Generator& gen) {
  using weft::Tensor;
  // Stored in the dtype the peers compute in (float32 for bf16, which only weft measures).
  const weft::DType stored = dtype == weft::kFloat64 ? weft::kFloat64 : weft::kFloat32;
  const Tensor a_store = weft::randn(c.a_t ? weft::Shape{c.k, c.m} : weft::Shape{c.m, c.k}, stored, &gen);
  const Tensor b_store = weft::randn(c.b_t ? weft::Shape{c.n, c.k} : weft::Shape{c.k, c.n}, stored, &gen);
  const Tensor a = (c.a_t ? a_store.t() : a_store).to(dtype), b = (c.b_t ? b_store.t() : b_store).to(dtype);
  const double flop = 2.0 * static_cast<double>(c.m) * static_cast<double>(c.n) * static_cast<double>(c.k);
  Result r{&c, case_dtype_name(dtype)};
  const std::vector<double> want = weft::matmul(a, b).to_vector<double>();

  Tensor sink;
  std::vector<std::pair<double*, Timer>> timers;
  timers.emplace_back(&r.weft, Timer([&] { sink = weft::matmul(a, b); }, opt.cpu_clock));
  std::vector<std::vector<float>> outputs_f32;
  std::vector<std::vector<double>> outputs_f64;
  if (dtype == weft::kFloat32) add_peers<float>(c, a_store, b_store, want, r, opt, timers, outputs_f32);
  if (dtype == weft::kFloat64) add_peers<double>(c, a_store, b_store, want, r, opt, timers, outputs_f64);
  for (int round = 0; round < kRounds; ++round)
    for (auto& [slot, timer] : timers) {
      settle();
      timer.round(opt.min_time / kRounds);
    }
  for (auto& [slot, timer] : timers) *slot = flop / timer.median_seconds() * 1e-9;
  return r;
}

std::string openblas_description() {
#ifdef WEFT_BENCH_OPENBLAS
  return std::string(openblas_get_config()) + ", core " + openblas_get_corename();
#else
  return "OpenBLAS not built in (install libopenblas-openmp-dev, e.g. scripts/install-deps.sh, and re-run cmake)";
#endif
}

std::string number_or_null(double v) {
  if (v <= 0) return "null";
  char s[32];
  std::snprintf(s, sizeof s, "%.2f", v);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  const int threads = opt.threads > 0 ? opt.threads : weft::num_threads();
  weft::set_num_threads(threads);
  bench::eigen_set_threads(threads);
#ifdef WEFT_BENCH_OPENBLAS
  openblas_set_num_threads(threads);
#endif
  const bench::FmaPeak peak = bench::measure_fma_peak(threads);
  const bench::Bf16Peak peak_bf16 = bench::bf16_peak(peak, threads);
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");

  std::printf("bench_matmul: C = A·B, %d threads; weft: %s / %s / %s; median call over %d rounds of >= %.2f s "
              "per library\n",
              threads, weft::cpu_gemm_kernel(weft::kFloat32).c_str(), weft::cpu_gemm_kernel(weft::kBFloat16).c_str(),
              weft::cpu_gemm_kernel(weft::kFloat64).c_str(), kRounds, opt.min_time / kRounds);
  std::printf("%s\nbf16 peak %.1f GFLOP/s (%s); fp64 peak %.1f GFLOP/s (half the fp32 lanes)\n", peak.explain().c_str(),
              peak_bf16.gflops, peak_bf16.how.c_str(), peak.gflops() / 2);
  std::printf("Eigen (-march=native: %s; OpenMP, %d threads); %s; OPENBLAS_CORETYPE=%s\n\n", bench::eigen_simd(),
              bench::eigen_threads(), openblas_description().c_str(), coretype ? coretype : "(unset)");
  std::printf("%-16s %5s %5s %5s %5s | %9s %6s | %9s %9s | %10s\n", "case", "dtype", "M", "K", "N", "weft GF/s",
              "%peak", "Eigen", "OpenBLAS", "weft/best");
  std::fflush(stdout);

  weft::Generator gen(1234);
  std::vector<Result> results;
  for (const weft::DType dtype : {weft::kFloat32, weft::kBFloat16, weft::kFloat64}) {
    if ((dtype == weft::kFloat32 && !opt.fp32) || (dtype == weft::kBFloat16 && !opt.bf16) ||
        (dtype == weft::kFloat64 && !opt.fp64))
      continue;
    const double dtype_peak = dtype == weft::kBFloat16 ? peak_bf16.gflops
                              : dtype == weft::kFloat64 ? peak.gflops() / 2
                                                        : peak.gflops();
    for (const Case& c : kCases) {
      if (!opt.only.empty() && std::string(c.name).find(opt.only) == std::string::npos) continue;
      const Result r = run_case(c, dtype, opt, gen);
      results.push_back(r);
      const double best = std::max(r.eigen, r.openblas);
      std::printf("%-16s %5s %5lld %5lld %5lld | %9.1f %5.1f%% | %9s %9s | %10s\n", c.name, r.dtype,
                  static_cast<long long>(c.m), static_cast<long long>(c.k), static_cast<long long>(c.n), r.weft,
                  100 * r.weft / dtype_peak, number_or_null(r.eigen).c_str(), number_or_null(r.openblas).c_str(),
                  best > 0 ? number_or_null(r.weft / best).c_str() : "-");
      std::fflush(stdout);
    }
  }

  std::printf("\n{\"bench\":\"matmul\",\"threads\":%d,\"kernel_fp32\":\"%s\",\"kernel_bf16\":\"%s\","
              "\"kernel_fp64\":\"%s\",\"openblas\":\"%s\",\"openblas_coretype_env\":%s%s%s,\"peak_gflops\":%.2f,"
              "\"peak_bf16_gflops\":%.2f,\"ghz\":%.3f,\"flop_per_cycle\":%d,\"fma_units\":%d,"
              "\"fma_per_cycle_best\":%.3f,\"fma_per_cycle_median\":%.3f,\"cases\":[",
              threads, weft::cpu_gemm_kernel(weft::kFloat32).c_str(), weft::cpu_gemm_kernel(weft::kBFloat16).c_str(),
              weft::cpu_gemm_kernel(weft::kFloat64).c_str(), openblas_description().c_str(),
              coretype ? "\"" : "", coretype ? coretype : "null", coretype ? "\"" : "",
              peak.gflops(), peak_bf16.gflops, peak.ghz, peak.flop_per_cycle(), peak.fma_units(), peak.best_fma_per_cycle,
              peak.median_fma_per_cycle);
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::printf("%s{\"name\":\"%s\",\"dtype\":\"%s\",\"m\":%lld,\"k\":%lld,\"n\":%lld,\"weft_gflops\":%.2f,"
                "\"eigen_gflops\":%s,\"openblas_gflops\":%s}",
                i ? "," : "", r.c->name, r.dtype, static_cast<long long>(r.c->m), static_cast<long long>(r.c->k),
                static_cast<long long>(r.c->n), r.weft, number_or_null(r.eigen).c_str(),
                number_or_null(r.openblas).c_str());
  }
  std::printf("]}\n");
  return 0;
}
