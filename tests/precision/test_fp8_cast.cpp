// Scaled FP8 casts (precision/fp8/fp8_cast.h) on every instruction-set path this machine has
// (and the AVX-512 paths through SIMDe in an emulation build). The independent expectation is the
// bit-exact scalar conversion of tensor/float_formats.h applied to the float32 product x · scale,
// itself checked against the format's formula in tests/tensor/test_float_formats.cpp; a few facts
// of quantization-fp8.md §B.3 are spelled out by hand.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "error_message.h"
#include "precision/all.h"
#include "precision/fp8/fp8_cast_kernels.h"
#include "precision/fp8/fp8_scaling_kernels.h"

using namespace weft;
using precision::fp8_amax;
using precision::fp8_cast;
using precision::fp8_cast_with_amax;
using precision::fp8_dequantize;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

uint8_t reference_code(float x, float scale, DType fp8, bool saturate) {
  const float v = x * scale;
  return fp8 == kFloat8E4M3FN ? float_to_fp8_e4m3fn(v, saturate) : float_to_fp8_e5m2(v, saturate);
}

float code_value(uint8_t code, DType fp8) {
  return fp8 == kFloat8E4M3FN ? fp8_e4m3fn_to_float(code) : fp8_e5m2_to_float(code);
}

std::vector<uint8_t> codes_of(const Tensor& q) {
  std::vector<uint8_t> out(static_cast<size_t>(q.numel()));
  if (!out.empty()) std::memcpy(out.data(), q.contiguous().data_ptr(), out.size());
  return out;
}

std::string isa_label(CpuIsa isa) {
  return std::string(cpu_isa_name(isa)) + (cpu_isa_emulated() && isa >= CpuIsa::Avx512 ? " (emulated)" : "");
}

// Every code's value, the exact midpoints between neighbouring codes (ties, which round to the
// even code), one float step either side of each midpoint and of each value, the overflow
// thresholds, ±Inf, NaN, ±0 and float32 denormals: every rounding boundary of the format.
std::vector<float> boundary_values(DType fp8) {
  std::vector<float> positive;
  for (int code = 0; code < 0x80; ++code) {
    const float v = code_value(static_cast<uint8_t>(code), fp8);
    if (std::isnan(v) || std::isinf(v)) continue;
    positive.push_back(v);
    const float next = code_value(static_cast<uint8_t>(code + 1), fp8);
    // The midpoint to the next code (to the next binade step past max for the largest code).
    const float mid = std::isfinite(next) ? (v + next) / 2
                                          : v + (v - code_value(static_cast<uint8_t>(code - 1), fp8)) / 2;
    for (float p : {v, mid}) {
      positive.push_back(p);
      positive.push_back(std::nextafter(p, 0.0f));
      positive.push_back(std::nextafter(p, kInf));
    }
  }
  for (float extra : {464.0f, 61440.0f, 1e30f, std::numeric_limits<float>::max(), kInf, 1e-40f,
                      std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min()}) {
    positive.push_back(extra);
    positive.push_back(std::nextafter(extra, 0.0f));
  }
  std::vector<float> all;
  for (float p : positive) {
    all.push_back(p);
    all.push_back(-p);
  }
  all.push_back(kNan);
  all.push_back(-kNan);
  return all;  // not a multiple of any vector width, so every path runs its tail too
}

// Stand-ins planted in the CPU slots: they count, then run the CPU kernels.
int planted_casts = 0;
int planted_dequantizes = 0;
void counting_cast(const precision::detail::Fp8CastLaunch& launch) {
  ++planted_casts;
  precision::detail::cpu_fp8_cast(launch);
}
void counting_dequantize(const precision::detail::Fp8DequantizeLaunch& launch) {
  ++planted_dequantizes;
  precision::detail::cpu_fp8_dequantize(launch);
}

void check_cast_matches_reference(const std::vector<float>& xs, float scale, DType fp8, bool saturate) {
  const Tensor x = from_vector(xs, {static_cast<int64_t>(xs.size())}, kFloat32);
  const auto codes = codes_of(fp8_cast(x, fp8, scale, saturate));
  int mismatches = 0;
  for (size_t i = 0; i < xs.size() && mismatches < 5; ++i) {
    const uint8_t want = reference_code(xs[i], scale, fp8, saturate);
    if (codes[i] != want) {
      ++mismatches;
      CAPTURE(i);
      CAPTURE(xs[i]);
      CHECK(int(codes[i]) == int(want));
    }
  }
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("fp8 cast facts of §B.3, by hand") {
  for (CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(isa_label(isa));
    const Tensor x =
        tensor({1.0, 448.0, 464.0, 465.0, -1e9, 17.0, 0.0009765625, 0.0009765626, 0.5, -0.0}, kFloat32);
    // E4M3: 1 = 0.0111.000; 448 = 0.1111.110 is the largest finite value; 464 is the tie between
    // it and the next step (the NaN code) and rounds to even, 448; above 464 rounds past max
    // (satfinite ±448, else NaN 0x7F). 17 is the tie between 16 and 18 and goes to 16 (even);
    // 2^-10 is half the smallest subnormal and rounds to 0 (even), anything above it to 2^-9.
    CHECK(codes_of(fp8_cast(x, kFloat8E4M3FN, 1.0f)) ==
          std::vector<uint8_t>{0x38, 0x7E, 0x7E, 0x7E, 0xFE, 0x58, 0x00, 0x01, 0x30, 0x80});
    CHECK(codes_of(fp8_cast(x, kFloat8E4M3FN, 1.0f, false)) ==
          std::vector<uint8_t>{0x38, 0x7E, 0x7E, 0x7F, 0xFF, 0x58, 0x00, 0x01, 0x30, 0x80});
    // Scaled: x · 2 before the cast (0.5 · 2 = 1).
    CHECK(codes_of(fp8_cast(tensor({0.5, 224.0}, kFloat32), kFloat8E4M3FN, 2.0f)) == std::vector<uint8_t>{0x38, 0x7E});
    // E5M2: 1 = 0.01111.00; 57344 = 0.11110.11 is the largest finite value, its mantissa odd, so
    // the tie 61440 rounds past it (satfinite max, else Inf 0x7C).
    const Tensor y = tensor({1.0, 57344.0, 61440.0, -kInf, 1.5258789e-05}, kFloat32);
    CHECK(codes_of(fp8_cast(y, kFloat8E5M2, 1.0f)) == std::vector<uint8_t>{0x3C, 0x7B, 0x7B, 0xFB, 0x01});
    CHECK(codes_of(fp8_cast(y, kFloat8E5M2, 1.0f, false)) == std::vector<uint8_t>{0x3C, 0x7B, 0x7C, 0xFC, 0x01});
  }
}

TEST_CASE("fp8 casts equal the scalar conversion on every code, tie and boundary, on every path") {
  for (CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(isa_label(isa));
    for (DType fp8 : {kFloat8E4M3FN, kFloat8E5M2}) {
      CAPTURE(fp8);
      const std::vector<float> xs = boundary_values(fp8);
      // Scale 1 hits the boundaries exactly; the others move them through the product's rounding.
      for (float scale : {1.0f, 0.5f, 3.0f, 1.0f / 448.0f, 1e6f, 2.5e-3f})
        for (bool saturate : {true, false}) {
          CAPTURE(scale);
          CAPTURE(saturate);
          check_cast_matches_reference(xs, scale, fp8, saturate);
        }
    }
  }
}

TEST_CASE("fp8 casts equal the scalar conversion on a sweep of float32 bit patterns, on every path") {
  std::vector<float> xs;
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 9973)
    xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  for (CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(isa_label(isa));
    for (DType fp8 : {kFloat8E4M3FN, kFloat8E5M2})
      for (bool saturate : {true, false}) check_cast_matches_reference(xs, 1.0f, fp8, saturate);
  }
}

TEST_CASE("fp8 casts from bfloat16: all 65536 codes, on every path") {
  std::vector<uint16_t> bits(65536);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint16_t>(i);
  Tensor x = empty({65536}, kBFloat16);
  std::memcpy(x.data_ptr(), bits.data(), bits.size() * 2);
  for (CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(isa_label(isa));
    for (DType fp8 : {kFloat8E4M3FN, kFloat8E5M2})
      for (float scale : {1.0f, 0.0078125f, 37.5f}) {
        const auto codes = codes_of(fp8_cast(x, fp8, scale));
        int mismatches = 0;
        for (size_t i = 0; i < bits.size(); ++i)
          mismatches += codes[i] != reference_code(bfloat16_to_float(bits[i]), scale, fp8, true);
        CAPTURE(fp8);
        CAPTURE(scale);
        CHECK(mismatches == 0);
      }
  }
}

TEST_CASE("fp8 decode: all 256 codes, scaled, to float32 and bfloat16, on every path") {
  std::vector<uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
  for (CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(isa_label(isa));
    for (DType fp8 : {kFloat8E4M3FN, kFloat8E5M2}) {
      Tensor q = empty({256}, fp8);
      std::memcpy(q.data_ptr(), all.data(), 256);
      for (float scale_inv : {1.0f, 0.25f, 1.0f / 3.0f, 1e-30f, 1e30f}) {
        const auto f32 = fp8_dequantize(q, scale_inv, kFloat32).to_vector<float>();
        const Tensor bf = fp8_dequantize(q, scale_inv, kBFloat16);
        const auto* bf_bits = static_cast<const uint16_t*>(bf.data_ptr());
        for (int c = 0; c < 256; ++c) {
          CAPTURE(c);
          const float want = code_value(static_cast<uint8_t>(c), fp8) * scale_inv;
          // Bit for bit, NaNs included: a negative NaN code (E4M3 0xff, E5M2 0xfd-0xff) keeps its sign.
          CHECK(std::bit_cast<uint32_t>(f32[static_cast<size_t>(c)]) == std::bit_cast<uint32_t>(want));
          CHECK(bf_bits[c] == float_to_bfloat16(want));
        }
      }
      // Unscaled, the decode gives the bits of the dtype conversion, the NaNs' signs included.
      const auto converted = q.to(kFloat32).to_vector<float>();
      const auto unscaled = fp8_dequantize(q, 1.0f, kFloat32).to_vector<float>();
      for (int c = 0; c < 256; ++c)
        CHECK(std::bit_cast<uint32_t>(unscaled[static_cast<size_t>(c)]) ==
              std::bit_cast<uint32_t>(converted[static_cast<size_t>(c)]));
      CHECK(std::signbit(converted[0xff]));
      // Unscaled, the bfloat16 copy is exact: it widens back to each code's value.
      const auto exact = precision::fp8_decode_bf16(q).to_vector<float>();
      for (int c = 0; c < 256; ++c) {
        const float v = code_value(static_cast<uint8_t>(c), fp8);
        if (!std::isnan(v)) CHECK(exact[static_cast<size_t>(c)] == v);
      }
    }
  }
}

TEST_CASE("fused cast: the amax of the source and the codes' exact bfloat16 values, every length, every path") {
  for (CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(isa_label(isa));
    for (int64_t n : {0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 100}) {
      CAPTURE(n);
      std::vector<float> xs(static_cast<size_t>(n));
      float want_amax = 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        xs[static_cast<size_t>(i)] = static_cast<float>((i * 37 % 23) - 11) * 0.75f;
        want_amax = std::max(want_amax, std::fabs(xs[static_cast<size_t>(i)]));
      }
      for (DType source : {kFloat32, kBFloat16}) {
        const Tensor x = from_vector(xs, {n}, kFloat32).to(source);
        const auto r = fp8_cast_with_amax(x, kFloat8E4M3FN, 4.0f, true, true);
        CHECK(r.amax == want_amax);  // every value here is exact in bfloat16
        CHECK(fp8_amax(x) == want_amax);
        const auto codes = codes_of(r.codes);
        const auto* decoded = static_cast<const uint16_t*>(r.decoded.data_ptr());
        for (int64_t i = 0; i < n; ++i)
          CHECK(decoded[i] == float_to_bfloat16(fp8_e4m3fn_to_float(codes[static_cast<size_t>(i)])));
      }
    }
  }
}

TEST_CASE("amax: NaN anywhere makes it NaN, Inf wins over finite, -0 is 0, across chunks and threads") {
  for (CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(isa_label(isa));
    CHECK(fp8_amax(tensor({-0.0}, kFloat32)) == 0.0f);
    CHECK(std::signbit(fp8_amax(tensor({-0.0}, kFloat32))) == false);
    CHECK(fp8_amax(tensor({1.0, -kInf, 3.0}, kFloat32)) == kInf);
    CHECK(std::isnan(fp8_amax(tensor({1.0, kNan, 3.0}, kFloat32))));
    CHECK(std::isnan(fp8_cast_with_amax(tensor({1.0, -kNan}, kFloat32), kFloat8E5M2, 1.0f).amax));
    // 200,000 elements: several chunks; the largest sits in the last one, then a NaN in the first.
    Tensor big = full({200000}, 0.5, kFloat32);
    big.data<float>()[199999] = -9.0f;
    CHECK(fp8_amax(big) == 9.0f);
    CHECK(fp8_cast_with_amax(big, kFloat8E4M3FN, 1.0f).amax == 9.0f);
    big.data<float>()[3] = kNan;
    CHECK(std::isnan(fp8_amax(big.to(kBFloat16))));
  }
}

TEST_CASE("fp8 casts read any layout and convert other floating dtypes first") {
  const Tensor base = mul(arange(0, 48, 1, kFloat32).reshape({6, 8}), 0.37);
  const Tensor transposed = base.t();
  CHECK(codes_of(fp8_cast(transposed, kFloat8E4M3FN, 2.0f)) ==
        codes_of(fp8_cast(transposed.contiguous(), kFloat8E4M3FN, 2.0f)));
  CHECK(fp8_cast(transposed, kFloat8E4M3FN, 2.0f).shape() == Shape{8, 6});
  CHECK(codes_of(fp8_cast(base.to(kFloat64), kFloat8E5M2, 1.0f)) == codes_of(fp8_cast(base, kFloat8E5M2, 1.0f)));
}

TEST_CASE("fp8 cast errors name the op and what was wrong") {
  CHECK_THROWS_WITH_AS(fp8_cast(tensor({1.0}), kBFloat16, 1.0f),
                       "[fp8_cast] expected the target dtype float8_e4m3fn or float8_e5m2, got bfloat16", Error);
  CHECK_THROWS_WITH_AS(fp8_cast(arange(0, 4, 1, kInt64), kFloat8E4M3FN, 1.0f),
                       "[fp8_cast] expected a floating tensor, got int64", Error);
  CHECK_THROWS_WITH_AS(fp8_dequantize(tensor({1.0}), 1.0f),
                       "[fp8_dequantize] expected a float8_e4m3fn or float8_e5m2 tensor, got float32", Error);
  CHECK_THROWS_WITH_AS(fp8_dequantize(fp8_cast(tensor({1.0}), kFloat8E4M3FN, 1.0f), 1.0f, kFloat16),
                       "[fp8_dequantize] expected the result dtype float32 or bfloat16, got float16", Error);
  CHECK_THROWS_WITH_AS(precision::fp8_max(kFloat32), "[fp8_max] expected float8_e4m3fn or float8_e5m2, got float32",
                       Error);
  CHECK(precision::fp8_max(kFloat8E4M3FN) == 448.0f);
  CHECK(precision::fp8_max(kFloat8E5M2) == 57344.0f);
}

TEST_CASE("fp8 cast kernels: CPU tensors reach the CPU kernels; CUDA has kernels exactly in a CUDA build") {
  namespace pd = precision::detail;
  auto& casts = pd::fp8_cast_kernels();
  auto& dequantizes = pd::fp8_dequantize_kernels();
  CHECK((casts.find(DeviceType::CPU) == &pd::cpu_fp8_cast));
  CHECK((dequantizes.find(DeviceType::CPU) == &pd::cpu_fp8_dequantize));
  CHECK((pd::fp8_delayed_update_kernels().find(DeviceType::CPU) == &pd::cpu_fp8_delayed_update));
  CHECK((pd::fp8_current_scale_kernels().find(DeviceType::CPU) == &pd::cpu_fp8_current_scale));
  const bool cuda_build = cuda::is_built();
  CHECK((casts.find(DeviceType::CUDA) != nullptr) == cuda_build);
  CHECK((dequantizes.find(DeviceType::CUDA) != nullptr) == cuda_build);
  CHECK((pd::fp8_delayed_update_kernels().find(DeviceType::CUDA) != nullptr) == cuda_build);
  CHECK((pd::fp8_current_scale_kernels().find(DeviceType::CUDA) != nullptr) == cuda_build);
  if (!cuda_build) {
    CHECK(error_of([&] { casts.at(Device("cuda:0")); }) ==
          "[fp8_cast] has no kernel for cuda:0: weft was built without CUDA (configure with -DWEFT_CUDA=ON)");
    CHECK(error_of([&] { dequantizes.at(Device("cuda:0")); }) ==
          "[fp8_dequantize] has no kernel for cuda:0: weft was built without CUDA (configure with -DWEFT_CUDA=ON)");
  }

  planted_casts = planted_dequantizes = 0;
  const Tensor x = tensor({0.5, -3.0, 100.0}, kFloat32);
  {
    weft::detail::ScopedKernel<pd::Fp8CastKernel> cast_kernel(casts, DeviceType::CPU, &counting_cast);
    weft::detail::ScopedKernel<pd::Fp8DequantizeKernel> dequantize_kernel(dequantizes, DeviceType::CPU,
                                                                          &counting_dequantize);
    // x · 2 = 1, -6 and 200, a tie between 192 and 208 that goes to 192 (even).
    CHECK(codes_of(fp8_cast(x, kFloat8E4M3FN, 2.0f)) == std::vector<uint8_t>{0x38, 0xCC, 0x74});
    CHECK(fp8_amax(x) == 100.0f);
    CHECK(fp8_cast_with_amax(x, kFloat8E5M2, 1.0f).amax == 100.0f);
    precision::fp8_cast_scaled(x, kFloat8E4M3FN, full({1}, 1.0, kFloat32));
    precision::fp8_amax_into(x, zeros({1}, kFloat32));
    CHECK(fp8_dequantize(fp8_cast(x, kFloat8E4M3FN, 1.0f), 1.0f).to_vector<float>() ==
          std::vector<float>{0.5f, -3.0f, 96.0f});
  }
  CHECK(planted_casts == 6);
  CHECK(planted_dequantizes == 1);
  fp8_cast(x, kFloat8E4M3FN, 1.0f);  // the scopes put the CPU kernels back
  CHECK(planted_casts == 6);
}

TEST_CASE("fp8_cast_scaled reads its scale from a tensor, maxes its amax into one and returns 1/scale") {
  const Tensor x = tensor({0.5, -3.0, 100.0, 1e-3}, kFloat32);
  const Tensor scale = full({1}, 3.0, kFloat32);
  Tensor amax = full({1}, 2.0, kFloat32);
  const precision::Fp8Tensor q = precision::fp8_cast_scaled(x, kFloat8E4M3FN, scale, amax);
  CHECK(codes_of(q.data) == codes_of(fp8_cast(x, kFloat8E4M3FN, 3.0f)));
  CHECK(q.scale_inv == 1.0f / 3.0f);
  CHECK(!q.device_scale_inv.defined());  // on the CPU the factor is read at no cost
  CHECK(!q.decoded.defined());
  CHECK(amax.item<float>() == 100.0f);
  // bfloat16 in, E5M2 out, the decoded copy; the amax keeps the larger value.
  const precision::Fp8Tensor r =
      precision::fp8_cast_scaled(tensor({-500.0, 1.0}, kBFloat16), kFloat8E5M2, scale, amax, true, true);
  CHECK(r.decoded.to_vector<float>() == std::vector<float>{-1536.0f, 3.0f});
  CHECK(amax.item<float>() == 500.0f);
  precision::fp8_cast_scaled(tensor({1e6}, kFloat32), kFloat8E4M3FN, scale);  // no amax: untouched
  CHECK(amax.item<float>() == 500.0f);
  // fp8_amax_into: a NaN wins and stays.
  precision::fp8_amax_into(tensor({1.0, kNan}, kFloat32), amax);
  CHECK(std::isnan(amax.item<float>()));
  precision::fp8_amax_into(tensor({1e9}, kFloat32), amax);
  CHECK(std::isnan(amax.item<float>()));

  CHECK(error_of([&] { precision::fp8_cast_scaled(x, kFloat8E4M3FN, full({2}, 1.0, kFloat32)); }) ==
        "[fp8_cast] expected the scale as one float32 element on cpu, got float32 of shape (2,) on cpu");
  CHECK(error_of([&] { precision::fp8_cast_scaled(x, kFloat8E4M3FN, full({1}, 1.0, kFloat64)); }) ==
        "[fp8_cast] expected the scale as one float32 element on cpu, got float64 of shape (1,) on cpu");
  CHECK(error_of([&] { precision::fp8_amax_into(x, Tensor()); }) ==
        "[fp8_amax] expected the amax as one float32 element on cpu, got undefined");
  CHECK(error_of([&] { precision::fp8_cast_scaled(x, kFloat16, scale); }) ==
        "[fp8_cast] expected the target dtype float8_e4m3fn or float8_e5m2, got float16");
}
