// Per-op overhead: what one op costs when the tensors are so small (4 float32 elements) that the
// arithmetic is free and only weft's bookkeeping is left — argument checks, shape and dtype logic,
// allocation, kernel dispatch and, with autograd on, recording the graph node.
//
// The op sequence (bench/op_overhead_torch.py runs the same one in PyTorch):
//   x: (4,) randn, w: (4,) 0.25, both requiring grad
//   per block of K ops:  h = x;  K/4 times: h = sum(relu(mul(add(h, w), w)))   (4 ops)
// The sum makes h a scalar, so the next add broadcasts it against w; with w = 0.25 the values
// stay small and finite. Three figures, each the median over --repeats runs of --ops ops:
//   no_grad        the block under NoGradGuard: op cost without autograd
//   forward        autograd on, the graph is built and dropped: forward + recording
//   with_backward  as forward, plus h.backward() after each block (backward cost spread per op)
//
// Output: a table, then one line of JSON starting with {"bench":"op_overhead".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "weft.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int64_t ops = 200000;
  int64_t every = 16;
  int repeats = 5;
};

enum class Mode { NoGrad, Forward, WithBackward };

// Runs `ops` ops of the block sequence and returns the seconds it took.
double run(Mode mode, const weft::Tensor& x, const weft::Tensor& w, int64_t ops, int64_t every) {
  const auto t0 = Clock::now();
  for (int64_t done = 0; done < ops; done += every) {
    std::optional<weft::NoGradGuard> no_grad;
    if (mode == Mode::NoGrad) no_grad.emplace();
    weft::Tensor h = x;
    for (int64_t i = 0; i < every; i += 4) h = weft::sum(weft::relu(weft::mul(weft::add(h, w), w)));
    if (mode == Mode::WithBackward) h.backward();
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median_us_per_op(Mode mode, const weft::Tensor& x, const weft::Tensor& w, const Options& o) {
  run(mode, x, w, std::max<int64_t>(o.ops / 10, o.every), o.every);  // warm-up
  std::vector<double> us;
  for (int r = 0; r < o.repeats; ++r) {
    const int64_t ops = o.ops / o.every * o.every;
    us.push_back(run(mode, x, w, ops, o.every) / static_cast<double>(ops) * 1e6);
  }
  std::nth_element(us.begin(), us.begin() + static_cast<int64_t>(us.size() / 2), us.end());
  return us[us.size() / 2];
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--ops" && i + 1 < argc) {
      o.ops = std::atoll(argv[++i]);
    } else if (arg == "--every" && i + 1 < argc) {
      o.every = std::atoll(argv[++i]);
    } else if (arg == "--repeats" && i + 1 < argc) {
      o.repeats = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: bench_op_overhead [--ops N] [--every K] [--repeats R]\n"
                   "  --ops N      ops per timed run (default 200000)\n"
                   "  --every K    ops per graph, then backward; a multiple of 4 (default 16)\n"
                   "  --repeats R  timed runs; the median is reported (default 5)\n");
      std::exit(arg == "--help" ? 0 : 2);
    }
  }
  if (o.every < 4 || o.every % 4 != 0 || o.ops < o.every || o.repeats < 1) {
    std::fprintf(stderr, "bench_op_overhead: need --every a positive multiple of 4, --ops >= --every, --repeats >= 1\n");
    std::exit(2);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  weft::Generator gen(1234);
  const weft::Tensor x = weft::randn({4}, weft::TensorOptions().requires_grad(), &gen);
  const weft::Tensor w = weft::full({4}, 0.25, weft::TensorOptions().requires_grad());

  const double no_grad = median_us_per_op(Mode::NoGrad, x, w, o);
  const double forward = median_us_per_op(Mode::Forward, x, w, o);
  const double with_backward = median_us_per_op(Mode::WithBackward, x, w, o);

  std::printf("bench_op_overhead: weft, 4-element float32 ops (add, mul, relu, sum), backward every %lld ops\n",
              static_cast<long long>(o.every));
  std::printf("median of %d runs of %lld ops\n\n", o.repeats, static_cast<long long>(o.ops));
  std::printf("%-36s %10s\n", "mode", "us/op");
  std::printf("%-36s %10.3f\n", "no_grad (op only)", no_grad);
  std::printf("%-36s %10.3f\n", "forward (op + graph recording)", forward);
  std::printf("%-36s %10.3f\n", "with_backward (forward + backward)", with_backward);
  std::printf("\n{\"bench\":\"op_overhead\",\"impl\":\"weft\",\"ops\":%lld,\"every\":%lld,\"repeats\":%d,"
              "\"us_per_op_no_grad\":%.4f,\"us_per_op_forward\":%.4f,\"us_per_op_with_backward\":%.4f}\n",
              static_cast<long long>(o.ops), static_cast<long long>(o.every), o.repeats, no_grad, forward,
              with_backward);
  return 0;
}
