// FP8 on CUDA against the CPU on the same inputs: the scaled casts (every bfloat16 pattern and a
// dense sweep of float32 patterns with every special, both formats, saturating or not, several
// scales) and the decode of every code give the CPU scalar reference's bits; the amax reduced on
// the device equals the CPU's; the metadata's scale updates run on the device to the CPU's bits;
// the FP8 GEMM (precision/cuda/fp8_gemm.cpp) and a whole Fp8Linear step match the CPU.
//
// The casts need a GPU; the GEMM and Fp8Linear one of compute capability 8.9 or newer. Where
// there is none (and in a build without CUDA) doctest reports the cases as skipped. The host
// side (the registries, the rules) is tested on the CPU in test_fp8_cast.cpp and
// test_fp8_scaling.cpp, the GEMM layout rules in tests/tensor/test_gemm_plan.cpp.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cuda_test_helpers.h"
#include "precision/all.h"

using namespace weft;
using namespace weft::precision;
using test::kGpu;
using test::kNoGpu;

namespace {

bool fp8_gpu() {
  if (!cuda::is_available()) return false;
  const cuda::DeviceProperties p = cuda::get_device_properties();
  return p.major > 8 || (p.major == 8 && p.minor >= 9);
}
const bool kNoFp8Gpu = !fp8_gpu();

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

Fp8Tensor codes(const Tensor& x, DType dtype, float scale) {
  return Fp8Tensor(fp8_cast(x, dtype, scale), 1.0f / scale);
}

Fp8Tensor on_gpu(const Fp8Tensor& t) { return Fp8Tensor(t.data.to(kGpu), t.scale_inv); }

// The values an FP8 operand stands for, in float64 on the CPU.
Tensor dequantized(const Fp8Tensor& t) { return fp8_dequantize(t.data.contiguous(), t.scale_inv).to(kFloat64); }

// How far a float32 result of the GPU's FP8 GEMM may be from the CPU's exact sum of the same
// products, as a fraction of the size of the terms (Note [FP8 accumulation on the GPU] in
// precision/cuda/fp8_gemm.cpp): about 8× the largest difference measured on an H100, while a
// wrong scale, code or layout moves a result by a whole term or more.
constexpr double kFp8AccumulationTolerance = 1.0 / 1024;

// The raw bytes of a tensor of any device, as bytes, 16-bit or 32-bit words.
template <class Word>
std::vector<Word> words_of(const Tensor& t) {
  const Tensor host = t.to(kCPU).contiguous();
  std::vector<Word> out(host.nbytes() / sizeof(Word));
  if (!out.empty()) std::memcpy(out.data(), host.data_ptr(), host.nbytes());
  return out;
}

// Equal bits, or both NaN (amaxes: a NaN's payload may differ, Note [FP8 products on the device]).
bool same_amax(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) || (std::isnan(a) && std::isnan(b));
}

// Counts the positions where two equally long vectors differ, checking the first few.
template <class Word>
int mismatches(const std::vector<Word>& gpu, const std::vector<Word>& cpu) {
  REQUIRE(gpu.size() == cpu.size());
  int count = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (gpu[i] == cpu[i]) continue;
    if (++count <= 3) {
      CAPTURE(i);
      CHECK(uint64_t{gpu[i]} == uint64_t{cpu[i]});
    }
  }
  return count;
}

// Casts x on the CPU (the scalar reference) and on the GPU; compares codes, decoded copies, amaxes.
void check_cast_on_gpu(const Tensor& x, DType fp8, float scale, bool saturate) {
  CAPTURE(fp8);
  CAPTURE(scale);
  CAPTURE(saturate);
  Fp8CastResult cpu;
  {
    CpuIsaGuard scalar(CpuIsa::Scalar);
    cpu = fp8_cast_with_amax(x, fp8, scale, saturate, true);
  }
  const Fp8CastResult gpu = fp8_cast_with_amax(x.to(kGpu), fp8, scale, saturate, true);
  REQUIRE(gpu.codes.device().is_cuda());
  REQUIRE(gpu.codes.dtype() == fp8);
  CHECK(mismatches(words_of<uint8_t>(gpu.codes), words_of<uint8_t>(cpu.codes)) == 0);
  CHECK(mismatches(words_of<uint16_t>(gpu.decoded), words_of<uint16_t>(cpu.decoded)) == 0);
  CHECK(same_amax(gpu.amax, cpu.amax));
  CHECK(mismatches(words_of<uint8_t>(fp8_cast(x.to(kGpu), fp8, scale, saturate)), words_of<uint8_t>(cpu.codes)) == 0);
}

// Scales that move the rounding boundaries, overflow, and give the product's NaNs (0, ±Inf·0).
const float kScales[] = {1.0f, 0.5f, 3.0f, 1.0f / 448.0f, 37.5f, 2.5e-3f, 1e6f, 1e38f, 0.0f, -2.0f};

// Every code's value, the midpoints between neighbouring codes and a float step either side of
// each, in both formats, with both signs, plus the float32 specials.
std::vector<float> boundaries() {
  std::vector<float> out;
  for (DType fp8 : {kFloat8E4M3FN, kFloat8E5M2})
    for (int code = 0; code < 0x7F; ++code) {
      auto value = [&](int c) {
        const auto b = static_cast<uint8_t>(c);
        return fp8 == kFloat8E4M3FN ? fp8_e4m3fn_to_float(b) : fp8_e5m2_to_float(b);
      };
      const float v = value(code), next = value(code + 1);
      if (!std::isfinite(v)) continue;
      for (float p : {v, std::isfinite(next) ? (v + next) / 2 : v * 1.0625f})
        for (float q : {p, std::nextafter(p, 0.0f), std::nextafter(p, kInf)}) {
          out.push_back(q);
          out.push_back(-q);
        }
    }
  for (uint32_t bits : {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u,
                        0xFF800001u, 0x7FFFFFFFu, 0x00000001u, 0x807FFFFFu, 0x00800000u, 0x7F7FFFFFu, 0xFF7FFFFFu})
    out.push_back(std::bit_cast<float>(bits));
  return out;
}

}  // namespace

TEST_CASE("fp8 casts on cuda give the cpu's codes for every bfloat16 pattern" * doctest::skip(kNoGpu)) {
  std::vector<uint16_t> bits(65536);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint16_t>(i);
  Tensor x = empty({65536}, kBFloat16);
  std::memcpy(x.data_ptr(), bits.data(), bits.size() * sizeof(uint16_t));
  for (DType fp8 : {kFloat8E4M3FN, kFloat8E5M2})
    for (bool saturate : {true, false})
      for (float scale : kScales) check_cast_on_gpu(x, fp8, scale, saturate);
}

TEST_CASE("fp8 casts on cuda give the cpu's codes on a dense float32 sweep with every special" *
          doctest::skip(kNoGpu)) {
  std::vector<float> xs = boundaries();
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 4099) xs.push_back(std::bit_cast<float>(uint32_t(bits)));
  const Tensor x = from_vector(xs, {static_cast<int64_t>(xs.size())}, kFloat32);
  for (DType fp8 : {kFloat8E4M3FN, kFloat8E5M2})
    for (bool saturate : {true, false})
      for (float scale : kScales) check_cast_on_gpu(x, fp8, scale, saturate);
  // Other layouts and dtypes are converted on the device first, as on the CPU.
  const Tensor m = mul(arange(0, 48, 1, kFloat64).reshape({6, 8}), 37.3).t();
  CHECK(words_of<uint8_t>(fp8_cast(m.to(kGpu), kFloat8E5M2, 0.5f)) == words_of<uint8_t>(fp8_cast(m, kFloat8E5M2, 0.5f)));
}

TEST_CASE("fp8 dequantize on cuda: every code, scaled, to float32 and bfloat16, the cpu's bits" *
          doctest::skip(kNoGpu)) {
  std::vector<uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
  for (DType fp8 : {kFloat8E4M3FN, kFloat8E5M2}) {
    Tensor q = empty({256}, fp8);
    std::memcpy(q.data_ptr(), all.data(), all.size());
    const Tensor q_gpu = q.to(kGpu);
    for (float scale_inv : {1.0f, 0.25f, 1.0f / 3.0f, 1e-30f, 1e30f, 0.0f, kInf, -2.0f}) {
      CAPTURE(fp8);
      CAPTURE(scale_inv);
      CpuIsaGuard scalar(CpuIsa::Scalar);
      for (DType out : {kFloat32, kBFloat16}) {
        const Tensor gpu = fp8_dequantize(q_gpu, scale_inv, out), cpu = fp8_dequantize(q, scale_inv, out);
        REQUIRE(gpu.device().is_cuda());
        if (out == kFloat32) CHECK(mismatches(words_of<uint32_t>(gpu), words_of<uint32_t>(cpu)) == 0);
        else CHECK(mismatches(words_of<uint16_t>(gpu), words_of<uint16_t>(cpu)) == 0);
      }
    }
  }
}

TEST_CASE("fp8 amax on cuda: reduced over many blocks, NaN anywhere wins, Inf over finite, -0 is 0" *
          doctest::skip(kNoGpu)) {
  CHECK(std::bit_cast<uint32_t>(fp8_amax(tensor({-0.0}, TensorOptions(kFloat32).device(kGpu)))) == 0u);
  CHECK(fp8_amax(tensor({1.0, -kInf, 3.0}, TensorOptions(kFloat32).device(kGpu))) == kInf);
  CHECK(fp8_amax(zeros({0}, TensorOptions(kFloat32).device(kGpu))) == 0.0f);
  // 2^22 elements: thousands of blocks; the largest sits in the last element, then a NaN in the first.
  Tensor big = full({int64_t{1} << 22}, 0.5, kFloat32);
  big.data<float>()[(int64_t{1} << 22) - 1] = -9.0f;
  CHECK(fp8_amax(big.to(kGpu)) == 9.0f);
  CHECK(fp8_amax(big.to(kBFloat16).to(kGpu)) == 9.0f);
  big.data<float>()[3] = -kNan;
  CHECK(std::isnan(fp8_amax(big.to(kGpu))));
  CHECK(std::isnan(fp8_cast_with_amax(big.to(kGpu), kFloat8E5M2, 1.0f).amax));
}

TEST_CASE("fp8_cast_scaled on cuda keeps the scale, the factor and the amax on the device" * doctest::skip(kNoGpu)) {
  const Tensor x = mul(randn({1000}), 50.0);
  const Tensor scale = full({1}, 3.0, TensorOptions(kFloat32).device(kGpu));
  Tensor amax = full({1}, 2.0, TensorOptions(kFloat32).device(kGpu));
  const Fp8Tensor q = fp8_cast_scaled(x.to(kGpu), kFloat8E4M3FN, scale, amax);
  CHECK(words_of<uint8_t>(q.data) == words_of<uint8_t>(fp8_cast(x, kFloat8E4M3FN, 3.0f)));
  REQUIRE(q.device_scale_inv.defined());
  CHECK(q.device_scale_inv.device().is_cuda());
  CHECK(q.device_scale_inv.item<float>() == 1.0f / 3.0f);
  CHECK(amax.item<float>() == std::max(2.0f, fp8_amax(x)));
  fp8_amax_into(full({3}, -1e4, TensorOptions(kFloat32).device(kGpu)), amax);
  CHECK(amax.item<float>() == 1e4f);
  CHECK_THROWS_WITH_AS(fp8_cast_scaled(x.to(kGpu), kFloat8E4M3FN, full({1}, 3.0, kFloat32)),
                       "[fp8_cast] expected the scale as one float32 element on cuda:0, got float32 of shape (1,) on cpu",
                       Error);
}

TEST_CASE("Fp8Metadata on cuda: delayed updates and current scaling give the cpu's history and scales" *
          doctest::skip(kNoGpu)) {
  const float amaxes[] = {2.0f, 8.0f, 0.0f, 1.0f, kInf, 0.5f, kNan, 3.0f, 1e-45f, 0.25f, 6.0f};
  for (int64_t len : {1, 2, 3, 300, 1024})
    for (const DelayedScaling& recipe :
         {DelayedScaling{.amax_history_len = len}, DelayedScaling{.margin = 2, .amax_history_len = len},
          DelayedScaling{.amax_history_len = len, .amax_compute_algo = AmaxComputeAlgo::MostRecent}}) {
      CAPTURE(len);
      Fp8Metadata cpu(len), gpu(len);
      for (Tensor* t : {&gpu.scale, &gpu.scale_inv, &gpu.amax_history}) t->set_data(t->to(kGpu));
      for (int step = 0; step < 2 * static_cast<int>(len) + 11; ++step) {
        const float a = amaxes[step % 11];
        for (Fp8Role role : {Fp8Role::Input, Fp8Role::GradOutput}) {
          fp8_amax_into(full({1}, a, kFloat32), cpu.current_amax_element(role));
          fp8_amax_into(full({1}, a, TensorOptions(kFloat32).device(kGpu)), gpu.current_amax_element(role));
          cpu.update(role, recipe);
          gpu.update(role, recipe);
        }
        if (step % 7 != 0 && step + 1 < 2 * len + 11) continue;  // compare now and then, and at the end
        CAPTURE(step);
        CHECK(words_of<uint32_t>(gpu.amax_history) == words_of<uint32_t>(cpu.amax_history));
        CHECK(words_of<uint32_t>(gpu.scale) == words_of<uint32_t>(cpu.scale));
        CHECK(words_of<uint32_t>(gpu.scale_inv) == words_of<uint32_t>(cpu.scale_inv));
      }
    }
  Fp8Metadata cpu(1), gpu(1);
  for (Tensor* t : {&gpu.scale, &gpu.scale_inv, &gpu.amax_history}) t->set_data(t->to(kGpu));
  for (float a : {3.0f, 0.0f, kNan, 1e-45f})
    for (const Float8CurrentScaling& recipe : {Float8CurrentScaling{}, Float8CurrentScaling{.amax_epsilon = 0.5f},
                                               Float8CurrentScaling{.power_2_scale = true}}) {
      CAPTURE(a);
      cpu.set_scale_from_amax(Fp8Role::Weight, full({1}, a, kFloat32), 448.0f, recipe);
      gpu.set_scale_from_amax(Fp8Role::Weight, full({1}, a, TensorOptions(kFloat32).device(kGpu)), 448.0f, recipe);
      CHECK(words_of<uint32_t>(gpu.scale) == words_of<uint32_t>(cpu.scale));
      CHECK(words_of<uint32_t>(gpu.scale_inv) == words_of<uint32_t>(cpu.scale_inv));
    }
}

TEST_CASE("fp8_gemm on cuda equals the cpu kernel on the same codes" * doctest::skip(kNoFp8Gpu)) {
  Generator gen(11);
  const int64_t m = 32, k = 48, n = 16;
  const Tensor x = randn({m, k}, {}, &gen), w = randn({n, k}, {}, &gen), dy = randn({m, n}, {}, &gen);
  const Tensor bias = randn({n}, {}, &gen).to(kBFloat16);
  for (DType second : {kFloat8E4M3FN, kFloat8E5M2}) {
    CAPTURE(second);
    const Fp8Tensor xq = codes(x, kFloat8E4M3FN, 8.0f), wq = codes(w, second, 4.0f);
    // forward x·Wᵀ (TN as it is), input gradient dy·W and weight gradient dyᵀ·x (copied to TN)
    const Fp8Tensor dyq = codes(dy, kFloat8E4M3FN, 2.0f);
    const std::pair<Fp8Tensor, Fp8Tensor> products[] = {
        {xq, Fp8Tensor(wq.data.t(), wq.scale_inv)},
        {dyq, wq},
        {Fp8Tensor(dyq.data.t(), dyq.scale_inv), Fp8Tensor(codes(x, second, 8.0f).data, xq.scale_inv)}};
    for (const auto& [a, b] : products) {
      for (DType out : {kBFloat16, kFloat32}) {
        CAPTURE(out);
        const bool with_bias = b.data.size(1) == n;
        const Tensor cpu = fp8_gemm(a, b, out, with_bias ? bias : Tensor());
        const Tensor gpu = fp8_gemm(on_gpu(a), on_gpu(b), out, with_bias ? bias.to(kGpu) : Tensor());
        REQUIRE(gpu.device().is_cuda());
        REQUIRE(gpu.dtype() == out);
        REQUIRE(gpu.shape() == cpu.shape());
        const auto g = gpu.to(kCPU).to_vector<double>(), c = cpu.to_vector<double>();
        if (out == kBFloat16) {
          for (size_t i = 0; i < c.size(); ++i) CHECK(std::abs(g[i] - c[i]) <= 1e-3 + 1.6e-2 * std::abs(c[i]));
        } else {
          // Float32 results differ by the tensor cores' accumulation (Note [FP8 accumulation on
          // the GPU]): bounded by the size of the terms, Σ|a·b|, not of their sum.
          const auto terms = matmul(abs(dequantized(a)), abs(dequantized(b))).to_vector<double>();
          for (size_t i = 0; i < c.size(); ++i) CHECK(std::abs(g[i] - c[i]) <= kFp8AccumulationTolerance * terms[i] + 1e-6);
        }
      }
    }
  }
}

TEST_CASE("Fp8Linear forward and backward on cuda match the cpu, scales and amaxes bit for bit" *
          doctest::skip(kNoFp8Gpu)) {
  for (const Fp8Recipe& recipe : {Fp8Recipe(DelayedScaling{.amax_history_len = 4}), Fp8Recipe(Float8CurrentScaling{})}) {
    CAPTURE(recipe.index());
    manual_seed(21);
    Fp8Linear cpu(64, 32);
    Fp8Linear gpu(64, 32);
    gpu->load_state_dict(cpu->state_dict());
    gpu->to(kGpu);
    const Tensor x = mul(randn({2, 8, 64}), 3.0), g = mul(randn({2, 8, 32}), 1e-3);
    // Three steps: the scales move after each, so later steps cast with scales the device computed.
    for (int step = 0; step < 3; ++step) {
      CAPTURE(step);
      cpu->zero_grad();
      gpu->zero_grad();
      Tensor x_cpu = x.clone().requires_grad_(), x_gpu = x.to(kGpu).requires_grad_();
      Tensor y_cpu, y_gpu;
      {
        Fp8AutocastGuard fp8(true, recipe);
        y_cpu = cpu(x_cpu);
      }
      {
        Fp8AutocastGuard fp8(true, recipe);
        y_gpu = gpu(x_gpu);
      }
      y_cpu.backward(g);
      y_gpu.backward(g.to(kGpu));
      auto check_close = [](const Tensor& on_gpu, const Tensor& on_cpu) {
        REQUIRE(on_gpu.device().is_cuda());
        REQUIRE(on_gpu.shape() == on_cpu.shape());
        const auto a = on_gpu.to_vector<double>(), b = on_cpu.to_vector<double>();
        double scale = 0.0;
        for (double v : b) scale = std::max(scale, std::abs(v));
        // The products' accumulation on the GPU (Note [FP8 accumulation on the GPU]), relative to
        // the largest value: the terms of each sum are of that size.
        for (size_t i = 0; i < b.size(); ++i) CHECK(std::abs(a[i] - b[i]) <= kFp8AccumulationTolerance * scale + 1e-6);
      };
      check_close(y_gpu, y_cpu);
      check_close(x_gpu.grad(), x_cpu.grad());
      check_close(gpu->weight.grad(), cpu->weight.grad());
      check_close(gpu->bias.grad(), cpu->bias.grad());
      const Fp8Metadata &mg = gpu->fp8_meta(), &mc = cpu->fp8_meta();
      CHECK(mg.scale.device().is_cuda());
      CHECK(words_of<uint32_t>(mg.scale) == words_of<uint32_t>(mc.scale));
      CHECK(words_of<uint32_t>(mg.scale_inv) == words_of<uint32_t>(mc.scale_inv));
      CHECK(words_of<uint32_t>(mg.amax_history) == words_of<uint32_t>(mc.amax_history));
    }
  }
}
