// One GPT training step (forward, backward, AdamW) in weft, the weft side of bench/compare_gpt.sh.
//
// Configs: "char" is the example's (nanoGPT's shakespeare_char CPU config: 4 layers, 4 heads, 128
// wide, context 64, batch 12, vocabulary 65); "gpt2" is GPT-2 124M (vocabulary 50257) at llm.c's CPU
// batch 4 x 64. Precisions: 32-true and bf16-mixed, through the precision plugin
// (precision::make_precision): forward under its forward_context, backward and step through it.
// The model is nanoGPT's init (models/gpt.h), AdamW lr 1e-3, betas (0.9, 0.95), weight decay 0.1
// with nanoGPT's grouping; the batch is fixed random ids.
//
// Each case times `--steps` steps after `--warmup` and prints the median and fastest step, and its
// GEMM floor: 6 · (parameters less the position table) · tokens FLOPs (forward 2, backward 4 per
// weight and token; attention's own products are left out) at the measured peak — the FMA peak
// for 32-true, the bf16 peak (bench/bf16_peak.h) for bf16-mixed. One JSON line per case.
//
// Usage: bench_gpt [--config char|gpt2|both] [--precision 32-true|bf16-mixed|both] [--steps N]
//                  [--warmup N] [--threads N] [--device cpu|cuda]
// --device cuda runs the model, batch and optimizer on the GPU (a build with -DWEFT_CUDA=ON), each
// phase timed to the device's synchronisation; its GEMM floor is left out (no GPU peak is measured).
// Beside the whole step it prints the medians of its three phases (forward with the loss,
// backward, AdamW with zero_grad), a first answer to where the time goes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bf16_peak.h"
#include "fma_peak.h"
#include "weft.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<std::string> configs = {"char", "gpt2"};
  std::vector<std::string> precisions = {"32-true", "bf16-mixed"};
  int steps = 10;
  int warmup = 2;
  int threads = 2;
  std::string device = "cpu";
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "bench_gpt: %s\nusage: bench_gpt [--config char|gpt2|both] [--precision 32-true|bf16-mixed|both] "
               "[--steps N] [--warmup N] [--threads N] [--device cpu|cuda]\n",
               problem.c_str());
  std::exit(2);
}

int positive(const char* text, const char* flag) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 1 || v > 100000) usage(std::string(flag) + " expects a whole number >= 1");
  return static_cast<int>(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--config") {
      if (v == "both") o.configs = {"char", "gpt2"};
      else if (v == "char" || v == "gpt2") o.configs = {v};
      else usage("--config expects char, gpt2 or both, got " + v);
    } else if (a == "--precision") {
      if (v == "both") o.precisions = {"32-true", "bf16-mixed"};
      else if (v == "32-true" || v == "bf16-mixed") o.precisions = {v};
      else usage("--precision expects 32-true, bf16-mixed or both, got " + v);
    } else if (a == "--steps") {
      o.steps = positive(v.c_str(), "--steps");
    } else if (a == "--warmup") {
      o.warmup = positive(v.c_str(), "--warmup");
    } else if (a == "--threads") {
      o.threads = positive(v.c_str(), "--threads");
    } else if (a == "--device") {
      if (v != "cpu" && v != "cuda") usage("--device expects cpu or cuda, got " + v);
      if (v == "cuda" && !weft::cuda::is_available()) usage("--device cuda: " + weft::cuda::unavailable_reason());
      o.device = v;
    } else {
      usage("unknown option " + a);
    }
  }
  return o;
}

struct Case {
  weft::models::GPTConfig config;
  int64_t batch;
  int64_t context;
};

Case make_case(const std::string& name) {
  if (name == "gpt2") return {weft::models::GPTConfig::gpt2_124m(), 4, 64};
  weft::models::GPTConfig c;
  c.vocab_size = 65;
  c.block_size = 64;
  c.n_layer = 4;
  c.n_head = 4;
  c.n_embd = 128;
  return {c, 12, 64};
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Timing {
  double median_ms, min_ms, forward_ms, backward_ms, step_ms;  // the last three: medians
};

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

Timing run_case(const Case& c, const std::string& precision_name, const Options& o) {
  using namespace weft;
  manual_seed(1337);
  std::unique_ptr<precision::Precision> plugin = precision::make_precision(precision_name);
  auto gpt = std::make_shared<models::GPTImpl>(c.config);
  plugin->convert_module(*gpt);
  const Device device(o.device);
  gpt->to(device);
  optim::AdamWOptions adamw_options;
  adamw_options.lr = 1e-3;
  adamw_options.betas = {0.9, 0.95};
  adamw_options.weight_decay = 0.1;
  optim::AdamW adamw = models::make_gpt_adamw(*gpt, adamw_options);
  Generator gen(7);
  const Tensor x = randint(0, c.config.vocab_size, {c.batch, c.context}, TensorOptions(DType::Int64), &gen).to(device);
  const Tensor y = randint(0, c.config.vocab_size, {c.batch, c.context}, TensorOptions(DType::Int64), &gen).to(device);
  // A GPU runs ahead of the host: each phase ends when the device has done its work.
  const auto settled = [&] {
    if (device.is_cuda()) cuda::synchronize();
  };

  std::vector<double> total, forward, backward, step;
  for (int i = 0; i < o.warmup + o.steps; ++i) {
    const Clock::time_point t0 = Clock::now();
    Tensor loss;
    {
      precision::Context ctx = plugin->forward_context();
      loss = gpt->loss(x, y);
    }
    settled();
    const double t_forward = ms_since(t0);
    plugin->backward(loss, gpt.get());
    settled();
    const double t_backward = ms_since(t0);
    plugin->optimizer_step(adamw);
    adamw.zero_grad();
    settled();
    const double t_total = ms_since(t0);
    if (i < o.warmup) continue;
    total.push_back(t_total);
    forward.push_back(t_forward);
    backward.push_back(t_backward - t_forward);
    step.push_back(t_total - t_backward);
  }
  return {median(total), *std::min_element(total.begin(), total.end()), median(forward), median(backward),
          median(step)};
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  weft::set_num_threads(o.threads);
  const bench::FmaPeak peak = bench::measure_fma_peak(o.threads);
  const bench::Bf16Peak peak_bf16 = bench::bf16_peak(peak, o.threads);
  const bool gpu = o.device == "cuda";
  std::printf("bench_gpt: one training step on the %s, %d threads, median of %d steps after %d warm-up\n%s\nbf16 peak "
              "%.1f GFLOP/s (%s)\n",
              gpu ? weft::cuda::get_device_properties().name.c_str() : "cpu", o.threads, o.steps, o.warmup,
              peak.explain().c_str(), peak_bf16.gflops, peak_bf16.how.c_str());
  std::printf("%-5s %-11s %10s %10s %10s %10s %10s %12s\n", "case", "precision", "median ms", "min ms", "fwd ms",
              "bwd ms", "adamw ms", "floor ms");
  for (const std::string& name : o.configs) {
    const Case c = make_case(name);
    const double tokens = static_cast<double>(c.batch * c.context);
    const double flops = 6.0 * static_cast<double>(c.config.num_parameters(false)) * tokens;
    for (const std::string& precision : o.precisions) {
      const Timing t = run_case(c, precision, o);
      // The CPU's peaks say nothing of a GPU's: no floor there.
      const double gflops = gpu ? 0.0 : precision == "bf16-mixed" ? peak_bf16.gflops : peak.gflops();
      const double floor_ms = gpu ? 0.0 : flops / (gflops * 1e9) * 1e3;
      std::printf("%-5s %-11s %10.2f %10.2f %10.2f %10.2f %10.2f %12.2f\n", name.c_str(), precision.c_str(),
                  t.median_ms, t.min_ms, t.forward_ms, t.backward_ms, t.step_ms, floor_ms);
      std::printf("{\"side\": \"weft\", \"config\": \"%s\", \"precision\": \"%s\", \"device\": \"%s\", \"threads\": %d, "
                  "\"steps\": %d, "
                  "\"ms_median\": %.3f, \"ms_min\": %.3f, \"ms_forward\": %.3f, \"ms_backward\": %.3f, "
                  "\"ms_adamw\": %.3f, \"params\": %lld, \"tokens\": %.0f, \"gemm_flops\": %.4g, "
                  "\"peak_gflops\": %.1f, \"gemm_floor_ms\": %.3f, \"kernel\": \"%s\"}\n",
                  name.c_str(), precision.c_str(), o.device.c_str(), o.threads, o.steps, t.median_ms, t.min_ms, t.forward_ms,
                  t.backward_ms, t.step_ms, static_cast<long long>(c.config.num_parameters()), tokens, flops, gflops,
                  floor_ms,
                  gpu ? "cuda" : weft::cpu_gemm_kernel(precision == "bf16-mixed" ? weft::kBFloat16 : weft::kFloat32).c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}
