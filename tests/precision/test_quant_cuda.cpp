// The quantized layers on a CUDA device, which has no quantized kernels of its own yet: without
// one installed through the device seam (precision/quant/quant_kernels.h) a forward fails naming
// the way to install one; with one installed — here a stand-in that multiplies on the CPU — the
// forward gives the CPU layer's bits and the input gradient its values, because the steps around
// the seam (the activations' quantization, the dequantization, the outlier columns, the input
// gradient) read device tensors through host copies instead of dereferencing device memory.
//
// Needs a GPU; where there is none (and in a build without CUDA) doctest reports the cases as
// skipped. The seam itself is tested on the CPU in test_quant_kernels.cpp.
#include <doctest/doctest.h>

#include "cuda_test_helpers.h"
#include "precision/all.h"

using namespace weft;
using namespace weft::precision::quant;
using test::kGpu;
using test::kNoGpu;

namespace {

// Removes the CUDA kernels installed by a test case when it ends, also when a CHECK throws.
struct CudaKernelScope {
  ~CudaKernelScope() {
    set_gemm_4bit_kernel(DeviceType::CUDA, {});
    set_int8_gemm_kernel(DeviceType::CUDA, {});
  }
};

// The layers' forward on x: the same bits on both devices; and the input gradients of sum(y):
// within rtol of each other (0: the same bits).
template <class Layer>
void check_forward_and_input_grad(Layer& cpu, Layer& gpu, const Tensor& x, double rtol) {
  Tensor x_cpu = x.clone().requires_grad_(), x_gpu = x.to(kGpu).requires_grad_();
  const Tensor y_cpu = cpu(x_cpu), y_gpu = gpu(x_gpu);
  CHECK(y_gpu.device().is_cuda());
  CHECK(y_gpu.to(kCPU).to_vector<float>() == y_cpu.to_vector<float>());
  sum(y_cpu).backward();
  sum(y_gpu).backward();
  if (rtol == 0) CHECK(x_gpu.grad().to(kCPU).to_vector<float>() == x_cpu.grad().to_vector<float>());
  else test::check_close(x_gpu.grad().to(kCPU), x_cpu.grad(), rtol, 1e-6);
}

}  // namespace

TEST_CASE("Linear8bitLt on cuda: an error naming the seam without an int8 kernel, the cpu's results with one" *
          doctest::skip(kNoGpu)) {
  for (const bool has_fp16_weights : {false, true}) {
    CAPTURE(has_fp16_weights);
    manual_seed(5);
    Linear8bitLt cpu(40, 12, true, Linear8bitLtOptions{has_fp16_weights, 6.0});
    Linear8bitLt gpu(40, 12, true, Linear8bitLtOptions{has_fp16_weights, 6.0});
    gpu->load_state_dict(cpu->state_dict());
    gpu->to(kGpu);
    Tensor x = randn({5, 40});
    x.data<float>()[7] = 9.0f;  // an outlier column: the floating correction runs too
    CHECK_THROWS_WITH_AS(gpu(x.to(kGpu)), doctest::Contains("no int8 kernel for cuda"), Error);

    CudaKernelScope scope;
    set_int8_gemm_kernel(DeviceType::CUDA, [](const Tensor& a, const Tensor& b) {
      return int8_linear_matmul(a.to(kCPU), b.to(kCPU)).to(a.device());
    });
    // g·W on the device is cuBLAS's sum, in its own order.
    check_forward_and_input_grad(cpu, gpu, x, 1e-5);
  }
}

TEST_CASE("Linear4bit on cuda: an error naming the seam without a 4-bit kernel, the cpu's bits with one" *
          doctest::skip(kNoGpu)) {
  manual_seed(6);
  // 100 inputs in blocks of 64: rows start inside blocks.
  Linear4bit cpu(100, 9, true, Linear4bitOptions{QuantKind::NF4, false, 64, kFloat32});
  Linear4bit gpu(100, 9, true, Linear4bitOptions{QuantKind::NF4, false, 64, kFloat32});
  gpu->load_state_dict(cpu->state_dict());
  gpu->to(kGpu);
  const Tensor x = randn({3, 100});
  CHECK_THROWS_WITH_AS(gpu(x.to(kGpu)), doctest::Contains("no 4-bit kernel for cuda"), Error);

  CudaKernelScope scope;
  set_gemm_4bit_kernel(DeviceType::CUDA, [](const Tensor& xs, const Tensor& packed, const QuantState& state,
                                            const Tensor& block_absmax) {
    return matmul_4bit(xs.to(kCPU), packed.to(kCPU), state, block_absmax.to(kCPU)).to(xs.device());
  });
  // The input gradient is computed on the CPU either way: the same bits.
  check_forward_and_input_grad(cpu, gpu, x, 0);
}
