// Quantized kernels' throughput, weft's side of bench/run_quant.sh (which adds PyTorch's
// torch._int_mm and fp32 linear, and bitsandbytes' CPU Linear4bit, measured in the same run):
//
//   int8 GEMM      C = A·Bᵀ, int8 -> int32 through the tensor API (packing B every call, as
//                  torch._int_mm gets B unpacked), square 512..4096 and the example MLP's shapes;
//                  GOP/s = 2·M·N·K / t
//   4-bit GEMV     y = x·Wᵀ for one row, NF4 blocks of 64, 4096², 8192² and a matrix whose packed
//                  bytes exceed the last-level cache (16384 × 32768 by default); effective GB/s of
//                  the packed weight and its absmax, against a memcpy of the same number of bytes
//                  on the same threads (the ratio the issue asks ≥ 0.70 of); the default, exact
//                  product (Product4bit::Exact)
//   exact GEMV     the same product, exact and with int8 activations, at 4096² and 2048 × 5632
//                  (a 2048-wide model's MLP down projection): GB/s of the packed weight bytes
//                  alone, against a read-only stream over a buffer of as many bytes on the same
//                  threads (the ratio the issue asks ≥ 0.90 of)
//   Linear4bit     forward of an NF4 layer 4096 × 4096 at batch 1, 8 and 32, in milliseconds, with
//                  a float32 compute dtype (float32 x) and with a bfloat16 one (bfloat16 x: the
//                  product in bfloat16, as bitsandbytes computes on CPUs with AVX-512 BF16)
//   Linear8bitLt   forward of an LLM.int8() inference layer 4096 × 4096 (threshold 6) on a float16
//                  batch of 128, without outliers and with 8 outlier columns (×10: LLMs' outlier
//                  features), in milliseconds
//   training step  forward + backward to the input (what LoRA fine-tuning over a frozen quantized
//                  base runs) of the Linear4bit and of the Linear8bitLt above, batch 128, in ms
//
// Timing: a warm-up call, then calls until --min-time seconds and at least 6 calls; the median
// call is reported (on a busy machine a call whose threads waited a time slice costs many times
// a normal one and would poison a mean). Kernels run at the instruction set cpu_isa() picks.
//
// Output: a table, then one line of JSON starting with {"bench":"quant".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "weft.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace weft;
using namespace weft::precision::quant;

struct Options {
  int threads = 0;
  double min_time = 0.5;
  bool quick = false;  // small sizes only (a smoke test)
};

double median_seconds(const std::function<void()>& fn, double min_time) {
  fn();  // warm-up: first touch, thread start
  std::vector<double> calls;
  double total = 0;
  while (total < min_time || calls.size() < 6) {
    const auto t0 = Clock::now();
    fn();
    calls.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    total += calls.back();
  }
  std::nth_element(calls.begin(), calls.begin() + static_cast<int64_t>(calls.size() / 2), calls.end());
  return calls[calls.size() / 2];
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      o.threads = std::atoi(argv[++i]);
    } else if (arg == "--min-time" && i + 1 < argc) {
      o.min_time = std::atof(argv[++i]);
    } else if (arg == "--quick") {
      o.quick = true;
    } else {
      std::fprintf(stderr,
                   "usage: bench_quant [--threads N] [--min-time SECONDS] [--quick]\n"
                   "  --threads N     threads (default: all cores)\n"
                   "  --min-time S    timed seconds per case (default 0.5)\n"
                   "  --quick         small sizes only, for a smoke test\n");
      std::exit(arg == "--help" ? 0 : 2);
    }
  }
  if (o.threads < 0 || o.min_time <= 0) {
    std::fprintf(stderr, "bench_quant: --threads must be >= 1 and --min-time > 0\n");
    std::exit(2);
  }
  return o;
}

// Random int8 codes in [-127, 127].
Tensor random_int8(int64_t rows, int64_t cols, Generator& gen) {
  return randint(-127, 128, {rows, cols}, kInt8, &gen);
}

struct Gemm8Result {
  int64_t m, n, k;
  double gops = 0;
};

struct GemvResult {
  int64_t n, k;
  double bytes, gbps, memcpy_gbps;
};

struct ExactGemvResult {
  int64_t n, k;
  double packed_bytes, gbps, int8_gbps, stream_gbps;
};

// The packed codes and absmax of an NF4 matrix (n, k), random: speed does not depend on values,
// and drawing a float matrix of the largest size to quantize would take longer than the bench.
struct RandomNf4 {
  std::vector<uint8_t> packed;
  std::vector<float> absmax;
  Weights4bit weights;
  RandomNf4(int64_t n, int64_t k, Generator& gen) {
    const Tensor codes = randint(0, 256, {n * k / 2}, kUInt8, &gen);
    packed.assign(codes.data<uint8_t>(), codes.data<uint8_t>() + codes.numel());
    const Tensor scale = rand({n * k / 64}, {}, &gen);
    absmax.assign(scale.data<float>(), scale.data<float>() + scale.numel());
    weights = {packed.data(), absmax.data(), n, k, 64, QuantKind::NF4};
  }
  double bytes() const { return static_cast<double>(packed.size() + absmax.size() * sizeof(float)); }
};

// memcpy of `bytes` bytes, split over the threads as the GEMV's rows are.
double memcpy_seconds(size_t bytes, double min_time) {
  std::vector<uint8_t> src(bytes, 1), dst(bytes, 0);
  const int64_t parts = std::max(1, num_threads());
  return median_seconds(
      [&] {
        parallel_for(parts, [&](int64_t p) {
          const size_t begin = bytes * static_cast<size_t>(p) / static_cast<size_t>(parts);
          const size_t end = bytes * static_cast<size_t>(p + 1) / static_cast<size_t>(parts);
          std::memcpy(dst.data() + begin, src.data() + begin, end - begin);
        });
      },
      min_time);
}

// A read-only pass over `bytes` bytes, split over the threads as the GEMV's rows are: the fastest
// the GEMV could read its packed weights. The 64-bit words are summed (into a per-thread slot a
// cache line apart, read once at the end) so that the reads cannot be left out.
double stream_seconds(size_t bytes, double min_time) {
  const std::vector<uint64_t> buffer((bytes + 7) / 8, 1);
  const int64_t parts = std::max(1, num_threads());
  std::vector<uint64_t> sums(static_cast<size_t>(parts) * 8);
  const double t = median_seconds(
      [&] {
        parallel_for(parts, [&](int64_t p) {
          const size_t begin = buffer.size() * static_cast<size_t>(p) / static_cast<size_t>(parts);
          const size_t end = buffer.size() * static_cast<size_t>(p + 1) / static_cast<size_t>(parts);
          uint64_t sum = 0;
          for (size_t i = begin; i < end; ++i) sum += buffer[i];
          sums[static_cast<size_t>(p) * 8] += sum;
        });
      },
      min_time);
  uint64_t total = 0;
  for (size_t p = 0; p < sums.size(); p += 8) total += sums[p];
  if (total == 0) std::printf("(empty stream)\n");
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  if (opt.threads > 0) set_num_threads(opt.threads);
  std::printf("bench_quant: %d threads, kernels at %s%s, median call over >= 6 calls and >= %.2f s\n\n",
              num_threads(), std::string(cpu_isa_name(cpu_isa())).c_str(),
              cpu_isa_emulated() ? " (AVX-512 emulated: timings meaningless)" : "", opt.min_time);
  Generator gen(2024);

  // ---- int8 GEMM ----
  std::vector<Gemm8Result> gemm8;
  std::vector<Gemm8Result> shapes = {{128, 512, 784}, {128, 512, 512}, {128, 10, 512}, {512, 512, 512}, {1024, 1024, 1024}};
  if (!opt.quick) shapes.insert(shapes.end(), {{2048, 2048, 2048}, {4096, 4096, 4096}});
  std::printf("int8 GEMM (int8_linear_matmul, B packed every call)\n%6s %6s %6s | %10s\n", "M", "N", "K", "GOP/s");
  for (Gemm8Result s : shapes) {
    const Tensor a = random_int8(s.m, s.k, gen), b = random_int8(s.n, s.k, gen);
    const double t = median_seconds([&] { int8_linear_matmul(a, b); }, opt.min_time);
    s.gops = 2.0 * static_cast<double>(s.m * s.n) * static_cast<double>(s.k) / t / 1e9;
    gemm8.push_back(s);
    std::printf("%6lld %6lld %6lld | %10.1f\n", static_cast<long long>(s.m), static_cast<long long>(s.n),
                static_cast<long long>(s.k), s.gops);
    std::fflush(stdout);
  }

  // ---- 4-bit GEMV against memcpy ----
  std::vector<std::pair<int64_t, int64_t>> gemv_shapes = {{4096, 4096}};
  if (!opt.quick) gemv_shapes.insert(gemv_shapes.end(), {{8192, 8192}, {16384, 32768}});
  std::vector<GemvResult> gemv;
  std::printf("\n4-bit GEMV (NF4, blocks of 64, batch 1) vs memcpy of the same bytes\n%6s %6s | %9s %10s %12s %8s\n",
              "N", "K", "MiB", "GB/s", "memcpy GB/s", "ratio");
  for (const auto& [n, k] : gemv_shapes) {
    const RandomNf4 w(n, k, gen);
    const Tensor x = randn({1, k}, {}, &gen);
    std::vector<float> y(static_cast<size_t>(n));
    const double t = median_seconds([&] { gemm_4bit(x.data<float>(), 1, w.weights, y.data()); }, opt.min_time);
    const double tc = memcpy_seconds(static_cast<size_t>(w.bytes()), opt.min_time);
    GemvResult r{n, k, w.bytes(), w.bytes() / t / 1e9, w.bytes() / tc / 1e9};
    gemv.push_back(r);
    std::printf("%6lld %6lld | %9.1f %10.1f %12.1f %8.2f\n", static_cast<long long>(n), static_cast<long long>(k),
                r.bytes / (1 << 20), r.gbps, r.memcpy_gbps, r.gbps / r.memcpy_gbps);
    std::fflush(stdout);
  }

  // ---- exact GEMV against a read-only stream ----
  std::vector<ExactGemvResult> exact_gemv;
  std::printf("\n4-bit GEMV (NF4, blocks of 64, batch 1), exact and int8 activations: GB/s of the packed weight\n"
              "bytes vs a read-only stream over as many bytes\n%6s %6s | %9s %10s %10s %12s %8s\n",
              "N", "K", "MiB", "exact GB/s", "int8 GB/s", "stream GB/s", "ratio");
  for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{{4096, 4096}, {2048, 5632}}) {
    const RandomNf4 w(n, k, gen);
    const Tensor x = randn({1, k}, {}, &gen);
    std::vector<float> y(static_cast<size_t>(n));
    const double packed_bytes = static_cast<double>(w.packed.size());
    const double t = median_seconds([&] { gemm_4bit(x.data<float>(), 1, w.weights, y.data()); }, opt.min_time);
    const double t8 = median_seconds(
        [&] { gemm_4bit(x.data<float>(), 1, w.weights, y.data(), Product4bit::Int8Activations); }, opt.min_time);
    const double ts = stream_seconds(w.packed.size(), opt.min_time);
    const ExactGemvResult r{n, k, packed_bytes, packed_bytes / t / 1e9, packed_bytes / t8 / 1e9, packed_bytes / ts / 1e9};
    exact_gemv.push_back(r);
    std::printf("%6lld %6lld | %9.1f %10.1f %10.1f %12.1f %8.2f\n", static_cast<long long>(n), static_cast<long long>(k),
                packed_bytes / (1 << 20), r.gbps, r.int8_gbps, r.stream_gbps, r.gbps / r.stream_gbps);
    std::fflush(stdout);
  }

  // ---- Linear4bit forward ----
  const int64_t features = opt.quick ? 1024 : 4096;
  manual_seed(7);
  Linear4bit layer(features, features, false, Linear4bitOptions{QuantKind::NF4, true, 64, kFloat32});
  Linear4bit layer_bf16(features, features, false, Linear4bitOptions{QuantKind::NF4, true, 64, kBFloat16});
  // weft's own float32 linear of the same shape, the baseline a quantized layer is weighed against.
  const Tensor dense = randn({features, features}, {}, &gen);
  std::printf("\nLinear4bit forward (NF4 + double quantization, %lld x %lld), beside weft's fp32 linear\n"
              "%6s | %10s %10s %10s\n",
              static_cast<long long>(features), static_cast<long long>(features), "batch", "ms", "bf16 ms", "fp32 ms");
  struct LinearTimes {
    int64_t batch;
    double ms, bf16_ms, fp32_ms;
  };
  std::vector<LinearTimes> linear_ms;
  for (int64_t batch : {1, 8, 32}) {
    const Tensor x = randn({batch, features}, {}, &gen);
    const Tensor x_bf16 = x.to(kBFloat16);
    NoGradGuard no_grad;
    const double t = median_seconds([&] { layer(x); }, opt.min_time);
    const double t_bf16 = median_seconds([&] { layer_bf16(x_bf16); }, opt.min_time);
    const double t_fp32 = median_seconds([&] { linear(x, dense); }, opt.min_time);
    linear_ms.push_back({batch, t * 1e3, t_bf16 * 1e3, t_fp32 * 1e3});
    std::printf("%6lld | %10.3f %10.3f %10.3f\n", static_cast<long long>(batch), t * 1e3, t_bf16 * 1e3, t_fp32 * 1e3);
  }

  // ---- Linear8bitLt forward ----
  Linear8bitLt layer8(features, features, false, Linear8bitLtOptions{});
  layer8->quantize_weight(mul(sub(rand({features, features}, kFloat32, &gen), scalar_tensor(0.5)), scalar_tensor(2.0)));
  constexpr int64_t kInt8Batch = 128;
  std::printf("\nLinear8bitLt forward (int8 inference, threshold 6, %lld x %lld), float16 batch of %lld\n%9s | %10s\n",
              static_cast<long long>(features), static_cast<long long>(features), static_cast<long long>(kInt8Batch),
              "outliers", "ms");
  struct Int8LinearTime {
    int64_t outliers;
    double ms;
  };
  std::vector<Int8LinearTime> int8_ms;
  for (int64_t outliers : {0, 8}) {
    Tensor x = randn({kInt8Batch, features}, {}, &gen);
    for (int64_t c = 0; c < outliers; ++c) x.select(1, c * 7).mul_(10.0);
    const Tensor xh = x.to(kFloat16);
    const int64_t found = int8_vectorwise_quant(xh, 6.0).outlier_cols.numel();
    NoGradGuard no_grad;
    const double t = median_seconds([&] { layer8(xh); }, opt.min_time);
    int8_ms.push_back({found, t * 1e3});
    std::printf("%9lld | %10.3f\n", static_cast<long long>(found), t * 1e3);
  }

  // ---- forward + backward to the input, batch 128 ----
  constexpr int64_t kStepBatch = 128;
  const Tensor g = randn({kStepBatch, features}, {}, &gen);
  const Tensor g16 = g.to(kFloat16);
  Tensor x4 = randn({kStepBatch, features}, {}, &gen).requires_grad_(true);
  Tensor x8 = randn({kStepBatch, features}, {}, &gen).to(kFloat16).requires_grad_(true);
  const double step4_ms = median_seconds([&] {
    x4.set_grad(Tensor());
    layer(x4).backward(g);
  }, opt.min_time) * 1e3;
  const double step8_ms = median_seconds([&] {
    x8.set_grad(Tensor());
    layer8(x8).backward(g16);
  }, opt.min_time) * 1e3;
  std::printf("\nforward + backward to the input, batch %lld: Linear4bit %.3f ms, Linear8bitLt (float16) %.3f ms\n",
              static_cast<long long>(kStepBatch), step4_ms, step8_ms);

  std::printf("{\"bench\":\"quant\",\"threads\":%d,\"isa\":\"%s\",\"int8_gemm\":[", num_threads(),
              std::string(cpu_isa_name(cpu_isa())).c_str());
  for (size_t i = 0; i < gemm8.size(); ++i)
    std::printf("%s{\"m\":%lld,\"n\":%lld,\"k\":%lld,\"gops\":%.2f}", i ? "," : "", static_cast<long long>(gemm8[i].m),
                static_cast<long long>(gemm8[i].n), static_cast<long long>(gemm8[i].k), gemm8[i].gops);
  std::printf("],\"gemv_4bit\":[");
  for (size_t i = 0; i < gemv.size(); ++i)
    std::printf("%s{\"n\":%lld,\"k\":%lld,\"bytes\":%.0f,\"gbps\":%.2f,\"memcpy_gbps\":%.2f,\"seconds\":%.6g}",
                i ? "," : "", static_cast<long long>(gemv[i].n), static_cast<long long>(gemv[i].k), gemv[i].bytes,
                gemv[i].gbps, gemv[i].memcpy_gbps, gemv[i].bytes / gemv[i].gbps / 1e9);
  std::printf("],\"gemv_4bit_exact\":[");
  for (size_t i = 0; i < exact_gemv.size(); ++i)
    std::printf("%s{\"n\":%lld,\"k\":%lld,\"packed_bytes\":%.0f,\"gbps\":%.2f,\"int8_gbps\":%.2f,"
                "\"stream_gbps\":%.2f,\"ratio\":%.3f}",
                i ? "," : "", static_cast<long long>(exact_gemv[i].n), static_cast<long long>(exact_gemv[i].k),
                exact_gemv[i].packed_bytes, exact_gemv[i].gbps, exact_gemv[i].int8_gbps, exact_gemv[i].stream_gbps,
                exact_gemv[i].gbps / exact_gemv[i].stream_gbps);
  std::printf("],\"linear4bit\":{\"features\":%lld", static_cast<long long>(features));
  for (const LinearTimes& l : linear_ms)
    std::printf(",\"batch%lld_ms\":%.4f,\"bf16_batch%lld_ms\":%.4f,\"fp32_batch%lld_ms\":%.4f",
                static_cast<long long>(l.batch), l.ms, static_cast<long long>(l.batch), l.bf16_ms,
                static_cast<long long>(l.batch), l.fp32_ms);
  std::printf("},\"linear8bit\":{\"features\":%lld,\"batch\":%lld,\"cases\":[", static_cast<long long>(features),
              static_cast<long long>(kInt8Batch));
  for (size_t i = 0; i < int8_ms.size(); ++i)
    std::printf("%s{\"outliers\":%lld,\"ms\":%.4f}", i ? "," : "", static_cast<long long>(int8_ms[i].outliers),
                int8_ms[i].ms);
  std::printf("]},\"train_step\":{\"batch\":%lld,\"linear4bit_ms\":%.4f,\"linear8bit_ms\":%.4f}}\n",
              static_cast<long long>(kStepBatch), step4_ms, step8_ms);
  return 0;
}
