// fp32 matrix product throughput: weft::matmul against Eigen and OpenBLAS, measured in the same
// run on the same inputs, with the same thread count and (for Eigen) the same compile flags.
//
// weft's CPU GEMM is OpenBLAS's OpenMP build when weft was built with it, Eigen's otherwise
// (tensor/cpu/gemm_library.h; the header line says which). weft over its own library isolates
// what weft's op layer adds on top (checks, output allocation, stride handling); the other
// column says how far the alternative is.
//
// Timing: after a warm-up call each, weft and Eigen run alternately, one call at a time in ABBA
// order, until each has run --min-time seconds and at least kMinCalls calls; every call is timed,
// t is the median call and GFLOP/s = 2·M·N·K / t. Alternating single calls makes both see the
// same background load and the same cache state; the median ignores the calls whose thread team
// waited a whole time slice for a preempted member, which on a busy machine would poison a mean.
// OpenBLAS runs its calls afterwards, between pauses that let the pool's threads go idle. The
// three results are compared before timing; a mismatch aborts instead of timing garbage.
//
// Output: a table, then one line of JSON starting with {"bench":"matmul".
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "weft.h"

#ifdef WEFT_BENCH_OPENBLAS
#include <cblas.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int threads = 0;  // 0: all that OpenMP offers (OMP_NUM_THREADS, else every core)
  double min_time = 0.5;
};

struct Case {
  int64_t m, k, n;
};

constexpr int kMinCalls = 6;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One library's timed calls. The constructor makes the warm-up call: first-touch page faults,
// thread pool start, packing buffers.
class Timer {
 public:
  explicit Timer(std::function<void()> fn) : fn_(std::move(fn)) { fn_(); }
  void call() {
    const auto t0 = Clock::now();
    fn_();
    per_call_.push_back(seconds_since(t0));
    total_ += per_call_.back();
  }
  bool done(double min_time) const { return total_ >= min_time && per_call_.size() >= kMinCalls; }
  double median_seconds() {
    std::nth_element(per_call_.begin(), per_call_.begin() + static_cast<int64_t>(per_call_.size() / 2),
                     per_call_.end());
    return per_call_[per_call_.size() / 2];
  }

 private:
  std::function<void()> fn_;
  std::vector<double> per_call_;
  double total_ = 0;
};

// Lets the previous library's worker threads stop spinning before the next one starts.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }

// Largest |x - y| relative to the largest |y|.
double relative_error(const float* x, const float* y, int64_t count) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < count; ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(x[i] - y[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(y[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

void check_close(const char* who, const float* x, const float* y, int64_t count) {
  const double err = relative_error(x, y, count);
  if (err > 1e-4) {
    std::fprintf(stderr, "bench_matmul: %s disagrees with Eigen (relative error %.3g); not timing it\n", who, err);
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
    } else {
      std::fprintf(stderr,
                   "usage: bench_matmul [--threads N] [--min-time SECONDS]\n"
                   "  --threads N     threads for weft, Eigen and OpenBLAS (default: all cores)\n"
                   "  --min-time S    timed seconds per library and case (default 0.5)\n");
      std::exit(arg == "--help" ? 0 : 2);
    }
  }
  if (o.threads < 0 || o.min_time <= 0) {
    std::fprintf(stderr, "bench_matmul: --threads must be >= 1 and --min-time > 0\n");
    std::exit(2);
  }
  return o;
}

std::string simd_flags() {
  std::string s;
#ifdef __AVX512F__
  s += " avx512f";
#endif
#ifdef __AVX2__
  s += " avx2";
#endif
#ifdef __FMA__
  s += " fma";
#endif
  return s.empty() ? " (no AVX)" : s;
}

struct Result {
  Case c;
  double weft, eigen, openblas;  // GFLOP/s; openblas is 0 when not built
};

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  const int threads = opt.threads > 0 ? opt.threads : weft::num_threads();
  weft::set_num_threads(threads);  // OpenMP and Eigen
#ifdef WEFT_BENCH_OPENBLAS
  openblas_set_num_threads(threads);
  const std::string openblas_name = openblas_get_config();
#else
  const std::string openblas_name =
      "OpenBLAS not built in (install libopenblas-openmp-dev, e.g. scripts/install-deps.sh, and re-run cmake)";
#endif

  const std::vector<Case> cases = {{128, 784, 512}, {512, 512, 512}, {2048, 2048, 2048}};
  std::printf("bench_matmul: fp32 C = A·B, %d threads (Eigen sees %d), weft's GEMM: %s, "
              "median call over >= %d calls and >= %.2f s per library\n",
              threads, Eigen::nbThreads(), weft::to_string(weft::cpu_gemm_library()), kMinCalls, opt.min_time);
  std::printf("compiled with%s; Eigen %d.%d.%d; %s\n\n", simd_flags().c_str(), EIGEN_WORLD_VERSION,
              EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, openblas_name.c_str());
  std::printf("%6s %6s %6s | %10s %10s %10s | %10s %13s\n", "M", "K", "N", "weft GF/s", "Eigen GF/s",
              "BLAS GF/s", "weft/Eigen", "weft/OpenBLAS");
  std::fflush(stdout);

  weft::Generator gen(1234);
  std::vector<Result> results;
  for (const Case& c : cases) {
    const weft::Tensor a = weft::randn({c.m, c.k}, {}, &gen);
    const weft::Tensor b = weft::randn({c.k, c.n}, {}, &gen);
    using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const Eigen::MatrixXf ea = Eigen::Map<const RowMajor>(a.data<float>(), c.m, c.k);
    const Eigen::MatrixXf eb = Eigen::Map<const RowMajor>(b.data<float>(), c.k, c.n);
    Eigen::MatrixXf ec(c.m, c.n);
    const double flop = 2.0 * static_cast<double>(c.m) * static_cast<double>(c.n) * static_cast<double>(c.k);

    // Same answers first (compared in row-major order).
    ec.noalias() = ea * eb;
    const RowMajor expected = ec;
    check_close("weft", weft::matmul(a, b).data<float>(), expected.data(), c.m * c.n);

    weft::Tensor sink;
    Timer weft_timer([&] { sink = weft::matmul(a, b); });
    Timer eigen_timer([&] { ec.noalias() = ea * eb; });
    for (int i = 0; !weft_timer.done(opt.min_time) || !eigen_timer.done(opt.min_time); ++i) {
      Timer& first = i % 2 == 0 ? weft_timer : eigen_timer;  // ABBA
      Timer& second = i % 2 == 0 ? eigen_timer : weft_timer;
      first.call();
      second.call();
    }
    const double t_weft = weft_timer.median_seconds(), t_eigen = eigen_timer.median_seconds();
    double openblas_gflops = 0;
#ifdef WEFT_BENCH_OPENBLAS
    std::vector<float> oc(static_cast<size_t>(c.m * c.n));
    auto sgemm = [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(c.m), static_cast<int>(c.n),
                  static_cast<int>(c.k), 1.0f, a.data<float>(), static_cast<int>(c.k), b.data<float>(),
                  static_cast<int>(c.n), 0.0f, oc.data(), static_cast<int>(c.n));
    };
    sgemm();
    check_close("OpenBLAS", oc.data(), expected.data(), c.m * c.n);
    settle();
    Timer blas_timer(sgemm);
    while (!blas_timer.done(opt.min_time)) blas_timer.call();
    openblas_gflops = flop / blas_timer.median_seconds() * 1e-9;
    settle();
#endif
    const Result r{c, flop / t_weft * 1e-9, flop / t_eigen * 1e-9, openblas_gflops};
    results.push_back(r);
    char blas[32] = "-", ratio[32] = "-";
    if (r.openblas > 0) {
      std::snprintf(blas, sizeof blas, "%.1f", r.openblas);
      std::snprintf(ratio, sizeof ratio, "%.3f", r.weft / r.openblas);
    }
    std::printf("%6lld %6lld %6lld | %10.1f %10.1f %10s | %10.3f %13s\n", static_cast<long long>(c.m),
                static_cast<long long>(c.k), static_cast<long long>(c.n), r.weft, r.eigen, blas, r.weft / r.eigen,
                ratio);
    std::fflush(stdout);
  }

  std::printf("\n{\"bench\":\"matmul\",\"dtype\":\"float32\",\"threads\":%d,\"weft_gemm\":\"%s\",\"min_time_s\":%g,"
              "\"cases\":[",
              threads, weft::to_string(weft::cpu_gemm_library()), opt.min_time);
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::printf("%s{\"m\":%lld,\"k\":%lld,\"n\":%lld,\"weft_gflops\":%.2f,\"eigen_gflops\":%.2f,", i ? "," : "",
                static_cast<long long>(r.c.m), static_cast<long long>(r.c.k), static_cast<long long>(r.c.n), r.weft,
                r.eigen);
    if (r.openblas > 0) {
      std::printf("\"openblas_gflops\":%.2f,\"weft_vs_eigen\":%.4f,\"weft_vs_openblas\":%.4f}", r.openblas,
                  r.weft / r.eigen, r.weft / r.openblas);
    } else {
      std::printf("\"openblas_gflops\":null,\"weft_vs_eigen\":%.4f,\"weft_vs_openblas\":null}", r.weft / r.eigen);
    }
  }
  std::printf("]}\n");
  return 0;
}
