// Fp8WeightLinear (precision/fp8/fp8_weight_linear.h), FP8 weight-only inference, on every
// instruction-set path this machine has. The independent expectations: the quantization is
// recomputed here from its definition (amax / 448, tensor/float_formats.h's scalar E4M3 cast of
// w · (1 / scale)) and must match bit for bit; the product is recomputed in float64 from the
// dequantized weight, x · (value(codes) · scale)ᵀ + b, and must agree to float32 rounding (the
// error bound of a float32 sum of `in` products); every E4M3 value is checked exactly.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "error_message.h"
#include "precision/all.h"
#include "precision/fp8/fp8_weight_linear.h"

using namespace weft;
using precision::Fp8WeightGranularity;
using precision::Fp8WeightLinear;
using precision::Fp8WeightLinearImpl;

namespace {

constexpr double kEps32 = 1.0 / (1 << 23);

std::string isa_label(CpuIsa isa) {
  return std::string(cpu_isa_name(isa)) + (cpu_isa_emulated() && isa >= CpuIsa::Avx512 ? " (emulated)" : "");
}

std::vector<uint8_t> codes_of(const Tensor& q) {
  std::vector<uint8_t> out(static_cast<size_t>(q.numel()));
  if (!out.empty()) std::memcpy(out.data(), q.contiguous().data_ptr(), out.size());
  return out;
}

Tensor codes_tensor(const std::vector<uint8_t>& codes, const Shape& shape) {
  Tensor t = empty(shape, kFloat8E4M3FN);
  std::memcpy(t.data_ptr(), codes.data(), codes.size());
  return t;
}

// A weight (out, in) with what quantization has to get right: an all-zero row, a row of values
// so small that they land on subnormal codes under the tensor's scale, a row with one outlier,
// and normal random rows; in `dtype`.
Tensor test_weight(int64_t out, int64_t in, DType dtype, uint64_t seed) {
  Generator gen(seed);
  std::vector<float> w = randn({out, in}, kFloat32, &gen).to_vector<float>();
  for (int64_t k = 0; k < in; ++k) {
    w[static_cast<size_t>(k)] = 0.0f;                      // row 0: zeros
    if (out > 1) w[static_cast<size_t>(in + k)] *= 1e-4f;  // row 1: tiny
  }
  if (out > 2) w[static_cast<size_t>(2 * in + in / 2)] = 40.0f;  // row 2: an outlier
  return from_vector(w, {out, in}, kFloat32).to(dtype);
}

struct ReferenceQuant {
  std::vector<uint8_t> codes;
  std::vector<float> scales;  // one per row (the tensor's repeated when per tensor)
};

// The definition: scale = amax / 448 (1 when amax is 0), codes = e4m3(w · (1 / scale)).
ReferenceQuant reference_quantize(const Tensor& w, bool per_channel) {
  const int64_t out = w.size(0), in = w.size(1);
  const std::vector<float> v = w.to(kFloat32).to_vector<float>();
  std::vector<float> amax(static_cast<size_t>(out), 0.0f);
  for (int64_t j = 0; j < out; ++j)
    for (int64_t k = 0; k < in; ++k)
      amax[static_cast<size_t>(j)] =
          std::max(amax[static_cast<size_t>(j)], std::fabs(v[static_cast<size_t>(j * in + k)]));
  if (!per_channel) {
    float all = 0.0f;
    for (float a : amax) all = std::max(all, a);
    for (float& a : amax) a = all;
  }
  ReferenceQuant r;
  for (int64_t j = 0; j < out; ++j) {
    const float a = amax[static_cast<size_t>(j)];
    const float scale = a == 0.0f ? 1.0f : a / 448.0f;
    r.scales.push_back(scale);
    for (int64_t k = 0; k < in; ++k)
      r.codes.push_back(float_to_fp8_e4m3fn(v[static_cast<size_t>(j * in + k)] * (1.0f / scale), true));
  }
  return r;
}

std::vector<float> row_scales(const Fp8WeightLinearImpl& layer) {
  std::vector<float> s = layer.weight_scale().to_vector<float>();
  if (s.size() == 1) s.assign(static_cast<size_t>(layer.out_features), s[0]);
  return s;
}

// Checks y (rows, out) against x · (value(codes) · scale)ᵀ + b in float64, to the bound of a float32
// sum of `in` products (and one bfloat16 rounding of the result when computing in bfloat16); the
// bias is rounded to the compute dtype first, as forward does.
void check_forward(const Fp8WeightLinearImpl& layer, const Tensor& x, const Tensor& y, DType compute) {
  const bool bf16_out = compute == kBFloat16;
  const int64_t in = layer.in_features, out = layer.out_features, rows = x.numel() / in;
  REQUIRE(y.shape() == Shape({rows, out}));
  const std::vector<uint8_t> codes = codes_of(layer.weight);
  const std::vector<float> scales = row_scales(layer);
  const std::vector<float> xs = x.to(kFloat32).to_vector<float>();
  const std::vector<float> ys = y.to(kFloat32).to_vector<float>();
  const std::vector<float> bs =
      layer.bias.defined() ? layer.bias.to(compute).to(kFloat32).to_vector<float>() : std::vector<float>();
  int bad = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < out; ++j) {
      double ref = 0.0, magnitude = 0.0;
      for (int64_t k = 0; k < in; ++k) {
        const double term = static_cast<double>(xs[static_cast<size_t>(i * in + k)]) *
                            fp8_e4m3fn_to_float(codes[static_cast<size_t>(j * in + k)]) *
                            scales[static_cast<size_t>(j)];
        ref += term;
        magnitude += std::fabs(term);
      }
      const double b = bs.empty() ? 0.0 : bs[static_cast<size_t>(j)];
      ref += b;
      magnitude += std::fabs(b);
      double tol = (static_cast<double>(in) + 2) * kEps32 * magnitude + 1e-30;
      if (bf16_out) tol += std::fabs(ref) / 256.0;
      const double got = ys[static_cast<size_t>(i * out + j)];
      if (!(std::fabs(got - ref) <= tol) && ++bad <= 3) {
        CAPTURE(i);
        CAPTURE(j);
        CAPTURE(ref);
        CAPTURE(tol);
        CHECK(got == doctest::Approx(ref));
      }
    }
  CHECK(bad == 0);
}

Fp8WeightLinear make_layer(int64_t in, int64_t out, bool bias, Fp8WeightGranularity g, DType dtype) {
  TensorFrameGuard frame(TensorFrame{dtype, {}, {}});
  return Fp8WeightLinear(in, out, bias, g);
}

}  // namespace

TEST_CASE("Fp8WeightLinear quantizes to the scalar E4M3 cast of w / scale, bit for bit, on every path") {
  for (CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(isa_label(isa));
    for (DType dtype : {kFloat32, kBFloat16})
      for (bool per_channel : {false, true}) {
        CAPTURE(dtype);
        CAPTURE(per_channel);
        const Tensor w = test_weight(7, 251, dtype, 11);
        Fp8WeightLinear layer = make_layer(
            251, 7, true, per_channel ? Fp8WeightGranularity::PerChannel : Fp8WeightGranularity::PerTensor, dtype);
        layer->quantize_weight(w);
        const ReferenceQuant want = reference_quantize(w, per_channel);
        CHECK(layer->weight.dtype() == kFloat8E4M3FN);
        CHECK_FALSE(layer->weight.requires_grad());
        CHECK(layer->weight_scale().dim() == (per_channel ? 1 : 0));
        CHECK(row_scales(*layer) == want.scales);
        CHECK(codes_of(layer->weight) == want.codes);
        if (per_channel) {
          CHECK(row_scales(*layer)[0] == 1.0f);                       // the all-zero row
          CHECK(row_scales(*layer)[2] == 40.0f / 448.0f);             // the outlier sets its row's scale
          CHECK(codes_of(layer->weight)[2 * 251 + 251 / 2] == 0x7E);  // ... and becomes 448
        } else {
          const std::vector<uint8_t> codes = codes_of(layer->weight);
          bool subnormal = false;  // the tiny row reaches the subnormal codes under the tensor's scale
          for (int64_t k = 0; k < 251; ++k)
            subnormal = subnormal || ((codes[static_cast<size_t>(251 + k)] & 0x78) == 0 &&
                                      (codes[static_cast<size_t>(251 + k)] & 0x07) != 0);
          CHECK(subnormal);
        }
      }
  }
}

TEST_CASE("Fp8WeightLinear decodes every E4M3 value exactly through its GEMV, on every path") {
  // Row j holds code j (the NaN codes 0x7F and 0xFF left out); x = 3 makes y = 3 · value + 0
  // exactly (the zero bias turns -0 into +0, as x · Wᵀ + 0 does).
  std::vector<uint8_t> codes;
  for (int c = 0; c < 256; ++c)
    if ((c & 0x7F) != 0x7F) codes.push_back(static_cast<uint8_t>(c));
  const int64_t out = static_cast<int64_t>(codes.size());
  Fp8WeightLinear layer = make_layer(1, out, false, Fp8WeightGranularity::PerTensor, kFloat32);
  nn::TensorDict state;
  state.insert("weight", codes_tensor(codes, {out, 1}));
  state.insert("weight_scale", full({}, 1.0, kFloat32));
  layer->load_state_dict(state);
  for (CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(isa_label(isa));
    const std::vector<float> y = layer->forward(full({1, 1}, 3.0, kFloat32)).to_vector<float>();
    int bad = 0;
    for (int64_t j = 0; j < out; ++j) {
      const float want = 3.0f * fp8_e4m3fn_to_float(codes[static_cast<size_t>(j)]) + 0.0f;  // -0 + 0 is +0
      if (std::memcmp(&y[static_cast<size_t>(j)], &want, 4) != 0 && ++bad <= 3) {
        CAPTURE(int(codes[static_cast<size_t>(j)]));
        CHECK(y[static_cast<size_t>(j)] == want);
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("Fp8WeightLinear forward equals the float64 product of the dequantized weight, on every path") {
  for (CpuIsa isa : cpu_isas_supported()) {
    CpuIsaGuard guard(isa);
    CAPTURE(isa_label(isa));
    for (DType dtype : {kFloat32, kBFloat16})
      for (auto g : {Fp8WeightGranularity::PerTensor, Fp8WeightGranularity::PerChannel})
        for (bool bias : {true, false}) {
          CAPTURE(dtype);
          CAPTURE(g == Fp8WeightGranularity::PerChannel);
          CAPTURE(bias);
          Fp8WeightLinear layer = make_layer(251, 37, bias, g, dtype);
          layer->quantize_weight(test_weight(37, 251, kFloat32, 5));
          for (int64_t batch : {1, 3, 6, 9, 64}) {
            CAPTURE(batch);
            Generator gen(static_cast<uint64_t>(batch));
            const Tensor x = randn({batch, 251}, kFloat32, &gen).to(dtype);
            const Tensor y = layer->forward(x);
            CHECK(y.dtype() == dtype);
            check_forward(*layer, x, y, dtype);
          }
        }
  }
}

TEST_CASE("Fp8WeightLinear's prefill path covers several dequantized blocks and keeps leading dimensions") {
  // 4096 inputs make blocks of 256 weight rows: 600 rows are three blocks, the last one short.
  Fp8WeightLinear layer = make_layer(4096, 600, true, Fp8WeightGranularity::PerChannel, kFloat32);
  for (int64_t batch : {2, 24}) {
    CAPTURE(batch);
    Generator gen(7);
    const Tensor x = randn({batch / 2, 2, 4096}, kFloat32, &gen);
    const Tensor y = layer->forward(x);
    CHECK(y.shape() == Shape({batch / 2, 2, 600}));
    check_forward(*layer, x.reshape({batch, 4096}), y.reshape({batch, 600}), kFloat32);
  }
}

TEST_CASE("Fp8WeightLinear computes in its compute dtype and returns the input's") {
  Fp8WeightLinear layer = make_layer(40, 8, true, Fp8WeightGranularity::PerTensor, kFloat32);
  layer->set_compute_dtype(kBFloat16);
  Generator gen(3);
  const Tensor x = randn({2, 40}, kFloat32, &gen);
  const Tensor y = layer->forward(x);
  CHECK(y.dtype() == kFloat32);
  // Every output is a bfloat16 value, and equals the product of the bfloat16-rounded input.
  CHECK(equal(y, y.to(kBFloat16).to(kFloat32)));
  CHECK(equal(y, layer->forward(x.to(kBFloat16)).to(kFloat32)));
  check_forward(*layer, x.to(kBFloat16), y, kBFloat16);
}

TEST_CASE("Fp8WeightLinear's state dict round-trips exactly and loads float checkpoints by quantizing") {
  for (auto g : {Fp8WeightGranularity::PerTensor, Fp8WeightGranularity::PerChannel}) {
    const bool per_channel = g == Fp8WeightGranularity::PerChannel;
    CAPTURE(per_channel);
    Fp8WeightLinear a = make_layer(50, 6, true, g, kFloat32);
    const nn::TensorDict saved = a->state_dict();
    CHECK(saved.size() == 3);
    CHECK(saved.at("weight").dtype() == kFloat8E4M3FN);
    CHECK(saved.at("weight").shape() == Shape({6, 50}));
    CHECK(saved.at("weight_scale").dtype() == kFloat32);
    CHECK(saved.at("weight_scale").shape() == (per_channel ? Shape({6}) : Shape({})));

    // Into a layer built the other way: the checkpoint's granularity wins, every bit equal.
    Fp8WeightLinear b = make_layer(
        50, 6, true, per_channel ? Fp8WeightGranularity::PerTensor : Fp8WeightGranularity::PerChannel, kFloat32);
    const nn::IncompatibleKeys keys = b->load_state_dict(saved);
    CHECK(keys.missing_keys.empty());
    CHECK(keys.unexpected_keys.empty());
    CHECK(b->granularity() == g);
    CHECK(codes_of(b->weight) == codes_of(a->weight));
    CHECK(equal(b->weight_scale(), a->weight_scale()));
    CHECK(equal(b->bias, a->bias));
    const Tensor x = randn({3, 50}, kFloat32);
    CHECK(equal(b->forward(x), a->forward(x)));

    // A float checkpoint: quantized on load, exactly as the definition says.
    const Tensor w = test_weight(6, 50, kBFloat16, 9);
    nn::TensorDict float_state;
    float_state.insert("weight", w);
    float_state.insert("bias", zeros({6}, kBFloat16));
    Fp8WeightLinear c = make_layer(50, 6, true, g, kFloat32);
    c->load_state_dict(float_state);
    const ReferenceQuant want = reference_quantize(w, per_channel);
    CHECK(codes_of(c->weight) == want.codes);
    CHECK(row_scales(*c) == want.scales);
    CHECK(equal(c->bias, zeros({6}, kFloat32)));
    CHECK(c->weight_bytes() == 6 * 50 + (per_channel ? 6 : 1) * 4);
  }
}

TEST_CASE("Fp8WeightLinear's errors name the key, the expectation and what came") {
  Fp8WeightLinear layer = make_layer(8, 3, false, Fp8WeightGranularity::PerChannel, kFloat32);
  auto load = [&](std::vector<std::pair<std::string, Tensor>> entries) {
    nn::TensorDict state;
    for (auto& [k, v] : entries) state.insert(k, v);
    return error_of([&] { layer->load_state_dict(state); });
  };
  const Tensor codes = codes_tensor(std::vector<uint8_t>(24, 0x38), {3, 8});
  CHECK(load({{"weight", zeros({3, 9})}}).find("'weight' must be a floating (3, 8) weight to quantize") !=
        std::string::npos);
  CHECK(load({{"weight", zeros({3, 8}, kInt8)}}).find("got (3, 8) int8") != std::string::npos);
  CHECK(load({{"weight", zeros({3, 8}, kFloat8E5M2)}}).find("float8_e5m2") != std::string::npos);
  CHECK(load({{"weight", codes}}).find("weight_scale") != std::string::npos);  // missing
  CHECK(load({{"weight", codes}, {"weight_scale", ones({2})}})
            .find("'weight_scale' must be a float32 scale of shape () (per tensor) or (3,) (per channel), got (2,) "
                  "float32") != std::string::npos);
  CHECK(load({{"weight", codes}, {"weight_scale", ones({3}, kFloat64)}}).find("float64") != std::string::npos);
  CHECK(load({{"weight", codes}, {"weight_scale", tensor({1.0, 0.0, 1.0}, kFloat32)}}).find("finite, positive") !=
        std::string::npos);
  CHECK(load({{"weight", codes}, {"weight_scale", full({}, std::nan(""), kFloat32)}}).find("finite, positive") !=
        std::string::npos);
  CHECK(load({{"weight", codes_tensor(std::vector<uint8_t>(24, 0x38), {4, 6})}, {"weight_scale", ones({3})}})
            .find("'weight' holds float8_e4m3fn codes of shape (4, 6), the layer is (3, 8)") != std::string::npos);
  std::vector<uint8_t> with_nan(24, 0x38);
  with_nan[5] = 0xFF;
  CHECK(load({{"weight", codes_tensor(with_nan, {3, 8})}, {"weight_scale", ones({3})}}).find("NaN codes") !=
        std::string::npos);
  CHECK(load({{"weight", zeros({3, 8})}, {"weight_scale", ones({3})}})
            .find("'weight_scale' came with a float32 'weight'") != std::string::npos);
  // None of the failed loads changed the layer.
  CHECK(layer->weight.dtype() == kFloat8E4M3FN);

  CHECK(error_of([&] {
          layer->forward(zeros({2, 7}));
        }).find("expected a floating CPU input (*, 8), got (2, 7) float32") != std::string::npos);
  CHECK(error_of([&] {
          layer->quantize_weight(full({3, 8}, std::nan("")));
        }).find("row 0 holds NaN or Inf") != std::string::npos);
  CHECK(error_of([&] { Fp8WeightLinear(0, 3); }).find("positive feature counts") != std::string::npos);
  CHECK(error_of([&] {
          precision::fp8_weight_init_context(Fp8WeightGranularity::PerTensor, kInt32);
        }).find("compute dtype") != std::string::npos);
  layer->to(kBFloat16);  // converts the codes too, which forward then refuses
  CHECK(error_of([&] { layer->forward(zeros({2, 8})); }).find("no longer float8_e4m3fn") != std::string::npos);
}

TEST_CASE("Fp8WeightLinear passes gradients to the input and the bias, never to the codes") {
  Fp8WeightLinear layer = make_layer(20, 5, true, Fp8WeightGranularity::PerChannel, kFloat32);
  Generator gen(4);
  Tensor x = randn({3, 20}, kFloat32, &gen).requires_grad_();
  sum(layer->forward(x)).backward();
  // d(Σ y)/dx[i, k] = Σ_j value(codes[j, k]) · scale_j, computed here in float64.
  const std::vector<uint8_t> codes = codes_of(layer->weight);
  const std::vector<float> scales = row_scales(*layer);
  const std::vector<float> dx = x.grad().to_vector<float>();
  for (int64_t k = 0; k < 20; ++k) {
    double want = 0.0;
    for (int64_t j = 0; j < 5; ++j)
      want += fp8_e4m3fn_to_float(codes[static_cast<size_t>(j * 20 + k)]) * scales[static_cast<size_t>(j)];
    for (int64_t i = 0; i < 3; ++i) CHECK(dx[static_cast<size_t>(i * 20 + k)] == doctest::Approx(want).epsilon(1e-6));
  }
  CHECK(equal(layer->bias.grad(), full({5}, 3.0)));
  CHECK_FALSE(layer->weight.grad().defined());
}

TEST_CASE("fp8_weight_init_context builds every nn::Linear as an Fp8WeightLinear, and only inside it") {
  CHECK(precision::fp8_weight_granularity_of("fp8") == Fp8WeightGranularity::PerTensor);
  CHECK(precision::fp8_weight_granularity_of("fp8-channel") == Fp8WeightGranularity::PerChannel);
  CHECK_FALSE(precision::fp8_weight_granularity_of("nf4").has_value());
  {
    precision::Context context = precision::fp8_weight_init_context(Fp8WeightGranularity::PerChannel, kBFloat16);
    nn::Linear fc(16, 4);
    auto* fp8 = dynamic_cast<Fp8WeightLinearImpl*>(fc.ptr().get());
    REQUIRE(fp8 != nullptr);
    CHECK(fp8->granularity() == Fp8WeightGranularity::PerChannel);
    CHECK(fp8->compute_dtype() == kBFloat16);
    CHECK(fp8->bias.dtype() == kBFloat16);
    CHECK(fp8->weight_scale().shape() == Shape({4}));
    CHECK(fc->forward(ones({1, 16}, kBFloat16)).dtype() == kBFloat16);
  }
  {
    // Under a skip-init frame (a loader about to fill the weights) nothing is drawn or quantized.
    TensorFrameGuard skip(TensorFrame{std::nullopt, std::nullopt, true});
    precision::Context context = precision::fp8_weight_init_context(Fp8WeightGranularity::PerTensor, kFloat32);
    nn::Linear fc(16, 4, false);
    REQUIRE(dynamic_cast<Fp8WeightLinearImpl*>(fc.ptr().get()) != nullptr);
    CHECK(codes_of(fc->weight) == std::vector<uint8_t>(64, 0));
  }
  nn::Linear plain(16, 4);
  CHECK(dynamic_cast<Fp8WeightLinearImpl*>(plain.ptr().get()) == nullptr);
}

TEST_CASE("Fp8WeightLinear::from_linear quantizes a Linear's weight and copies its bias") {
  TensorFrameGuard frame(TensorFrame{kBFloat16, {}, {}});
  nn::Linear linear(33, 5);
  auto layer = Fp8WeightLinearImpl::from_linear(*linear, Fp8WeightGranularity::PerChannel);
  const ReferenceQuant want = reference_quantize(linear->weight, true);
  CHECK(codes_of(layer->weight) == want.codes);
  CHECK(row_scales(*layer) == want.scales);
  CHECK(layer->bias.dtype() == kBFloat16);
  CHECK(equal(layer->bias, linear->bias));
  CHECK(layer->bias.data_ptr() != linear->bias.data_ptr());
}
