// The CPU kernels and the registries of the scaled FP8 casts (precision/fp8/fp8_cast_kernels.h):
// long tensors are split into chunks that run on the CPU threads, each through the kernel set of
// the active instruction set (precision/fp8/fp8_dispatch.h).
#include "precision/fp8/fp8_cast_kernels.h"

#include <algorithm>
#include <vector>

#include "precision/fp8/fp8_dispatch.h"
#include "precision/fp8/fp8_scaling_rules.h"
#include "tensor/parallel.h"

namespace weft::precision::detail {
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

float combine_amax(const std::vector<float>& parts) {
  float amax = 0.0f;
  for (float p : parts) amax = fp8_nan_max(amax, p);
  return amax;
}

const char* byte_offset(const Tensor& t, int64_t begin) {
  return static_cast<const char*>(t.data_ptr()) + begin * static_cast<int64_t>(itemsize(t.dtype()));
}

}  // namespace

void cpu_fp8_cast(const Fp8CastLaunch& l) {
  const float scale = l.scale_on_device.defined() ? *l.scale_on_device.data<float>() : l.scale;
  if (l.scale_inv.defined()) *l.scale_inv.data<float>() = 1.0f / scale;
  const Tensor& source = l.source;
  const bool bf16 = source.dtype() == kBFloat16;
  const int64_t n = source.numel();
  std::vector<float> parts(static_cast<size_t>((n + kChunk - 1) / kChunk));
  const weft::detail::Fp8KernelTable& k = weft::detail::fp8_kernels();
  if (l.codes.defined()) {
    auto* codes = static_cast<uint8_t*>(l.codes.data_ptr());
    auto* decoded = l.decoded.defined() ? static_cast<uint16_t*>(l.decoded.data_ptr()) : nullptr;
    const bool e5m2 = l.codes.dtype() == kFloat8E5M2;
    for_chunks(n, [&](int64_t begin, int64_t count) {
      const weft::detail::Fp8EncodeArgs args{byte_offset(source, begin), bf16, codes + begin,
                                             decoded ? decoded + begin : nullptr, count, scale, e5m2, l.saturate};
      parts[static_cast<size_t>(begin / kChunk)] = k.encode(args);
    });
  } else {
    for_chunks(n, [&](int64_t begin, int64_t count) {
      parts[static_cast<size_t>(begin / kChunk)] = k.amax(byte_offset(source, begin), bf16, count);
    });
  }
  if (l.amax.defined()) {
    float& amax = *l.amax.data<float>();
    amax = fp8_nan_max(amax, combine_amax(parts));
  }
}

void cpu_fp8_dequantize(const Fp8DequantizeLaunch& l) {
  const weft::detail::Fp8KernelTable& k = weft::detail::fp8_kernels();
  const auto* in = static_cast<const uint8_t*>(l.codes.data_ptr());
  const bool f32 = l.out.dtype() == kFloat32;
  for_chunks(l.codes.numel(), [&](int64_t begin, int64_t count) {
    weft::detail::Fp8DecodeArgs args{in + begin, nullptr, nullptr, count, l.scale_inv,
                                     l.codes.dtype() == kFloat8E5M2};
    if (f32) args.out_f32 = static_cast<float*>(l.out.data_ptr()) + begin;
    else args.out_bf16 = static_cast<uint16_t*>(l.out.data_ptr()) + begin;
    k.decode(args);
  });
}

weft::detail::KernelRegistry<Fp8CastKernel>& fp8_cast_kernels() {
  static weft::detail::KernelRegistry<Fp8CastKernel> registry("fp8_cast", &cpu_fp8_cast, cuda_fp8_cast);
  return registry;
}

weft::detail::KernelRegistry<Fp8DequantizeKernel>& fp8_dequantize_kernels() {
  static weft::detail::KernelRegistry<Fp8DequantizeKernel> registry("fp8_dequantize", &cpu_fp8_dequantize,
                                                                    cuda_fp8_dequantize);
  return registry;
}

}  // namespace weft::precision::detail
