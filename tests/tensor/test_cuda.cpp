// The CUDA backend against the CPU on the same inputs: casts and copies bit for bit, the
// elementwise ops, reductions, products (M ≠ N ≠ K, transposed operands), softmax, the fused
// features and their backwards, index ops, dropout masks (bit-identical through the shared
// Philox), deferred index errors, streams, events and the allocator's counters.
//
// Every case needs a GPU and is reported as skipped by doctest where there is none (and in a
// build without CUDA). Tolerances are PyTorch's per dtype (cuda.md §9); products and reductions
// are compared with a tolerance that grows with the length of the sum.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tensor/all.h"
#include "cuda_test_helpers.h"
#include "error_message.h"

using namespace weft;
using test::check_close;
using test::kGpu;
using test::kNoGpu;

namespace {

void check_equal(const Tensor& gpu, const Tensor& cpu) { check_close(gpu, cpu, 0.0, 0.0); }

double rtol_of(DType d) {
  return d == kFloat64 ? 1e-7 : d == kFloat32 ? 1.3e-6 : d == kFloat16 ? 1e-3 : 1.6e-2;
}

}  // namespace

TEST_CASE("cuda: casts between every pair of dtypes give the CPU's bits" * doctest::skip(kNoGpu)) {
  Generator gen(1);
  const Tensor base = mul(randn({257}, {}, &gen), 300.0);
  const std::vector<DType> dtypes = {kFloat64, kFloat32, kFloat16, kBFloat16, kFloat8E4M3FN, kFloat8E5M2,
                                     kInt8, kUInt8, kInt32, kInt64, kBool};
  for (DType from : dtypes) {
    const Tensor src = base.to(from);
    const Tensor src_gpu = src.to(kGpu);
    check_equal(src_gpu, src);  // host -> device -> host is a plain copy
    for (DType to : dtypes) {
      CAPTURE(from);
      CAPTURE(to);
      check_equal(src_gpu.to(to), src.to(to));
    }
  }
}

TEST_CASE("cuda: strided and broadcast copies" * doctest::skip(kNoGpu)) {
  const Tensor x = arange(24.0).reshape({2, 3, 4});
  const Tensor g = x.to(kGpu);
  check_equal(g.transpose(0, 2).contiguous(), x.transpose(0, 2).contiguous());
  check_equal(g.slice(2, 1, 3).contiguous(), x.slice(2, 1, 3).contiguous());
  Tensor target = zeros({3, 4}, kGpu);  // float32: copy_ converts the int64 row as it broadcasts it
  target.copy_(arange(4.0).to(kGpu));
  check_equal(target, arange(4.0).expand({3, 4}).to(kFloat32));
}

TEST_CASE("cuda: unary and binary ops match the CPU in every floating dtype" * doctest::skip(kNoGpu)) {
  Generator gen(2);
  for (DType d : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    CAPTURE(d);
    const Tensor a = randn({5, 33}, {}, &gen).to(d), b = randn({33}, {}, &gen).to(d);
    const Tensor pos = add(abs(a), 0.5);
    const Tensor ag = a.to(kGpu), bg = b.to(kGpu), pg = pos.to(kGpu);
    const double r = rtol_of(d), at = 1e-5;
    check_close(exp(ag), exp(a), r, at);
    check_close(log(pg), log(pos), r, at);
    check_close(sqrt(pg), sqrt(pos), r, at);
    check_close(rsqrt(pg), rsqrt(pos), r, at);
    check_close(gelu(ag), gelu(a), r, at);
    check_close(gelu(ag, true), gelu(a, true), r, at);
    check_close(silu(ag), silu(a), r, at);
    check_close(sigmoid(ag), sigmoid(a), r, at);
    check_close(tanh(ag), tanh(a), r, at);
    check_close(clamp(ag, -0.5, 0.25), clamp(a, -0.5, 0.25), 0, 0);
    check_close(pow(pg, 1.7), pow(pos, 1.7), r, at);
    check_close(add(ag, bg), add(a, b), r, at);  // b broadcast along rows
    check_close(mul(ag, bg), mul(a, b), r, at);
    check_close(div(ag, bg), div(a, b), r, at);
    check_close(maximum(ag, bg), maximum(a, b), 0, 0);
    check_equal(lt(ag, bg), lt(a, b));
    check_equal(where(gt(ag, 0.0), ag, bg), where(gt(a, 0.0), a, b));
  }
  const Tensor i = arange(-6.0, 6.0).to(kInt32);
  check_equal(neg(i.to(kGpu)), neg(i));
  check_equal(abs(i.to(kGpu)), abs(i));
  check_equal(mul(i.to(kGpu), i.to(kGpu)), mul(i, i));
}

TEST_CASE("cuda: reductions, argmax with NaN and ties, column sums" * doctest::skip(kNoGpu)) {
  Generator gen(3);
  const Tensor x = randn({7, 1000}, {}, &gen);
  const Tensor xg = x.to(kGpu);
  check_close(sum(xg, {1}), sum(x, {1}), 1e-5, 1e-4);
  check_close(sum(xg, {0}), sum(x, {0}), 1e-5, 1e-4);
  check_equal(amax(xg, {1}), amax(x, {1}));
  check_equal(argmin(xg, 1), argmin(x, 1));
  const Tensor ties = tensor({1, 3, 3, std::nan(""), 2, std::nan("")});
  check_equal(argmax(ties.to(kGpu)), argmax(ties));
  const Tensor ints = arange(100.0).to(kInt64);
  check_equal(sum(ints.to(kGpu)), sum(ints));
}

TEST_CASE("cuda: matmul with M != N != K, transposed operands, batches and every dtype" * doctest::skip(kNoGpu)) {
  Generator gen(4);
  for (DType d : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    CAPTURE(d);
    const Tensor a = randn({3, 5, 7}, {}, &gen).to(d), b = randn({3, 7, 11}, {}, &gen).to(d);
    const double r = d == kFloat64 ? 1e-12 : d == kFloat32 ? 1e-5 : 2e-2;
    check_close(matmul(a.to(kGpu), b.to(kGpu)), matmul(a, b), r, r * 7);
    const Tensor bt = randn({11, 7}, {}, &gen).to(d);
    check_close(matmul(a.to(kGpu), bt.to(kGpu).transpose(0, 1)), matmul(a, bt.transpose(0, 1)), r, r * 7);
    const Tensor w = randn({11, 7}, {}, &gen).to(d), bias = randn({11}, {}, &gen).to(d);
    const Tensor x2 = randn({5, 7}, {}, &gen).to(d);
    check_close(linear(x2.to(kGpu), w.to(kGpu), bias.to(kGpu)), linear(x2, w, bias), r, r * 7);
    check_close(linear(x2.to(kGpu), w.to(kGpu)), linear(x2, w), r, r * 7);  // cuBLASLt, default epilogue
    const Tensor wide = randn({5, 9}, {}, &gen).to(d);                      // rows padded to 9
    check_close(linear(wide.to(kGpu).narrow(1, 1, 7), w.to(kGpu), bias.to(kGpu)), linear(wide.narrow(1, 1, 7), w, bias),
                r, r * 7);
  }
}

TEST_CASE("cuda: softmax, cross-entropy and layer norm with their backwards" * doctest::skip(kNoGpu)) {
  Generator gen(5);
  const Tensor logits = randn({6, 10}, {}, &gen);
  const Tensor target = from_vector<int64_t>({0, 9, 3, -100, 5, 1}, {6});
  auto run = [&](Device device) {
    Tensor x = logits.to(device).detach();
    x.requires_grad_();
    Tensor loss = cross_entropy(x, target.to(device), Reduction::Mean, -100, 0.1);
    Tensor y = log_softmax(x, 1);
    Tensor ln = layer_norm(x, {10}, ones({10}, device), zeros({10}, device));
    add(add(loss, sum(mul(y, y))), sum(mul(ln, ln))).backward();
    return std::vector<Tensor>{loss, y, ln, x.grad()};
  };
  const auto cpu = run(kCPU);
  const auto gpu = run(kGpu);
  for (size_t k = 0; k < cpu.size(); ++k) {
    CAPTURE(k);
    check_close(gpu[k], cpu[k], 1e-5, 1e-5);
  }
}

TEST_CASE("cuda: dropout masks are the CPU's bit for bit" * doctest::skip(kNoGpu)) {
  for (DType d : {kFloat32, kBFloat16}) {
    const Tensor x = ones({4, 1001}, d);
    Generator a(9), b(9);
    check_equal(dropout(x.to(kGpu), 0.3, true, &a), dropout(x, 0.3, true, &b));
  }
}

TEST_CASE("cuda: index ops, and out-of-range indices reported at the next synchronisation" * doctest::skip(kNoGpu)) {
  Generator gen(6);
  const Tensor x = randn({5, 4}, {}, &gen);
  const Tensor idx = from_vector<int64_t>({4, 0, 4, 2}, {4});
  check_equal(index_select(x.to(kGpu), 0, idx.to(kGpu)), index_select(x, 0, idx));
  const Tensor src = randn({4, 4}, {}, &gen);
  check_close(index_add(x.to(kGpu), 0, idx.to(kGpu), src.to(kGpu)), index_add(x, 0, idx, src), 1e-6, 1e-6);
  const Tensor gidx = from_vector<int64_t>({3, 0, 1, 1, 2, 2, 0, 3}, {2, 4});
  check_equal(gather(x.to(kGpu), 0, gidx.to(kGpu)), gather(x, 0, gidx));
  const Tensor bad = from_vector<int64_t>({7}, {1});
  const std::string e = error_of([&] { index_select(x.to(kGpu), 0, bad.to(kGpu)).to(kCPU); });
  CHECK(e == "[index_select] index 7 is out of bounds for size 5 (found on cuda:0)");
  cuda::synchronize();  // the error was raised once and cleared
}

TEST_CASE("cuda: streams order work through events; the allocator counts and reuses" * doctest::skip(kNoGpu)) {
  const cuda::Stream side = cuda::new_stream();
  Tensor x = ones({1 << 20}, kGpu);
  cuda::Event ready;
  ready.record(cuda::current_stream());
  {
    cuda::StreamGuard guard(side);
    CHECK(cuda::current_stream() == side);
    ready.wait(side);
    x.mul_(3.0);
    cuda::record_stream(x, side);
    side.synchronize();
  }
  CHECK(x.sum().item<double>() == 3.0 * (1 << 20));
  cuda::reset_peak_memory_stats();
  const auto before = cuda::memory_stats();
  { const Tensor t = empty({1000}, kGpu); }
  const auto after = cuda::memory_stats();
  CHECK(after.allocations == before.allocations + 1);
  CHECK(after.frees == before.frees + 1);
  CHECK(after.allocated == before.allocated);
  CHECK(after.allocated_peak >= before.allocated + 4096);  // 4000 bytes rounded to the 512-byte unit
  CHECK(cuda::is_pinned(cuda::pin_memory(ones({8}))));
  cuda::empty_cache();
}
