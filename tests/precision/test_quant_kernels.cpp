// The device seam of the quantized products (precision/quant/quant_kernels.h): a kernel installed
// for a device type receives what the layers multiply and its result is theirs; removing it
// brings the built-in CPU kernels back; matmul_4bit checks its operands.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "precision/all.h"

using namespace weft;
using namespace weft::precision::quant;

namespace {

// Removes the installed kernels when a test case ends, also when a CHECK throws.
struct KernelScope {
  ~KernelScope() {
    set_gemm_4bit_kernel(DeviceType::CPU, {});
    set_int8_gemm_kernel(DeviceType::CPU, {});
  }
};

}  // namespace

TEST_CASE("the 4-bit seam: an installed kernel gets Linear4bit's operands and its result is the layer's") {
  manual_seed(3);
  Linear4bit layer(128, 6, true, Linear4bitOptions{QuantKind::NF4, true, 64, kFloat32});
  const Tensor x = randn({3, 128});
  const std::vector<float> built_in = layer(x).to_vector<float>();
  const std::vector<float> absmax = block_absmax(layer->quant_state()).to_vector<float>();

  KernelScope scope;
  int calls = 0;
  set_gemm_4bit_kernel(DeviceType::CPU, [&](const Tensor& xs, const Tensor& packed, const QuantState& state,
                                            const Tensor& block_absmax) {
    ++calls;
    CHECK(xs.shape() == Shape({3, 128}));
    CHECK(xs.to_vector<float>() == x.to_vector<float>());
    CHECK(packed.numel() == 6 * 128 / 2);
    CHECK(state.type == QuantKind::NF4);
    CHECK(state.nested);
    CHECK(state.shape == Shape({6, 128}));
    CHECK(block_absmax.to_vector<float>() == absmax);
    return full({3, 6}, 2.0);
  });
  const std::vector<float> bias = layer->bias.to_vector<float>();
  const std::vector<float> y = layer(x).to_vector<float>();
  CHECK(calls == 1);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 6; ++c) CHECK(y[static_cast<size_t>(r * 6 + c)] == 2.0f + bias[static_cast<size_t>(c)]);

  set_gemm_4bit_kernel(DeviceType::CPU, {});
  CHECK(!gemm_4bit_kernel(DeviceType::CPU));
  CHECK(layer(x).to_vector<float>() == built_in);
  CHECK(calls == 1);
}

TEST_CASE("the int8 seam: an installed kernel computes LLM.int8()'s product for int8_linear_matmul and Linear8bitLt") {
  manual_seed(4);
  Linear8bitLt layer(40, 12, true, Linear8bitLtOptions{false, 6.0});
  Tensor x = randn({5, 40});
  {
    NoGradGuard no_grad;
    x.select(1, 7).mul_(10.0);  // an outlier column: the floating correction still runs
  }
  const std::vector<float> built_in = layer(x).to_vector<float>();

  KernelScope scope;
  int calls = 0;
  std::vector<Shape> shapes;
  set_int8_gemm_kernel(DeviceType::CPU, [&](const Tensor& a, const Tensor& b) {
    ++calls;
    shapes.push_back(a.shape());
    shapes.push_back(b.shape());
    Tensor c = empty({a.size(0), b.size(0)}, kInt32);
    const Tensor ac = a.contiguous(), bc = b.contiguous();
    int8_gemm_reference(ac.data<int8_t>(), bc.data<int8_t>(), c.data<int32_t>(), a.size(0), b.size(0), a.size(1));
    return c;
  });
  // The installed kernel replaces the layer's packed CPU weight; the exact product is unchanged.
  CHECK(layer(x).to_vector<float>() == built_in);
  CHECK(calls == 1);
  CHECK(shapes == std::vector<Shape>{{5, 40}, {12, 40}});

  set_int8_gemm_kernel(DeviceType::CPU, [&](const Tensor& a, const Tensor& b) {
    ++calls;
    return full({a.size(0), b.size(0)}, 127 * 127, kInt32);
  });
  const Tensor a = full({2, 3}, 1, kInt8), b = full({4, 3}, 1, kInt8);
  CHECK(int8_linear_matmul(a, b).to_vector<int32_t>() == std::vector<int32_t>(8, 127 * 127));
  CHECK(calls == 2);

  set_int8_gemm_kernel(DeviceType::CPU, {});
  CHECK(int8_linear_matmul(a, b).to_vector<int32_t>() == std::vector<int32_t>(8, 3));
  CHECK(layer(x).to_vector<float>() == built_in);
  CHECK(calls == 2);
}

TEST_CASE("matmul_4bit refuses operands that do not fit the quantized matrix") {
  auto [packed, state] = quantize_4bit(randn({4, 64}), QuantKind::FP4, 64);
  const Tensor absmax = block_absmax(state);
  CHECK(matmul_4bit(randn({2, 64}), packed, state, absmax).shape() == Shape({2, 4}));
  CHECK_THROWS_WITH_AS(matmul_4bit(randn({2, 32}), packed, state, absmax),
                       "[matmul_4bit] expected x as a contiguous float32 or bfloat16 (M, 64) tensor, got (2, 32) "
                       "float32",
                       Error);
  CHECK_THROWS_WITH_AS(matmul_4bit(randn({2, 64}).to(kFloat16), packed, state, absmax),
                       "[matmul_4bit] expected x as a contiguous float32 or bfloat16 (M, 64) tensor, got (2, 64) "
                       "float16",
                       Error);
  CHECK_THROWS_WITH_AS(matmul_4bit(randn({2, 64}), packed.narrow(0, 0, 10), state, absmax),
                       "[matmul_4bit] expected 128 packed uint8 codes and 4 float32 block absmax, got 10 uint8 and 4 "
                       "float32",
                       Error);
  CHECK_THROWS_WITH_AS(matmul_4bit(randn({2, 64}), packed, state, absmax.to(kFloat16)),
                       "[matmul_4bit] expected 128 packed uint8 codes and 4 float32 block absmax, got 128 uint8 and 4 "
                       "float16",
                       Error);
  auto [codes8, state8] = quantize_blockwise(randn({4, 64}), 64);
  CHECK_THROWS_WITH_AS(matmul_4bit(randn({2, 64}), codes8, state8, absmax), doctest::Contains("expected an NF4 or FP4"),
                       Error);
}

TEST_CASE("the CPU's quantized functions keep their buffers on the CPU under another default device") {
  // An init-context frame whose default device is a GPU (Fabric's init_module on cuda) must not
  // send the host kernels' buffers there: they write them through host pointers. Without a GPU
  // the frame makes every factory fail, so a buffer left to the default device shows as an error.
  manual_seed(9);
  Tensor x = randn({6, 128});
  x.data<float>()[5] = 8.0f;  // an outlier column
  const Tensor w = randn({10, 128});
  const Int8Rows qx = int8_vectorwise_quant(x, 6.0), qw = int8_vectorwise_quant(w);
  const Tensor product = int8_mixed_scaled_mm(x, qx, qw.codes, qw.stats, Tensor());
  const auto [packed, state] = quantize_4bit(w, QuantKind::NF4, 64);
  const Tensor deq = dequantize_4bit(packed, state);
  const Tensor y4 = matmul_4bit(x, packed, state, state.absmax);
  const Tensor dq = int8_vectorwise_dequant(qw.codes, qw.stats);
  const Tensor grad = randn({3, 10});
  const Tensor g = int8_dequant_matmul(grad, qw.codes, qw.stats);

  const TensorFrameGuard gpu_default(TensorFrame{{}, Device("cuda"), {}});
  const Int8Rows qx2 = int8_vectorwise_quant(x, 6.0);
  CHECK(qx2.codes.device().is_cpu());
  CHECK(equal(qx2.codes, qx.codes));
  CHECK(equal(qx2.stats, qx.stats));
  CHECK(equal(qx2.outlier_cols, qx.outlier_cols));
  CHECK(equal(int8_mixed_scaled_mm(x, qx2, qw.codes, qw.stats, Tensor()), product));
  CHECK(equal(int8_vectorwise_dequant(qw.codes, qw.stats), dq));
  const auto [packed2, state2] = quantize_4bit(w, QuantKind::NF4, 64);
  CHECK(equal(packed2, packed));
  CHECK(equal(dequantize_4bit(packed2, state2), deq));
  CHECK(equal(matmul_4bit(x, packed, state, state.absmax), y4));
  CHECK(equal(int8_dequant_matmul(grad, qw.codes, qw.stats), g));
}
