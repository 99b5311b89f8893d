// scaled_dot_product_attention's fused kernels (tensor/attention_kernels.h) against the unfused
// composition of existing ops computed in float64, at every instruction-set level this CPU has;
// gradients against the composition's (itself checked with float64 finite differences); the
// dropout stream; fully masked rows (zeros, as PyTorch >= 2.5); strided inputs; PyTorch's errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cuda_test_helpers.h"
#include "error_message.h"
#include "gradcheck.h"
#include "tensor/all.h"
#include "tensor/cuda/attention_launch.h"

namespace weft {
namespace {

using testing::arg;

enum class MaskKind { None, Causal, Bool, Float };

Tensor normal(const Shape& shape, uint64_t seed, DType dtype = kFloat32) {
  Generator g(seed);
  return randn(shape, kFloat64, &g).to(dtype);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
  return worst;
}

// A bool mask that keeps about three positions in four, plus (for the float one) finite biases.
Tensor make_mask(MaskKind kind, const Shape& shape, uint64_t seed) {
  Generator g(seed);
  const Tensor u = rand(shape, kFloat64, &g);
  if (kind == MaskKind::Bool) return ge(u, 0.25);
  return mul(u, -3.0).to(kFloat32);
}

struct Case {
  Shape q, k, v;
  MaskKind mask = MaskKind::None;
  Shape mask_shape = {};
  bool gqa = false;
};

struct Result {
  Tensor out, dq, dk, dv;
};

// Runs attention on copies of the inputs in `dtype` (float64: the unfused composition) and
// backpropagates the weights r.
Result run(const Case& c, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& r,
           DType dtype) {
  Tensor qd = q.to(dtype).detach().requires_grad_(), kd = k.to(dtype).detach().requires_grad_(),
         vd = v.to(dtype).detach().requires_grad_();
  const Tensor m = mask.defined() && mask.dtype() != DType::Bool && dtype == kFloat64 ? mask.to(kFloat64) : mask;
  const Tensor out = scaled_dot_product_attention(qd, kd, vd, m, 0.0, c.mask == MaskKind::Causal, std::nullopt, c.gqa);
  mul(out.to(kFloat64), r).sum().backward();
  return {out.detach(), qd.grad(), kd.grad(), vd.grad()};
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {{2, 3, 70, 16}, {2, 3, 70, 16}, {2, 3, 70, 16}},
      {{2, 3, 70, 16}, {2, 3, 70, 16}, {2, 3, 70, 16}, MaskKind::Causal},
      {{1, 2, 130, 8}, {1, 2, 67, 8}, {1, 2, 67, 5}, MaskKind::Causal},   // L > S, Ev != E
      {{1, 2, 33, 8}, {1, 2, 150, 8}, {1, 2, 150, 8}, MaskKind::Causal},  // L < S
      {{2, 2, 65, 12}, {2, 2, 80, 12}, {2, 2, 80, 7}, MaskKind::Bool, {2, 1, 65, 80}},
      {{2, 2, 65, 12}, {2, 2, 80, 12}, {2, 2, 80, 7}, MaskKind::Float, {65, 80}},
      {{4, 20, 16}, {2, 70, 16}, {2, 70, 16}, MaskKind::Causal, {}, true},  // GQA, 3-D
      {{2, 1, 40, 8}, {1, 3, 40, 8}, {1, 3, 40, 8}},                       // batch broadcast
      {{9, 24}, {17, 24}, {17, 24}},                                        // 2-D
  };
  return all;
}

void check_against_reference(DType dtype, double tol_out, double tol_grad) {
  for (size_t index = 0; index < cases().size(); ++index) {
    const Case& c = cases()[index];
    CAPTURE(index);
    const Tensor q = normal(c.q, 10 + index, kFloat64), k = normal(c.k, 20 + index, kFloat64),
                 v = normal(c.v, 30 + index, kFloat64);
    // Rounded to the dtype first, so both sides see the same inputs.
    const Tensor qr = q.to(dtype).to(kFloat64), kr = k.to(dtype).to(kFloat64), vr = v.to(dtype).to(kFloat64);
    const Tensor mask = c.mask == MaskKind::Bool || c.mask == MaskKind::Float ? make_mask(c.mask, c.mask_shape, 40 + index)
                                                                              : Tensor();
    const Shape out_shape = scaled_dot_product_attention(qr, kr, vr, mask.defined() && mask.dtype() != DType::Bool
                                                                             ? mask.to(kFloat64)
                                                                             : mask,
                                                         0.0, c.mask == MaskKind::Causal, std::nullopt, c.gqa)
                                .shape();
    const Tensor r = normal(out_shape, 50 + index, kFloat64);
    const Result want = run(c, qr, kr, vr, mask, r, kFloat64);
    std::vector<Result> per_level;
    for (const CpuIsa isa : cpu_isas_supported()) {
      CAPTURE(cpu_isa_name(isa));
      CpuIsaGuard guard(isa);
      const Result got = run(c, qr, kr, vr, mask, r, dtype);
      CHECK(got.out.dtype() == dtype);
      CHECK(got.out.shape() == want.out.shape());
      CHECK(max_abs_diff(got.out, want.out) <= tol_out);
      CHECK(max_abs_diff(got.dq, want.dq) <= tol_grad);
      CHECK(max_abs_diff(got.dk, want.dk) <= tol_grad);
      CHECK(max_abs_diff(got.dv, want.dv) <= tol_grad);
      per_level.push_back(got);
    }
    // Every vector level against the scalar reference kernels.
    for (size_t level = 1; level < per_level.size(); ++level) {
      CAPTURE(level);
      CHECK(max_abs_diff(per_level[level].out, per_level[0].out) <= tol_out);
      CHECK(max_abs_diff(per_level[level].dq, per_level[0].dq) <= tol_grad);
    }
  }
}

TEST_CASE("sdpa fused float32 matches the float64 composition at every ISA level, forward and backward") {
  check_against_reference(kFloat32, 2e-5, 1e-4);
}

TEST_CASE("sdpa fused bfloat16 and float16 match the float64 composition of the rounded inputs") {
  check_against_reference(DType::BFloat16, 3e-2, 1e-1);
  check_against_reference(DType::Float16, 4e-3, 2e-2);
}

// Below AMX the bfloat16 and float16 forwards widen keys and values and run the float32 kernel:
// their output is the float32 kernel's on the widened inputs, rounded once, bit for bit. Each
// thread widens a head's rows once per call for every query block after it (head_rows_of): three
// heads of three blocks on two threads start the second thread's range in a head's middle, and a
// second call on new keys and values of the same shape must not see the first call's rows. The
// levels with float32 tiles of their own (the AVX-512 ones below AMX share them).
TEST_CASE("sdpa bfloat16 and float16 forwards are the float32 kernel's on their widened inputs, rounded once") {
  const int saved_threads = num_threads();
  for (const DType dtype : {DType::BFloat16, DType::Float16})
    for (const CpuIsa isa : cpu_isas_supported()) {
      if (isa != CpuIsa::Scalar && isa != CpuIsa::Avx2 && isa != CpuIsa::Avx512) continue;
      CpuIsaGuard guard(isa);
      for (const int threads : {1, 2})
        for (const bool causal : {false, true})
          for (uint64_t call = 0; call < 2; ++call) {
            CAPTURE(dtype);
            CAPTURE(cpu_isa_name(isa));
            CAPTURE(threads);
            CAPTURE(causal);
            CAPTURE(call);
            set_num_threads(threads);
            const uint64_t seed = 100 + 10 * call;
            const Tensor q = normal({1, 3, 260, 16}, seed, dtype), k = normal({1, 3, 260, 16}, seed + 1, dtype),
                         v = normal({1, 3, 260, 16}, seed + 2, dtype);
            const Tensor got = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, causal);
            const Tensor want = scaled_dot_product_attention(q.to(kFloat32), k.to(kFloat32), v.to(kFloat32),
                                                             Tensor(), 0.0, causal)
                                    .to(dtype);
            CHECK(max_abs_diff(got, want) == 0.0);
          }
    }
  set_num_threads(saved_threads);
}

TEST_CASE("sdpa float64 composition agrees with float64 finite differences") {
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    testing::gradcheck(
        [causal](const std::vector<Tensor>& x) {
          return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, causal);
        },
        {arg({1, 2, 5, 3}, 1), arg({1, 2, 6, 3}, 2), arg({1, 2, 6, 4}, 3)});
  }
}

TEST_CASE("sdpa fused float32 gradient agrees with float64 finite differences") {
  // Central differences of the float64 forward at a few elements of each input.
  const Tensor q = normal({1, 2, 9, 4}, 61, kFloat64), k = normal({1, 2, 11, 4}, 62, kFloat64),
               v = normal({1, 2, 11, 3}, 63, kFloat64), r = normal({1, 2, 9, 3}, 64, kFloat64);
  auto loss64 = [&](const Tensor& qq, const Tensor& kk, const Tensor& vv) {
    return mul(scaled_dot_product_attention(qq, kk, vv, Tensor(), 0.0, true), r).sum().item<double>();
  };
  Tensor qf = q.to(kFloat32).requires_grad_(), kf = k.to(kFloat32).requires_grad_(),
         vf = v.to(kFloat32).requires_grad_();
  mul(scaled_dot_product_attention(qf, kf, vf, Tensor(), 0.0, true).to(kFloat64), r).sum().backward();
  const double eps = 1e-6;
  for (int which = 0; which < 3; ++which) {
    const Tensor& base = which == 0 ? q : which == 1 ? k : v;
    const Tensor grad = (which == 0 ? qf : which == 1 ? kf : vf).grad();
    const auto analytic = grad.to_vector<double>();
    for (int64_t e = 0; e < base.numel(); e += 5) {
      CAPTURE(which);
      CAPTURE(e);
      auto shifted = [&](double delta) {
        Tensor t = base.clone();
        t.data<double>()[e] += delta;
        return which == 0 ? loss64(t, k, v) : which == 1 ? loss64(q, t, v) : loss64(q, k, t);
      };
      const double numeric = (shifted(eps) - shifted(-eps)) / (2 * eps);
      CHECK(std::fabs(analytic[static_cast<size_t>(e)] - numeric) <= 1e-4 + 1e-4 * std::fabs(numeric));
    }
  }
}

TEST_CASE("sdpa reads strided inputs: (B, T, H, E) views transposed to (B, H, T, E)") {
  const Tensor q = normal({2, 70, 3, 16}, 71), k = normal({2, 70, 3, 16}, 72), v = normal({2, 70, 3, 16}, 73);
  const Tensor qt = q.transpose(1, 2), kt = k.transpose(1, 2), vt = v.transpose(1, 2);
  for (const CpuIsa isa : cpu_isas_supported()) {
    CAPTURE(cpu_isa_name(isa));
    CpuIsaGuard guard(isa);
    const Tensor strided = scaled_dot_product_attention(qt, kt, vt, Tensor(), 0.0, true);
    const Tensor dense = scaled_dot_product_attention(qt.contiguous(), kt.contiguous(), vt.contiguous(), Tensor(),
                                                      0.0, true);
    CHECK(max_abs_diff(strided, dense) == 0.0);
    // The output is (B, T, H, Ev) in memory, so the model's transpose back copies nothing.
    CHECK(strided.transpose(1, 2).is_contiguous());
    // Their gradients are laid out as the inputs are, (B, T, H, E) in memory, so that the way back
    // to the inputs' layout copies nothing (a node between the views and the attention sees what
    // arrives), and their values are the dense inputs' gradients.
    const Tensor gy = normal({2, 3, 70, 16}, 75);
    auto gradients = [&](bool transposed, std::vector<Tensor>& arrived) {
      std::vector<Tensor> leaves{q.detach().requires_grad_(), k.detach().requires_grad_(), v.detach().requires_grad_()};
      std::vector<Tensor> inputs;
      for (size_t i = 0; i < 3; ++i) {
        const Tensor view = transposed ? leaves[i].transpose(1, 2) : leaves[i].transpose(1, 2).contiguous();
        Tensor seen = view.detach();
        autograd::record("Spy", seen, {view}, [&arrived, i](const Tensor& g) {
          arrived[i] = g;
          return std::vector<Tensor>{g};
        });
        inputs.push_back(seen);
      }
      scaled_dot_product_attention(inputs[0], inputs[1], inputs[2], Tensor(), 0.0, true).backward(gy);
      return leaves;
    };
    std::vector<Tensor> arrived(3), arrived_dense(3);
    const std::vector<Tensor> from_views = gradients(true, arrived), from_dense = gradients(false, arrived_dense);
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      CHECK(arrived[i].transpose(1, 2).is_contiguous());
      CHECK(arrived_dense[i].is_contiguous());
      CHECK(max_abs_diff(from_views[i].grad(), from_dense[i].grad()) == 0.0);
    }
    // Key and value columns two apart (no unit stride) take the widening path.
    const Tensor wide = normal({2, 3, 70, 32}, 74);
    const Tensor ks = wide.slice(3, 0, 32, 2), vs = wide.slice(3, 1, 32, 2);
    CHECK(max_abs_diff(scaled_dot_product_attention(qt, ks, vs),
                       scaled_dot_product_attention(qt, ks.contiguous(), vs.contiguous())) <= 1e-6);
  }
}

TEST_CASE("sdpa rows with every position masked give zeros and zero gradients, as PyTorch >= 2.5") {
  Tensor q = normal({1, 2, 5, 4}, 81).requires_grad_(), k = normal({1, 2, 6, 4}, 82).requires_grad_(),
         v = normal({1, 2, 6, 3}, 83).requires_grad_();
  std::vector<double> bits(30, 1.0);
  for (int j = 0; j < 6; ++j) bits[6 + j] = 0.0;  // row 1 keeps nothing
  const Tensor mask = from_vector(bits, {5, 6}, DType::Bool);
  for (const CpuIsa isa : cpu_isas_supported()) {
    CAPTURE(cpu_isa_name(isa));
    CpuIsaGuard guard(isa);
    q.set_grad(Tensor());
    const Tensor out = scaled_dot_product_attention(q, k, v, mask);
    const auto o = out.to_vector<double>();
    for (int h = 0; h < 2; ++h)
      for (int d = 0; d < 3; ++d) CHECK(o[static_cast<size_t>((h * 5 + 1) * 3 + d)] == 0.0);
    out.sum().backward();
    const auto g = q.grad().to_vector<double>();
    for (int h = 0; h < 2; ++h)
      for (int e = 0; e < 4; ++e) CHECK(g[static_cast<size_t>((h * 5 + 1) * 4 + e)] == 0.0);
    for (const double x : o) CHECK(std::isfinite(x));
  }
  // A float mask of −inf everywhere, and no keys at all, give zeros too.
  const Tensor all_hidden = full({5, 6}, -std::numeric_limits<double>::infinity(), kFloat32);
  CHECK(scaled_dot_product_attention(q.detach(), k.detach(), v.detach(), all_hidden).abs().max().item<double>() == 0.0);
  CHECK(scaled_dot_product_attention(q.detach(), normal({1, 2, 0, 4}, 84), normal({1, 2, 0, 3}, 85))
            .abs()
            .sum()
            .item<double>() == 0.0);
}

TEST_CASE("sdpa is_causal equals the lower-triangular bool mask") {
  const Tensor q = normal({1, 3, 90, 8}, 91), k = normal({1, 3, 90, 8}, 92), v = normal({1, 3, 90, 8}, 93);
  const Tensor tril_mask = ge(arange(90.0).unsqueeze(1), arange(90.0).unsqueeze(0));
  CHECK(max_abs_diff(scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true),
                     scaled_dot_product_attention(q, k, v, tril_mask)) <= 1e-6);
}

TEST_CASE("sdpa is_causal leaves out only hidden terms: the bits of the lower-triangular mask, forward and backward") {
  // Note [What causal products leave out]: a causal tile's products skip what its diagonal hides
  // (score columns, zero terms of dV and dK); the mask path computes every term, its hidden scores
  // −inf and their probabilities 0. Both must give the same bits at every level, on blocks that
  // start on, before and past the diagonal (200 queries: two blocks of 128, key tiles of 64).
  const int saved_threads = num_threads();
  const Tensor tril_mask = ge(arange(200.0).unsqueeze(1), arange(200.0).unsqueeze(0));
  const Tensor grad = normal({1, 2, 200, 64}, 97);
  for (const CpuIsa isa : cpu_isas_supported()) {
    if (isa != CpuIsa::Scalar && isa != CpuIsa::Avx2 && isa != CpuIsa::Avx512) continue;
    CAPTURE(cpu_isa_name(isa));
    CpuIsaGuard guard(isa);
    for (const int threads : {1, 2}) {
      CAPTURE(threads);
      set_num_threads(threads);
      std::vector<Tensor> results[2];
      for (const bool causal : {false, true}) {
        const Tensor q = normal({1, 2, 200, 64}, 94).requires_grad_(), k = normal({1, 2, 200, 64}, 95).requires_grad_(),
                     v = normal({1, 2, 200, 64}, 96).requires_grad_();
        const Tensor out = causal ? scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true)
                                  : scaled_dot_product_attention(q, k, v, tril_mask);
        out.backward(grad);
        results[causal ? 1 : 0] = {out, q.grad(), k.grad(), v.grad()};
      }
      for (size_t i = 0; i < 4; ++i) {
        CAPTURE(i);
        CHECK(max_abs_diff(results[0][i], results[1][i]) == 0.0);
      }
    }
  }
  set_num_threads(saved_threads);
}

TEST_CASE("sdpa dropout: kept fraction, 1/(1-p) scaling, the same mask forward and backward") {
  const double p = 0.3;
  // Zero queries weigh every key 1/S; with v = 1, out(i) = (kept keys of row i)/(S·(1 − p)).
  const int64_t L = 128, S = 256;
  const Tensor q = zeros({1, 2, L, 8}), k = normal({1, 2, S, 8}, 101), v = ones({1, 2, S, 1});
  Generator gen(5);
  const auto out = scaled_dot_product_attention(q, k, v, Tensor(), p, false, std::nullopt, false, &gen)
                       .to_vector<double>();
  double kept = 0;
  for (const double o : out) {
    const double count = o * S * (1 - p);
    CHECK(std::fabs(count - std::round(count)) < 1e-3);  // whole keys, each scaled by 1/(1 − p)
    kept += count;
  }
  CHECK(kept / double(2 * L * S) == doctest::Approx(1 - p).epsilon(0.02));

  // The same seed gives the same output, another seed another one; p = 1 gives zeros.
  const Tensor qn = normal({1, 2, 70, 8}, 102), kn = normal({1, 2, 70, 8}, 103), vn = normal({1, 2, 70, 8}, 104);
  Generator a(9), b(9), c(10);
  const Tensor first = scaled_dot_product_attention(qn, kn, vn, Tensor(), p, true, std::nullopt, false, &a);
  CHECK(max_abs_diff(first, scaled_dot_product_attention(qn, kn, vn, Tensor(), p, true, std::nullopt, false, &b)) == 0.0);
  CHECK(max_abs_diff(first, scaled_dot_product_attention(qn, kn, vn, Tensor(), p, true, std::nullopt, false, &c)) > 0.0);
  CHECK(scaled_dot_product_attention(qn, kn, vn, Tensor(), 1.0).abs().max().item<double>() == 0.0);

  // Fused float32, and bfloat16 (on AMX its own loops), with the key drawn from the generator,
  // against the float64 composition of the inputs as rounded, with that key.
  const uint64_t key = Generator(9).next_u64();
  const Tensor r = normal({1, 2, 70, 8}, 105, kFloat64);
  struct Tolerance {
    DType dtype;
    double out, grad;
  };
  for (const CpuIsa isa : cpu_isas_supported()) {
    CAPTURE(cpu_isa_name(isa));
    CpuIsaGuard guard(isa);
    for (const Tolerance tol : {Tolerance{kFloat32, 2e-5, 1e-4}, Tolerance{DType::BFloat16, 3e-2, 1e-1}}) {
      CAPTURE(tol.dtype);
      Tensor qf = qn.detach().to(tol.dtype).requires_grad_(), kf = kn.detach().to(tol.dtype).requires_grad_(),
             vf = vn.detach().to(tol.dtype).requires_grad_();
      Generator g(9);
      const Tensor fused = scaled_dot_product_attention(qf, kf, vf, Tensor(), p, true, std::nullopt, false, &g);
      mul(fused.to(kFloat64), r).sum().backward();
      Tensor q64 = qf.detach().to(kFloat64).requires_grad_(), k64 = kf.detach().to(kFloat64).requires_grad_(),
             v64 = vf.detach().to(kFloat64).requires_grad_();
      const Tensor want = detail::scaled_dot_product_attention_unfused(q64, k64, v64, Tensor(), p, true,
                                                                       1.0 / std::sqrt(8.0), false, key);
      mul(want, r).sum().backward();
      CHECK(max_abs_diff(fused, want) <= tol.out);
      CHECK(max_abs_diff(qf.grad(), q64.grad()) <= tol.grad);
      CHECK(max_abs_diff(kf.grad(), k64.grad()) <= tol.grad);
      CHECK(max_abs_diff(vf.grad(), v64.grad()) <= tol.grad);
    }
  }
  // The composition with a fixed key against float64 finite differences.
  testing::gradcheck(
      [key](const std::vector<Tensor>& x) {
        return detail::scaled_dot_product_attention_unfused(x[0], x[1], x[2], Tensor(), 0.4, true, 0.5, false, key);
      },
      {arg({1, 1, 6, 3}, 4), arg({1, 1, 6, 3}, 5), arg({1, 1, 6, 2}, 6)});
}

TEST_CASE("sdpa errors are PyTorch's") {
  const Tensor q = normal({2, 4, 5, 8}, 1), k = normal({2, 4, 6, 8}, 2), v = normal({2, 4, 6, 3}, 3);
  auto has = [](const std::string& message, const std::string& part) {
    CAPTURE(message);
    CHECK(message.find("[scaled_dot_product_attention]") != std::string::npos);
    CHECK(message.find(part) != std::string::npos);
  };
  has(error_of([&] { scaled_dot_product_attention(q, k.to(kFloat64), v); }),
      "Expected query, key, and value to have the same dtype, but got query.dtype: float32 key.dtype: float64");
  has(error_of([&] { scaled_dot_product_attention(q, k, v, zeros({5, 6}, DType::Int64)); }),
      "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: int64");
  has(error_of([&] { scaled_dot_product_attention(q, k, v, zeros({5, 7})); }), "to broadcast to the scores' shape");
  has(error_of([&] { scaled_dot_product_attention(q, k, v, zeros({5, 6}), 0.0, true); }),
      "Explicit attn_mask should not be set when is_causal=True");
  has(error_of([&] { scaled_dot_product_attention(q, k, v, Tensor(), 1.5); }),
      "dropout probability has to be between 0 and 1, but got 1.5");
  has(error_of([&] { scaled_dot_product_attention(q, k, v, Tensor(), -0.1); }),
      "dropout probability has to be between 0 and 1");
  has(error_of([&] { scaled_dot_product_attention(q, normal({2, 3, 6, 8}, 4), normal({2, 3, 6, 3}, 5), Tensor(), 0.0,
                                                  false, std::nullopt, true); }),
      "Number of heads in key and value must divide the number of heads in query");
  has(error_of([&] { scaled_dot_product_attention(normal({8}, 6), normal({8}, 7), normal({8}, 8)); }),
      "Expected query, key, and value to all be at least 2 dimensional");
  has(error_of([&] { scaled_dot_product_attention(q, normal({2, 4, 6, 7}, 9), v); }), "same embedding size");
  has(error_of([&] { scaled_dot_product_attention(q, k, normal({2, 4, 7, 3}, 10)); }), "same sequence length");
  has(error_of([&] { scaled_dot_product_attention(q, normal({2, 2, 6, 8}, 11), normal({2, 2, 6, 3}, 12)); }),
      "shapes cannot be broadcast together");
  // A float32 mask is allowed beside bfloat16 queries, as in PyTorch.
  CHECK(scaled_dot_product_attention(q.to(DType::BFloat16), k.to(DType::BFloat16), v.to(DType::BFloat16),
                                     zeros({5, 6}))
            .dtype() == DType::BFloat16);
}

TEST_CASE("sdpa names the kernel it runs at each level") {
  for (const CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    const std::string name = attention_kernel_name();
    CHECK(name == (isa >= CpuIsa::Avx512 ? "avx512" : isa >= CpuIsa::Avx2 ? "avx2" : "scalar"));
    CHECK(std::string(attention_kernel_name(kCPU, DType::BFloat16)) == (isa == CpuIsa::Amx ? "amx" : name));
    CHECK(std::string(attention_kernel_name(kCPU, kFloat64)) == "unfused");
  }
}

TEST_CASE("sdpa CUDA launch plan: tiles that fit shared memory and cover every row") {
  using namespace cuda::detail;
  // Head size 64: 64×64 tiles need 81 KiB forward, so keys halve to 32 (36.4 KiB); the backward
  // (128.5 KiB at 64×64) goes to 16 queries × 32 keys (44.1 KiB).
  const AttentionPlan forward = attention_forward_plan(24, 1000, 64, 64);
  CHECK(forward.rows == 32);
  CHECK(forward.keys == 32);
  CHECK(forward.shared_bytes == 4 * (32 * 64 * 3 + 32 * 32 + 32 * 64 + 3 * 32));
  CHECK(forward.blocks == 24 * 32);  // ceil(1000 / 32) row tiles per head
  const AttentionPlan backward = attention_backward_plan(6, 1000, 64, 64);
  CHECK(backward.rows == 16);
  CHECK(backward.keys == 32);
  CHECK(backward.blocks == 6 * 32);
  for (const int64_t E : {8, 16, 100, 128, 256}) {
    CAPTURE(E);
    for (const bool back : {false, true}) {
      const AttentionPlan plan = back ? attention_backward_plan(3, 77, E, E) : attention_forward_plan(3, 77, E, E);
      CHECK(plan.shared_bytes <= kAttentionSharedLimit);
      const int tile = back ? plan.keys : plan.rows;
      CHECK(plan.blocks * tile >= 3 * 77);
      CHECK((plan.blocks / 3 - 1) * tile < 77);
    }
  }
  // A head too large for one row and one key in shared memory is refused by the host.
  CHECK(attention_forward_plan(1, 10, 8192, 8192).shared_bytes > kAttentionSharedLimit);
  CHECK(attention_forward_plan(3, 0, 64, 64).blocks == 0);
}

TEST_CASE("sdpa on CUDA matches the CPU kernel" * doctest::skip(test::kNoGpu)) {
  const Tensor q = normal({2, 3, 100, 64}, 111), k = normal({2, 3, 90, 64}, 112), v = normal({2, 3, 90, 64}, 113);
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    Tensor qc = q.to(test::kGpu).requires_grad_(), kc = k.to(test::kGpu).requires_grad_(),
           vc = v.to(test::kGpu).requires_grad_();
    Tensor qh = q.detach().requires_grad_(), kh = k.detach().requires_grad_(), vh = v.detach().requires_grad_();
    const Tensor gpu = scaled_dot_product_attention(qc, kc, vc, Tensor(), 0.0, causal);
    const Tensor cpu = scaled_dot_product_attention(qh, kh, vh, Tensor(), 0.0, causal);
    CHECK(std::string(attention_kernel_name(test::kGpu)) == "cuda");
    test::check_close(gpu.to(kCPU), cpu, 1e-4, 1e-5);
    gpu.sum().backward();
    cpu.sum().backward();
    test::check_close(qc.grad().to(kCPU), qh.grad(), 1e-3, 1e-4);
    test::check_close(kc.grad().to(kCPU), kh.grad(), 1e-3, 1e-4);
    test::check_close(vc.grad().to(kCPU), vh.grad(), 1e-3, 1e-4);
  }
}

}  // namespace
}  // namespace weft
