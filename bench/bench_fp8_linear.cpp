// An FP8 linear layer's forward + backward against weft's float32 and bfloat16 linear layers,
// measured in the same run on the same shapes.
//
// One step is y = layer(x); y.backward(g) with x and the parameters requiring gradients, so it
// runs the three GEMMs of training (y = x·Wᵀ, dx = dy·W, dW = dyᵀ·x, 6·B·in·out FLOP):
//   fp32  nn::Linear in float32
//   bf16  nn::Linear with bfloat16 weights and activations (bf16-true)
//   fp8   Fp8Linear with bfloat16 master weights and activations inside fp8_autocast
//         (DelayedScaling, HYBRID): the casts to E4M3/E5M2, the FP8 GEMMs (exact bfloat16 decode
//         and weft's matmul with a float32 result) and the scale bookkeeping included.
// Shapes: the MLP's two FP8 layers at batch 128 (784 -> 512, 512 -> 512) and 2048³.
// Goal: fp8 >= 0.9x the bf16 layer's speed, with half its weight bytes in the GEMMs (the FP8
// weight copy is 1 byte per parameter against bfloat16's 2; both keep bfloat16 master weights).
//
// Timing: after a warm-up step each, the three run in ABCCBA order, one step at a time, until
// each has run --min-time seconds; the median step counts.
//
// Output: a table, then one line of JSON starting with {"bench":"fp8_linear".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "median_timer.h"
#include "weft.h"

namespace {

using namespace weft;

using Timer = bench::MedianTimer;

struct Case {
  int64_t batch, in, out;
};

struct Result {
  Case c;
  double fp32_ms, bf16_ms, fp8_ms;
};

// One training step of `layer` on x with output gradient g.
void step(nn::Module& layer, Tensor& x, const Tensor& g, bool fp8) {
  layer.zero_grad();
  x.set_grad(Tensor());
  Tensor y;
  {
    precision::Fp8AutocastGuard autocast(fp8, precision::DelayedScaling{.amax_history_len = 16});
    y = layer.forward(x);
  }
  y.backward(g);
}

}  // namespace

int main(int argc, char** argv) {
  double min_time = 1.0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--min-time" && i + 1 < argc) {
      min_time = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_fp8_linear [--min-time SECONDS]\n");
      return arg == "--help" ? 0 : 2;
    }
  }
  std::printf("bench_fp8_linear: forward + backward of one linear layer, %d threads, GEMM library %s, instruction "
              "set %s; median step over >= %d steps and >= %.2f s each\n\n",
              num_threads(), to_string(cpu_gemm_library()), std::string(cpu_isa_name(cpu_isa())).c_str(), static_cast<int>(Timer::kMinCalls),
              min_time);
  std::printf("%5s %5s %5s | %9s %9s %9s | %8s %8s | %13s %12s\n", "B", "in", "out", "fp32 ms", "bf16 ms", "fp8 ms",
              "fp8/bf16", "fp8/fp32", "bf16 W bytes", "fp8 W bytes");
  std::fflush(stdout);

  const std::vector<Case> cases = {{128, 784, 512}, {128, 512, 512}, {2048, 2048, 2048}};
  std::vector<Result> results;
  for (const Case& c : cases) {
    manual_seed(1);
    nn::Linear fp32(c.in, c.out);
    nn::Linear bf16(c.in, c.out);
    bf16->to(kBFloat16);
    precision::Fp8Linear fp8(c.in, c.out, true, 16);
    fp8->to(kBFloat16);
    Generator gen(2);
    Tensor x32 = randn({c.batch, c.in}, kFloat32, &gen).requires_grad_();
    Tensor x16 = x32.detach().to(kBFloat16).requires_grad_();
    Tensor x8 = x16.detach().clone().requires_grad_();
    const Tensor g32 = mul(randn({c.batch, c.out}, kFloat32, &gen), 1e-2);
    const Tensor g16 = g32.to(kBFloat16);

    Timer t32([&] { step(*fp32, x32, g32, false); });
    Timer t16([&] { step(*bf16, x16, g16, false); });
    Timer t8([&] { step(*fp8, x8, g16, true); });
    Timer* order[] = {&t32, &t16, &t8, &t8, &t16, &t32};
    for (int i = 0; !t32.done(min_time) || !t16.done(min_time) || !t8.done(min_time); ++i) order[i % 6]->call();
    const Result r{c, 1e3 * t32.median(), 1e3 * t16.median(), 1e3 * t8.median()};
    results.push_back(r);
    const long long params = static_cast<long long>(c.in * c.out);
    std::printf("%5lld %5lld %5lld | %9.3f %9.3f %9.3f | %7.3fx %7.3fx | %13lld %12lld\n",
                static_cast<long long>(c.batch), static_cast<long long>(c.in), static_cast<long long>(c.out),
                r.fp32_ms, r.bf16_ms, r.fp8_ms, r.bf16_ms / r.fp8_ms, r.fp32_ms / r.fp8_ms, 2 * params, params);
    std::fflush(stdout);
  }
  std::printf("\n(fp8/bf16 and fp8/fp32 are speed ratios: the other layer's time over the FP8 layer's.)\n");
  std::printf("\n{\"bench\":\"fp8_linear\",\"threads\":%d,\"gemm\":\"%s\",\"isa\":\"%s\",\"min_time_s\":%g,\"cases\":[",
              num_threads(), to_string(cpu_gemm_library()), std::string(cpu_isa_name(cpu_isa())).c_str(), min_time);
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const long long params = static_cast<long long>(r.c.in * r.c.out);
    std::printf("%s{\"batch\":%lld,\"in\":%lld,\"out\":%lld,\"fp32_ms\":%.4f,\"bf16_ms\":%.4f,\"fp8_ms\":%.4f,"
                "\"fp8_speed_vs_bf16\":%.4f,\"fp8_speed_vs_fp32\":%.4f,\"bf16_gemm_weight_bytes\":%lld,"
                "\"fp8_gemm_weight_bytes\":%lld}",
                i ? "," : "", static_cast<long long>(r.c.batch), static_cast<long long>(r.c.in),
                static_cast<long long>(r.c.out), r.fp32_ms, r.bf16_ms, r.fp8_ms, r.bf16_ms / r.fp8_ms,
                r.fp32_ms / r.fp8_ms, 2 * params, params);
  }
  std::printf("]}\n");
  return 0;
}
