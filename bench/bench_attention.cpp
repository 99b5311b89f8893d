// Fused causal attention, forward and forward + backward, against PyTorch's CPU SDPA (its flash
// kernel), measured by bench/compare_attention.sh in the same run (bench/attention_torch.py).
//
// Shape: batch 1, 12 heads of 64 (GPT-2 small's), contexts 256, 1024 and 4096, float32 and
// bfloat16, is_causal. q, k and v are (1, T, 12, 64) leaves viewed as (1, 12, T, 64), as a model
// produces them; the backward gets a fixed random gradient. Two threads by default (--threads).
//
// Columns: the median forward (no grad) and forward + backward call in ms, and the forward's peak
// extra memory: the growth of the process's peak resident set (VmHWM, reset through
// /proc/self/clear_refs) over the case's first forward, after weft's CPU cache is emptied, in MiB. Attention
// that materialised the scores would need 12·T² floats (768 MiB at T = 4096); the fused kernel
// needs its output and per-thread tiles, linear in T.
//
// Output: a table, then one line of JSON starting with {"bench":"attention".
//   bench_attention [--threads N] [--min-time S] [--quick]   (--quick: contexts 256 and 1024)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "median_timer.h"
#include "weft.h"

namespace {

using bench::MedianTimer;

// VmHWM or VmRSS of this process in KiB.
long status_kib(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::strlen(field));
  return -1;
}

// Peak resident growth, in MiB, over one call of fn; -1 where the kernel refuses the reset.
double peak_extra_mib(const std::function<void()>& fn) {
  weft::cpu_allocator::empty_cache();
  std::ofstream reset("/proc/self/clear_refs");
  if (!(reset << "5" << std::flush)) return -1;
  const long before = status_kib("VmRSS:");
  fn();
  return static_cast<double>(status_kib("VmHWM:") - before) / 1024.0;
}

double median_ms(const std::function<void()>& fn, double min_time) {
  MedianTimer timer(fn);
  while (!timer.done(min_time)) timer.call();
  return timer.median() * 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  double min_time = 1.0;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (arg == "--min-time" && i + 1 < argc) min_time = std::atof(argv[++i]);
    else if (arg == "--quick") quick = true;
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--min-time S] [--quick]\n", argv[0]);
      return 2;
    }
  }
  weft::set_num_threads(threads);
  const int64_t heads = 12, head_size = 64;
  std::vector<int64_t> contexts = {256, 1024, 4096};
  if (quick) contexts = {256, 1024};

  std::printf("attention (causal, batch 1, %lld heads x %lld), weft kernels: float32 %s, bfloat16 %s, %d threads\n",
              static_cast<long long>(heads), static_cast<long long>(head_size), weft::attention_kernel_name(),
              weft::attention_kernel_name(weft::kCPU, weft::DType::BFloat16), threads);
  std::printf("%-9s %6s %12s %16s %14s\n", "dtype", "T", "forward ms", "fwd+bwd ms", "peak extra MiB");
  std::string json = std::string("{\"bench\":\"attention\",\"attention\":\"") + weft::attention_kernel_name() +
                     "\",\"attention_bf16\":\"" + weft::attention_kernel_name(weft::kCPU, weft::DType::BFloat16) +
                     "\",\"threads\":" + std::to_string(threads) + ",\"cases\":[";
  bool first = true;
  for (const weft::DType dtype : {weft::kFloat32, weft::DType::BFloat16}) {
    for (const int64_t T : contexts) {
      weft::Generator gen(T);
      auto leaf = [&] {
        return weft::randn({1, T, heads, head_size}, weft::kFloat32, &gen).to(dtype).requires_grad_();
      };
      weft::Tensor q = leaf(), k = leaf(), v = leaf();
      const weft::Tensor grad = weft::randn({1, heads, T, head_size}, weft::kFloat32, &gen).to(dtype);
      auto forward = [&] {
        return weft::scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  weft::Tensor(), 0.0, true);
      };
      // First, before the timings leave freed blocks behind to be reused.
      const double peak = peak_extra_mib([&] {
        weft::NoGradGuard no_grad;
        forward();
      });
      const double fwd = median_ms(
          [&] {
            weft::NoGradGuard no_grad;
            forward();
          },
          min_time);
      const double fwd_bwd = median_ms(
          [&] {
            for (weft::Tensor* t : {&q, &k, &v}) t->set_grad(weft::Tensor());
            forward().backward(grad);
          },
          min_time);
      const char* name = dtype == weft::kFloat32 ? "float32" : "bfloat16";
      std::printf("%-9s %6lld %12.3f %16.3f %14.1f\n", name, static_cast<long long>(T), fwd, fwd_bwd, peak);
      char buffer[256];
      std::snprintf(buffer, sizeof buffer,
                    "%s{\"dtype\":\"%s\",\"T\":%lld,\"forward_ms\":%.4f,\"fwd_bwd_ms\":%.4f,\"peak_extra_mib\":%.2f}",
                    first ? "" : ",", name, static_cast<long long>(T), fwd, fwd_bwd, peak);
      json += buffer;
      first = false;
    }
  }
  std::printf("%s]}\n", json.c_str());
  return 0;
}
