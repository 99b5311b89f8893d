// Scaled FP8 casts: argument checks and the split of long tensors into chunks that run on the CPU
// threads, each through the kernel set of the active instruction set (precision/fp8/fp8_cast.h).
#include "precision/fp8/fp8_cast.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "precision/fp8/fp8_dispatch.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace weft::precision {
namespace {

// Elements per task: large enough that a task outweighs its scheduling, a multiple of every
// kernel's block so that only the last chunk has a tail.
constexpr int64_t kChunk = int64_t{1} << 16;

// Runs fn(begin, count) over [0, n) in chunks on the CPU threads.
template <class Fn>
void for_chunks(int64_t n, Fn&& fn) {
  parallel_for((n + kChunk - 1) / kChunk, [&](int64_t c) {
    const int64_t begin = c * kChunk;
    fn(begin, std::min(kChunk, n - begin));
  });
}

float nan_max(float a, float b) { return std::isnan(a) || a > b ? a : b; }

float combine_amax(const std::vector<float>& parts) {
  float amax = 0.0f;
  for (float p : parts) amax = nan_max(amax, p);
  return amax;
}

bool is_fp8(DType d) { return d == kFloat8E4M3FN || d == kFloat8E5M2; }

void check_cpu(const Tensor& t, const char* op) {
  WEFT_CHECK(t.defined(), "[", op, "] the input tensor is undefined");
  WEFT_CHECK(t.device().type == DeviceType::CPU, "[", op, "] runs on the cpu in this build, got a tensor on ",
             t.device());
}

// x as a contiguous float32 or bfloat16 tensor the kernels can read.
Tensor kernel_source(const Tensor& x, const char* op) {
  check_cpu(x, op);
  WEFT_CHECK(x.is_floating_point(), "[", op, "] expected a floating tensor, got ", x.dtype());
  const Tensor source = x.dtype() == kBFloat16 || x.dtype() == kFloat32 ? x.detach() : x.detach().to(kFloat32);
  return source.contiguous();
}

const char* byte_offset(const Tensor& t, int64_t begin) {
  return static_cast<const char*>(t.data_ptr()) + begin * static_cast<int64_t>(itemsize(t.dtype()));
}

}  // namespace

float fp8_max(DType fp8_dtype) {
  WEFT_CHECK(is_fp8(fp8_dtype), "[fp8_max] expected float8_e4m3fn or float8_e5m2, got ", fp8_dtype);
  return fp8_dtype == kFloat8E4M3FN ? 448.0f : 57344.0f;
}

float fp8_amax(const Tensor& x) {
  const Tensor source = kernel_source(x, "fp8_amax");
  const int64_t n = source.numel();
  std::vector<float> parts(static_cast<size_t>((n + kChunk - 1) / kChunk));
  const detail::Fp8KernelTable& k = detail::fp8_kernels();
  for_chunks(n, [&](int64_t begin, int64_t count) {
    parts[static_cast<size_t>(begin / kChunk)] = k.amax(byte_offset(source, begin), source.dtype() == kBFloat16, count);
  });
  return combine_amax(parts);
}

Fp8CastResult fp8_cast_with_amax(const Tensor& x, DType fp8_dtype, float scale, bool saturate, bool decode_bf16) {
  WEFT_CHECK(is_fp8(fp8_dtype), "[fp8_cast] expected the target dtype float8_e4m3fn or float8_e5m2, got ", fp8_dtype);
  const Tensor source = kernel_source(x, "fp8_cast");
  const int64_t n = source.numel();
  Fp8CastResult result;
  result.codes = empty(source.shape(), TensorOptions(fp8_dtype).device(source.device()));
  if (decode_bf16) result.decoded = empty(source.shape(), TensorOptions(kBFloat16).device(source.device()));
  std::vector<float> parts(static_cast<size_t>((n + kChunk - 1) / kChunk));
  const detail::Fp8KernelTable& k = detail::fp8_kernels();
  auto* codes = static_cast<uint8_t*>(result.codes.data_ptr());
  auto* decoded = decode_bf16 ? static_cast<uint16_t*>(result.decoded.data_ptr()) : nullptr;
  for_chunks(n, [&](int64_t begin, int64_t count) {
    const detail::Fp8EncodeArgs args{byte_offset(source, begin), source.dtype() == kBFloat16, codes + begin,
                                     decoded ? decoded + begin : nullptr, count, scale, fp8_dtype == kFloat8E5M2,
                                     saturate};
    parts[static_cast<size_t>(begin / kChunk)] = k.encode(args);
  });
  result.amax = combine_amax(parts);
  return result;
}

Tensor fp8_cast(const Tensor& x, DType fp8_dtype, float scale, bool saturate) {
  return fp8_cast_with_amax(x, fp8_dtype, scale, saturate).codes;
}

Tensor fp8_dequantize(const Tensor& q, float scale_inv, DType dtype) {
  check_cpu(q, "fp8_dequantize");
  WEFT_CHECK(is_fp8(q.dtype()), "[fp8_dequantize] expected a float8_e4m3fn or float8_e5m2 tensor, got ", q.dtype());
  WEFT_CHECK(dtype == kFloat32 || dtype == kBFloat16, "[fp8_dequantize] expected the result dtype float32 or "
             "bfloat16, got ", dtype);
  const Tensor codes = q.contiguous();
  Tensor out = empty(codes.shape(), TensorOptions(dtype).device(codes.device()));
  const detail::Fp8KernelTable& k = detail::fp8_kernels();
  const auto* in = static_cast<const uint8_t*>(codes.data_ptr());
  for_chunks(codes.numel(), [&](int64_t begin, int64_t count) {
    detail::Fp8DecodeArgs args{in + begin, nullptr, nullptr, count, scale_inv, q.dtype() == kFloat8E5M2};
    if (dtype == kFloat32) args.out_f32 = static_cast<float*>(out.data_ptr()) + begin;
    else args.out_bf16 = static_cast<uint16_t*>(out.data_ptr()) + begin;
    k.decode(args);
  });
  return out;
}

Tensor fp8_decode_bf16(const Tensor& q) { return fp8_dequantize(q, 1.0f, kBFloat16); }

}  // namespace weft::precision
