// Fp8Linear and the FP8 GEMM. The acceptance test of the FP8 layer: its forward and both
// gradients equal an fp64 computation on the FP8-rounded operands, up to float32 accumulation
// order. The rounded operands are made here with tensor/float_formats.h's scalar conversions
// (not with the kernels under test) from the scales the layer's metadata held.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "precision/all.h"

using namespace weft;
using namespace weft::precision;

namespace {

// An (rows, cols) row-major matrix of doubles.
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<double> v;
  double at(int64_t i, int64_t j) const { return v[static_cast<size_t>(i * cols + j)]; }
};

Matrix matrix_of(const Tensor& t) {
  const Tensor t2 = t.reshape({-1, t.size(-1)});
  return {t2.size(0), t2.size(1), t2.to(kFloat64).contiguous().to_vector<double>()};
}

// value(fp8(x · scale)) · scale_inv, element by element, through the scalar conversions.
Matrix rounded(const Tensor& t, DType fp8, float scale) {
  Matrix m = matrix_of(t.to(kFloat32));
  for (double& x : m.v) {
    const float v = static_cast<float>(x) * scale;
    const float q = fp8 == kFloat8E4M3FN ? fp8_e4m3fn_to_float(float_to_fp8_e4m3fn(v))
                                         : fp8_e5m2_to_float(float_to_fp8_e5m2(v));
    x = static_cast<double>(q) * static_cast<double>(1.0f / scale);
  }
  return m;
}

// Checks got (rows, cols) against Σ_k a[i,k]·b[k,j] (+ bias[j]) in fp64, where b is given as
// b_t (cols, K) when transposed. The tolerance is the float32 accumulation bound: (K + 2)·2^-24
// times Σ_k |a·b| (+ |bias|), plus the output's own rounding.
void check_product(const Tensor& got, const Matrix& a, const Matrix& b, bool b_transposed, double output_ulp,
                   const std::vector<double>& bias = {}) {
  const Matrix out = matrix_of(got);
  const int64_t k_dim = a.cols;
  REQUIRE(out.rows == a.rows);
  int bad = 0;
  for (int64_t i = 0; i < out.rows; ++i)
    for (int64_t j = 0; j < out.cols; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t k = 0; k < k_dim; ++k) {
        const double p = a.at(i, k) * (b_transposed ? b.at(j, k) : b.at(k, j));
        sum += p;
        magnitude += std::fabs(p);
      }
      if (!bias.empty()) {
        sum += bias[static_cast<size_t>(j)];
        magnitude += std::fabs(bias[static_cast<size_t>(j)]);
      }
      const double tol = static_cast<double>(k_dim + 2) * std::ldexp(magnitude, -24) + output_ulp * std::fabs(sum);
      if (std::fabs(out.at(i, j) - sum) > tol && bad++ < 3) {
        CAPTURE(i);
        CAPTURE(j);
        CHECK(out.at(i, j) == doctest::Approx(sum));
      }
    }
  CHECK(bad == 0);
}

Tensor random_tensor(const Shape& shape, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  return mul(randn(shape, kFloat32, &g), scale);
}

}  // namespace

TEST_CASE("fp8_gemm equals fp64 on the decoded operands, with transposed operands, bias and both output dtypes") {
  const Tensor a32 = random_tensor({7, 48}, 1), b32 = random_tensor({32, 48}, 2, 3.0);
  const Fp8Tensor a{fp8_cast(a32, kFloat8E4M3FN, 20.0f), 1.0f / 20.0f};
  const Fp8Tensor b_rows{fp8_cast(b32, kFloat8E5M2, 0.5f), 2.0f};  // (32, 48); its transpose is (48, 32)
  const Fp8Tensor b{b_rows.data.t(), b_rows.scale_inv};
  const Tensor bias = random_tensor({32}, 3);
  const Matrix am = rounded(a32, kFloat8E4M3FN, 20.0f), bm = rounded(b32, kFloat8E5M2, 0.5f);
  const std::vector<double> bias_v = matrix_of(bias.reshape({1, 32})).v;
  std::vector<std::vector<float>> per_path;  // every path's epilogue is the same fma: the same bits
  for (CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(cpu_isa_name(isa));
    const Tensor y = fp8_gemm(a, b, kFloat32, bias);
    per_path.push_back(y.to_vector<float>());
    per_path.push_back(fp8_gemm(a, b, kBFloat16, bias).to_vector<float>());
    CHECK(per_path[per_path.size() - 2] == per_path[0]);
    CHECK(per_path.back() == per_path[1]);
    CHECK(y.dtype() == kFloat32);
    CHECK(y.shape() == Shape{7, 32});
    check_product(y, am, bm, true, std::ldexp(1.0, -23), bias_v);
    const Tensor y16 = fp8_gemm(a, b, kBFloat16);
    CHECK(y16.dtype() == kBFloat16);
    check_product(y16, am, bm, true, std::ldexp(1.0, -8));
    // The transposed-A form (K, M)ᵀ gives the same product.
    const Fp8Tensor a_t{fp8_cast(a32.t().contiguous(), kFloat8E4M3FN, 20.0f).t(), 1.0f / 20.0f};
    CHECK(fp8_gemm(a_t, b).to_vector<float>() == fp8_gemm(a, b).to_vector<float>());
  }
}

TEST_CASE("fp8_gemm refuses what the GPU's FP8 GEMM refuses, naming the problem") {
  const Fp8Tensor e5{fp8_cast(ones({4, 16}), kFloat8E5M2, 1.0f)};
  const Fp8Tensor e4{fp8_cast(ones({16, 4}), kFloat8E4M3FN, 1.0f)};
  CHECK_THROWS_WITH_AS(fp8_gemm(e5, Fp8Tensor{fp8_cast(ones({16, 4}), kFloat8E5M2, 1.0f)}),
                       doctest::Contains("Multiplication of two float8_e5m2 matrices is not supported"), Error);
  CHECK_THROWS_WITH_AS(fp8_gemm(e5, e5), "[fp8_gemm] inner dimensions differ: (4, 16) · (4, 16)", Error);
  CHECK_THROWS_WITH_AS(fp8_gemm(Fp8Tensor{ones({4, 16})}, e4),
                       "[fp8_gemm] operand a must be float8_e4m3fn or float8_e5m2, got float32", Error);
  CHECK_THROWS_WITH_AS(fp8_gemm(e5, e4, kFloat32, ones({5})), doctest::Contains("expected a bias of shape (4,)"),
                       Error);
  CHECK(fp8_gemm(e5, e4).to_vector<float>() == std::vector<float>(16, 16.0f));
}

TEST_CASE("Fp8Linear forward and backward equal fp64 on the FP8-rounded operands (delayed scaling, HYBRID)") {
  manual_seed(5);
  Fp8Linear fc(64, 48);
  Tensor x = random_tensor({3, 5, 64}, 7, 2.0).requires_grad_();
  const Tensor g = random_tensor({3, 5, 48}, 8, 1e-3);
  // Two steps first, so that every scale has moved away from 1 and differs per role.
  for (int s = 0; s < 2; ++s) {
    Tensor y;
    {
      Fp8AutocastGuard fp8(true, DelayedScaling{.amax_history_len = 4});
      y = fc(x);
    }
    y.backward(g);
  }
  const Fp8Metadata& meta = fc->fp8_meta();
  const float sx = meta.scale_of(Fp8Role::Input), sw = meta.scale_of(Fp8Role::Weight);
  const float sg = meta.scale_of(Fp8Role::GradOutput);
  CHECK(sx != 1.0f);
  CHECK(sg > 1e4f);  // gradient amax ~4e-3: E5M2's range shows
  fc->zero_grad();
  x.set_grad(Tensor());

  Tensor y;
  {
    Fp8AutocastGuard fp8(true, DelayedScaling{.amax_history_len = 4});
    y = fc(x);
  }
  CHECK(y.shape() == Shape{3, 5, 48});
  CHECK(y.dtype() == kFloat32);
  const Matrix xq = rounded(x.detach(), kFloat8E4M3FN, sx), wq = rounded(fc->weight.detach(), kFloat8E4M3FN, sw);
  const std::vector<double> bias = matrix_of(fc->bias.detach().reshape({1, 48})).v;
  // y = x_q · W_qᵀ + b
  check_product(y, xq, wq, true, std::ldexp(1.0, -23), bias);

  y.backward(g);
  const Matrix gq = rounded(g, kFloat8E5M2, sg);
  // dx = g_q · W_q
  check_product(x.grad(), gq, wq, false, std::ldexp(1.0, -23));
  CHECK(x.grad().shape() == x.shape());
  // dW = g_qᵀ · x_q: as a product, a = g_qᵀ (48, 15), b = x_q (15, 64).
  Matrix gq_t{gq.cols, gq.rows, std::vector<double>(gq.v.size())};
  for (int64_t i = 0; i < gq.rows; ++i)
    for (int64_t j = 0; j < gq.cols; ++j) gq_t.v[static_cast<size_t>(j * gq.rows + i)] = gq.at(i, j);
  check_product(fc->weight.grad(), gq_t, xq, false, std::ldexp(1.0, -23));
  // db = Σ g over the rows, in high precision (not quantized).
  const Matrix gm = matrix_of(g);
  std::vector<double> db(48, 0.0);
  for (int64_t i = 0; i < gm.rows; ++i)
    for (int64_t j = 0; j < 48; ++j) db[static_cast<size_t>(j)] += gm.at(i, j);
  const auto got_db = fc->bias.grad().to_vector<double>();
  for (size_t j = 0; j < db.size(); ++j) CHECK(got_db[j] == doctest::Approx(db[j]).epsilon(1e-5));
}

TEST_CASE("Fp8Linear under E4M3 and under current scaling: the gradient format and the scales follow the recipe") {
  manual_seed(9);
  Fp8Linear fc(32, 16, false);
  const Tensor x = random_tensor({4, 32}, 11).requires_grad_();
  const Tensor g = random_tensor({4, 16}, 12, 0.1);
  Tensor y;
  {
    Fp8AutocastGuard fp8(true, Float8CurrentScaling{.fp8_format = Fp8Format::E4M3});
    y = fc(x);
  }
  const Fp8Metadata& meta = fc->fp8_meta();
  // Current scaling: each scale is 448 / the tensor's own amax, set by this very cast.
  CHECK(meta.scale_of(Fp8Role::Input) == 448.0f / amax(abs(x.detach())).item<float>());
  CHECK(meta.scale_of(Fp8Role::Weight) == 448.0f / amax(abs(fc->weight.detach())).item<float>());
  CHECK(meta.current_amax(Fp8Role::Input) == 0.0f);  // no history under current scaling
  y.backward(g);
  const float sg = meta.scale_of(Fp8Role::GradOutput);
  CHECK(sg == 448.0f / amax(abs(g)).item<float>());
  const Matrix xq = rounded(x.detach(), kFloat8E4M3FN, meta.scale_of(Fp8Role::Input));
  const Matrix wq = rounded(fc->weight.detach(), kFloat8E4M3FN, meta.scale_of(Fp8Role::Weight));
  check_product(y, xq, wq, true, std::ldexp(1.0, -23));
  check_product(x.grad(), rounded(g, kFloat8E4M3FN, sg), wq, false, std::ldexp(1.0, -23));
  CHECK_FALSE(fc->bias.defined());
}

TEST_CASE("Fp8Linear with bfloat16 input and weights returns bfloat16 and gradients in the parameters' dtype") {
  manual_seed(4);
  Fp8Linear fc(32, 32);
  fc->to(kBFloat16);
  CHECK(fc->weight.dtype() == kBFloat16);
  CHECK(fc->fp8_meta().scale.dtype() == kFloat32);  // keep_dtype buffers
  const Tensor x = random_tensor({6, 32}, 13).to(kBFloat16).requires_grad_();
  Tensor y;
  {
    Fp8AutocastGuard fp8(true, DelayedScaling{});
    y = fc(x);
  }
  CHECK(y.dtype() == kBFloat16);
  const Matrix xq = rounded(x.detach(), kFloat8E4M3FN, 1.0f), wq = rounded(fc->weight.detach(), kFloat8E4M3FN, 1.0f);
  check_product(y, xq, wq, true, std::ldexp(1.0, -8), matrix_of(fc->bias.detach().reshape({1, 32})).v);
  sum(y).backward();
  CHECK(x.grad().dtype() == kBFloat16);
  CHECK(fc->weight.grad().dtype() == kBFloat16);
  CHECK(fc->bias.grad().dtype() == kBFloat16);
}

TEST_CASE("Fp8Linear gives the same bits on every instruction-set path") {
  manual_seed(6);
  Fp8Linear fc(48, 32);
  const Tensor x = random_tensor({9, 48}, 14);
  std::vector<std::vector<float>> outputs;
  for (CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    Fp8AutocastGuard fp8(true, Float8CurrentScaling{});
    outputs.push_back(fc(x).to_vector<float>());
  }
  for (const auto& out : outputs) CHECK(out == outputs.front());
}

TEST_CASE("Fp8Linear outside fp8_autocast, disabled, or calibrating computes the built-in Linear's result") {
  manual_seed(2);
  Fp8Linear fc(16, 32);
  const Tensor x = random_tensor({3, 16}, 15, 3.0);
  const auto expected = linear(x, fc->weight, fc->bias).to_vector<float>();
  CHECK(fc(x).to_vector<float>() == expected);
  {
    Fp8AutocastGuard off(false);
    CHECK(fc(x).to_vector<float>() == expected);
  }
  {
    Fp8AutocastGuard calibrate(true, DelayedScaling{.amax_history_len = 2}, /*calibrating=*/true);
    CHECK(fc(x).to_vector<float>() == expected);
  }
  // Calibration collected the amaxes and set the scales from them.
  CHECK(fc->fp8_meta().scale_of(Fp8Role::Input) == 448.0f / amax(abs(x)).item<float>());
  CHECK(fc->fp8_meta().scale_of(Fp8Role::Weight) == 448.0f / amax(abs(fc->weight.detach())).item<float>());
  {
    Fp8AutocastGuard fp8(true);
    CHECK(fc(x).to_vector<float>() != expected);  // in FP8 now
  }
}

TEST_CASE("Fp8Linear's shape rule names the dimension; bad inputs are refused") {
  CHECK_THROWS_WITH_AS(Fp8Linear(20, 32), "[Fp8Linear] FP8 execution needs in_features and out_features divisible "
                                          "by 16 (each is the inner dimension of one of its GEMMs): in_features=20 "
                                          "is not divisible by 16", Error);
  CHECK_THROWS_WITH_AS(Fp8Linear(32, 40), doctest::Contains("out_features=40 is not divisible by 16"), Error);
  CHECK(fp8_linear_shape_problem(784, 512).empty());
  Fp8Linear fc(16, 16);
  Fp8AutocastGuard fp8(true);
  CHECK_THROWS_WITH_AS(fc(ones({2, 8})),
                       "[Fp8Linear] expected an input with 16 features in its last dimension, got (2, 8)", Error);
  CHECK(fc(zeros({0, 16})).shape() == Shape{0, 16});
}

TEST_CASE("Fp8Linear's FP8 metadata is in its state_dict, stays float32, and restores the same outputs") {
  manual_seed(8);
  Fp8Linear a(32, 16, true, 8);
  const Tensor x = random_tensor({4, 32}, 16);
  for (int s = 0; s < 3; ++s) {
    Fp8AutocastGuard fp8(true, DelayedScaling{.amax_history_len = 8});
    a(mul(x, static_cast<double>(s + 1)));
  }
  a->to(kBFloat16);
  const auto state = a->state_dict();
  CHECK(state.at("fp8_scale").dtype() == kFloat32);
  CHECK(state.at("fp8_scale").shape() == Shape{3});
  CHECK(state.at("fp8_amax_history").shape() == Shape{8, 3});
  Fp8Linear b(32, 16, true, 8);
  b->to(kBFloat16);
  b->load_state_dict(state);
  CHECK(b->fp8_meta().scale.to_vector<float>() == a->fp8_meta().scale.to_vector<float>());
  CHECK(b->fp8_meta().amax_history.to_vector<float>() == a->fp8_meta().amax_history.to_vector<float>());
  Fp8AutocastGuard fp8(true, DelayedScaling{.amax_history_len = 8});
  CHECK(b(x.to(kBFloat16)).to_vector<float>() == a(x.to(kBFloat16)).to_vector<float>());
}

TEST_CASE("the FP8 GEMM seam: an installed kernel receives the layer's FP8 operands and scales") {
  int calls = 0;
  std::vector<std::string> seen;
  set_fp8_gemm_kernel(DeviceType::CPU, [&](const Fp8Tensor& a, const Fp8Tensor& b, DType out, const Tensor& bias) {
    ++calls;
    seen.push_back(detail::cat(a.data.dtype(), a.data.shape(), "x", b.data.dtype(), b.data.shape(), "->", out,
                               bias.defined() ? "+bias" : "", " s=", a.scale_inv * b.scale_inv));
    return zeros({a.data.size(0), b.data.size(1)}, out);
  });
  Fp8Linear fc(16, 32);
  {
    NoGradGuard no_grad;
    fc->weight.fill_(0.5);
  }
  const Tensor x = full({2, 16}, 4.0).requires_grad_();
  Tensor y;
  {
    Fp8AutocastGuard fp8(true, DelayedScaling{.amax_history_len = 1});
    y = fc(x);
    CHECK(y.to_vector<float>() == std::vector<float>(64, 0.0f));  // what the fake returned
  }
  {
    Fp8AutocastGuard fp8(true, DelayedScaling{.amax_history_len = 1});
    y = fc(x);
  }
  y.backward(ones({2, 32}));
  set_fp8_gemm_kernel(DeviceType::CPU, {});  // the built-in kernel again
  CHECK(calls == 4);
  // Forward with scale 1, then with 448/4 for x and 448/0.5 for W (the product of their inverses
  // is 4·0.5/448²); backward: dx = dy·W (E5M2 × E4M3), dW = dyᵀ·x.
  CHECK(seen[0] == "float8_e4m3fn(2, 16)xfloat8_e4m3fn(16, 32)->float32+bias s=1");
  CHECK(seen[1].starts_with("float8_e4m3fn(2, 16)xfloat8_e4m3fn(16, 32)->float32+bias s=9.96"));
  CHECK(seen[2].starts_with("float8_e5m2(2, 32)xfloat8_e4m3fn(32, 16)->float32 s="));
  CHECK(seen[3].starts_with("float8_e5m2(32, 2)xfloat8_e4m3fn(2, 16)->float32 s="));
  // CUDA's kernel is linked in by a CUDA build (precision/cuda/fp8_gemm.cpp), absent otherwise.
  CHECK((fp8_gemm_kernel(DeviceType::CUDA) != nullptr) == cuda::is_built());
}
