// weft on a CUDA GPU: the example MLP's training step, GEMM throughput and the caching allocator,
// for bench/compare_cuda.sh to put beside PyTorch's figures (bench/cuda_torch.py) from the same
// run on the same GPU.
//
//   mlp     784-512-512-10, batch 128, AdamW, cross-entropy, through Fabric: fp32 eager, fp32
//           captured as one CUDA graph and replayed, and bf16-mixed; microseconds per step
//           (forward, backward, optimizer step), timed with CUDA events over --steps steps after
//           20 warm-up steps, no host synchronisation inside.
//   gemm    n³ products at 4096 and 8192: float32 (exact), tf32 (cuda::set_allow_tf32), bfloat16,
//           and FP8 E4M3 × E4M3 with per-tensor scales and a bfloat16 result (fp8_gemm, cuBLASLt);
//           TFLOP/s = 2n³ / time.
//   alloc   allocate + free pairs of 1 MiB device tensors per second (host time), and the peak
//           memory the allocator reserved during the fp32 MLP run (PyTorch: max_memory_reserved).
//
// Output: a table, then one line of JSON starting with {"bench":"cuda".
// Needs a GPU: without one it says so and exits with status 2.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "weft.h"

using namespace weft;

namespace {

constexpr int64_t kBatch = 128;

// Milliseconds per call of fn over `calls` calls, timed on the current stream.
template <class Fn>
double gpu_ms(int calls, Fn&& fn) {
  cuda::Event start(true), stop(true);
  start.record();
  for (int i = 0; i < calls; ++i) fn();
  stop.record();
  stop.synchronize();
  return start.elapsed_ms(stop) / calls;
}

struct MlpResult {
  double us_per_step;
  double peak_reserved_mb;
};

// `captured`: the step recorded once as a CUDA graph (cuda::Graph, capturable AdamW) and replayed,
// as PyTorch's fp32_graph mode does.
MlpResult mlp_step(const char* precision, int steps, bool captured = false) {
  fabric::FabricOptions options;
  options.accelerator = "cuda";
  options.precision = precision;
  fabric::Fabric fabric(options);
  fabric::Fabric::seed_everything(0);
  nn::Sequential net;
  net->push_back(nn::Linear(784, 512));
  net->push_back(nn::ReLU());
  net->push_back(nn::Linear(512, 512));
  net->push_back(nn::ReLU());
  net->push_back(nn::Linear(512, 10));
  auto [model, optimizer] = fabric.setup(net, optim::AdamW(net->parameters(), {.lr = 1e-3, .capturable = captured}));
  Generator gen(1);
  const Tensor x = fabric.to_device(rand({kBatch, 784}, {}, &gen));
  const Tensor y = fabric.to_device(randint(0, 10, {kBatch}, {}, &gen));
  auto step = [&, &model = model, &optimizer = optimizer] {
    optimizer.zero_grad();
    fabric.backward(cross_entropy(model(x), y), &model);
    optimizer.step();
  };
  std::optional<cuda::Graph> graph;
  if (captured) {
    graph.emplace();
    for (int i = 0; i < 3; ++i) graph->warm_up(step);  // cuda.h's warm-up rule
    graph->capture(step);
  }
  auto timed = [&] { graph ? graph->replay() : step(); };
  for (int i = 0; i < 20; ++i) timed();
  cuda::synchronize();
  cuda::reset_peak_memory_stats();
  const double ms = gpu_ms(steps, timed);
  return {ms * 1e3, static_cast<double>(cuda::memory_stats().reserved_peak) / 1e6};
}

double gemm_tflops(const std::string& kind, int64_t n) {
  const Device gpu("cuda");
  Generator gen(2);
  cuda::set_allow_tf32(kind == "tf32");
  const int calls = n >= 8192 ? 10 : 30;
  double ms = 0;
  if (kind == "fp8") {
    using precision::Fp8Tensor;
    const Tensor a = precision::fp8_cast(randn({n, n}, {}, &gen), kFloat8E4M3FN, 1.0f).to(gpu);
    const Tensor w = precision::fp8_cast(randn({n, n}, {}, &gen), kFloat8E4M3FN, 1.0f).to(gpu);
    const Fp8Tensor fa(a, 1.0f), fb(w.t(), 1.0f);  // x·Wᵀ: the TN layout cuBLASLt's FP8 takes
    precision::fp8_gemm(fa, fb, kBFloat16);
    ms = gpu_ms(calls, [&] { precision::fp8_gemm(fa, fb, kBFloat16); });
  } else {
    const DType d = kind == "bf16" ? kBFloat16 : kFloat32;
    const Tensor a = randn({n, n}, TensorOptions(d).device(gpu), &gen);
    const Tensor b = randn({n, n}, TensorOptions(d).device(gpu), &gen);
    matmul(a, b);
    ms = gpu_ms(calls, [&] { matmul(a, b); });
  }
  cuda::set_allow_tf32(false);
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / (ms * 1e-3) / 1e12;
}

double alloc_pairs_per_second() {
  const TensorOptions options = TensorOptions(kUInt8).device(Device("cuda"));
  for (int i = 0; i < 100; ++i) empty({1 << 20}, options);
  constexpr int kPairs = 100000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kPairs; ++i) empty({1 << 20}, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return kPairs / seconds;
}

}  // namespace

int main(int argc, char** argv) try {
  int steps = 500;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_cuda [--steps N]\n");
      return 2;
    }
  }
  if (steps < 1) {
    std::fprintf(stderr, "bench_cuda: --steps expects at least 1, got %d\n", steps);
    return 2;
  }
  if (!cuda::is_available()) {
    std::fprintf(stderr, "bench_cuda: needs a CUDA GPU, got none (cuda::is_available() is false); nothing measured\n");
    return 2;
  }
  const std::string gpu_name = cuda::get_device_properties().name;
  const MlpResult fp32 = mlp_step("32-true", steps);
  const MlpResult fp32_graph = mlp_step("32-true", steps, /*captured=*/true);
  const MlpResult bf16 = mlp_step("bf16-mixed", steps);
  std::printf("weft on %s\n\n%-28s %12s\n", gpu_name.c_str(), "MLP step (784-512-512-10)", "us/step");
  std::printf("%-28s %12.1f\n%-28s %12.1f\n%-28s %12.1f\n", "fp32 eager", fp32.us_per_step, "fp32 graph",
              fp32_graph.us_per_step, "bf16-mixed", bf16.us_per_step);

  const char* kinds[] = {"f32", "tf32", "bf16", "fp8"};
  const int64_t sizes[] = {4096, 8192};
  std::string gemm_json;
  std::printf("\n%-10s %12s %12s\n", "GEMM", "4096³", "8192³");
  for (const char* kind : kinds) {
    std::printf("%-10s", kind);
    for (int64_t n : sizes) {
      const double tflops = gemm_tflops(kind, n);
      std::printf(" %12.1f", tflops);
      gemm_json += (gemm_json.empty() ? "" : ", ") + std::string("\"") + kind + "_" + std::to_string(n) +
                   "\": " + std::to_string(tflops);
    }
    std::printf("   TFLOP/s\n");
  }
  const double pairs = alloc_pairs_per_second();
  std::printf("\nallocator: %.0f alloc+free pairs/s (1 MiB), peak reserved on the fp32 MLP run %.1f MB\n", pairs,
              fp32.peak_reserved_mb);
  std::printf("{\"bench\":\"cuda\", \"program\": \"weft\", \"gpu\": \"%s\", \"mlp_us\": {\"fp32_eager\": %.2f, "
              "\"fp32_graph\": %.2f, \"bf16_mixed\": %.2f}, \"gemm_tflops\": {%s}, \"alloc_pairs_per_s\": %.0f, "
              "\"mlp_peak_reserved_mb\": %.2f}\n",
              gpu_name.c_str(), fp32.us_per_step, fp32_graph.us_per_step, bf16.us_per_step, gemm_json.c_str(), pairs,
              fp32.peak_reserved_mb);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_cuda: %s\n", e.what());
  return 1;
}
