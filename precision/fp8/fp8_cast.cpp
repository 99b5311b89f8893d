// Scaled FP8 casts: argument checks, the source in a dtype and layout the kernels read, the
// outputs on the source's device, and the kernel of that device (precision/fp8/fp8_cast.h).
#include "precision/fp8/fp8_cast.h"

#include "precision/fp8/fp8_cast_kernels.h"
#include "tensor/ops.h"

namespace weft::precision {
namespace {

using detail::Fp8CastLaunch;

bool is_fp8(DType d) { return d == kFloat8E4M3FN || d == kFloat8E5M2; }

void check_defined(const Tensor& t, const char* op) {
  WEFT_CHECK(t.defined(), "[", op, "] the input tensor is undefined");
}

// x as a contiguous float32 or bfloat16 tensor the kernels can read.
Tensor kernel_source(const Tensor& x, const char* op) {
  check_defined(x, op);
  WEFT_CHECK(x.is_floating_point(), "[", op, "] expected a floating tensor, got ", x.dtype());
  const Tensor source = x.dtype() == kBFloat16 || x.dtype() == kFloat32 ? x.detach() : x.detach().to(kFloat32);
  return source.contiguous();
}

void check_fp8_target(DType fp8_dtype) {
  WEFT_CHECK(is_fp8(fp8_dtype), "[fp8_cast] expected the target dtype float8_e4m3fn or float8_e5m2, got ", fp8_dtype);
}

// `t` must be one float32 element on `device` (a layer's scale or amax).
void check_element(const Tensor& t, const Device& device, const char* op, const char* what) {
  WEFT_CHECK(t.defined() && t.dtype() == kFloat32 && t.numel() == 1 && t.device() == device, "[", op,
             "] expected the ", what, " as one float32 element on ", device, ", got ",
             t.defined() ? weft::detail::cat(t.dtype(), " of shape ", t.shape(), " on ", t.device()) : "undefined");
}

Tensor one_float(float value, const Device& device) { return full({1}, value, TensorOptions(kFloat32).device(device)); }

// The launch that casts `source` to fp8_dtype codes (and their bfloat16 copy when asked).
Fp8CastLaunch cast_launch(const Tensor& source, DType fp8_dtype, bool saturate, bool decode_bf16) {
  Fp8CastLaunch launch;
  launch.source = source;
  launch.codes = empty(source.shape(), TensorOptions(fp8_dtype).device(source.device()));
  if (decode_bf16) launch.decoded = empty(source.shape(), TensorOptions(kBFloat16).device(source.device()));
  launch.saturate = saturate;
  return launch;
}

void run(const Fp8CastLaunch& launch) { detail::fp8_cast_kernels().at(launch.source.device())(launch); }

}  // namespace

float fp8_max(DType fp8_dtype) {
  WEFT_CHECK(is_fp8(fp8_dtype), "[fp8_max] expected float8_e4m3fn or float8_e5m2, got ", fp8_dtype);
  return fp8_dtype == kFloat8E4M3FN ? 448.0f : 57344.0f;
}

float fp8_amax(const Tensor& x) {
  const Tensor source = kernel_source(x, "fp8_amax");
  Fp8CastLaunch launch;
  launch.source = source;
  launch.amax = one_float(0.0f, source.device());
  run(launch);
  return launch.amax.item<float>();
}

void fp8_amax_into(const Tensor& x, const Tensor& amax) {
  const Tensor source = kernel_source(x, "fp8_amax");
  check_element(amax, source.device(), "fp8_amax", "amax");
  Fp8CastLaunch launch;
  launch.source = source;
  launch.amax = amax;
  run(launch);
}

Fp8CastResult fp8_cast_with_amax(const Tensor& x, DType fp8_dtype, float scale, bool saturate, bool decode_bf16) {
  check_fp8_target(fp8_dtype);
  const Tensor source = kernel_source(x, "fp8_cast");
  Fp8CastLaunch launch = cast_launch(source, fp8_dtype, saturate, decode_bf16);
  launch.scale = scale;
  launch.amax = one_float(0.0f, source.device());
  run(launch);
  Fp8CastResult result;
  result.codes = launch.codes;
  result.decoded = launch.decoded;
  result.amax = launch.amax.item<float>();
  return result;
}

Tensor fp8_cast(const Tensor& x, DType fp8_dtype, float scale, bool saturate) {
  check_fp8_target(fp8_dtype);
  Fp8CastLaunch launch = cast_launch(kernel_source(x, "fp8_cast"), fp8_dtype, saturate, false);
  launch.scale = scale;
  run(launch);
  return launch.codes;
}

Fp8Tensor fp8_cast_scaled(const Tensor& x, DType fp8_dtype, const Tensor& scale, const Tensor& amax, bool saturate,
                          bool decode_bf16) {
  check_fp8_target(fp8_dtype);
  const Tensor source = kernel_source(x, "fp8_cast");
  check_element(scale, source.device(), "fp8_cast", "scale");
  if (amax.defined()) check_element(amax, source.device(), "fp8_cast", "amax");
  Fp8CastLaunch launch = cast_launch(source, fp8_dtype, saturate, decode_bf16);
  launch.scale_on_device = scale;
  launch.amax = amax;
  launch.scale_inv = empty({1}, TensorOptions(kFloat32).device(source.device()));
  run(launch);
  if (source.device().type == DeviceType::CPU)
    return Fp8Tensor(launch.codes, launch.scale_inv.item<float>(), launch.decoded);
  return Fp8Tensor(launch.codes, 1.0f, launch.decoded, launch.scale_inv);
}

Tensor fp8_dequantize(const Tensor& q, float scale_inv, DType dtype) {
  check_defined(q, "fp8_dequantize");
  WEFT_CHECK(is_fp8(q.dtype()), "[fp8_dequantize] expected a float8_e4m3fn or float8_e5m2 tensor, got ", q.dtype());
  WEFT_CHECK(dtype == kFloat32 || dtype == kBFloat16, "[fp8_dequantize] expected the result dtype float32 or "
             "bfloat16, got ", dtype);
  const Tensor codes = q.contiguous();
  const detail::Fp8DequantizeLaunch launch{codes, empty(codes.shape(), TensorOptions(dtype).device(codes.device())),
                                           scale_inv};
  detail::fp8_dequantize_kernels().at(codes.device())(launch);
  return launch.out;
}

Tensor fp8_decode_bf16(const Tensor& q) { return fp8_dequantize(q, 1.0f, kBFloat16); }

}  // namespace weft::precision
