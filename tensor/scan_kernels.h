// The kernel of cumsum (tensor/scan.cpp), outside the Backend vtable with a KernelRegistry of its
// own (tensor/kernel_registry.h); the CPU kernel lives in tensor/cpu/scan.cpp. There is no CUDA
// kernel yet: the registry's CUDA slot is empty, so a CUDA tensor gets "[cumsum] has no kernel for
// cuda:0" from the front-end.
#pragma once

#include "tensor/kernel_registry.h"
#include "tensor/tensor.h"

namespace weft::detail {

// x: (outer, n, inner) contiguous -> out: (outer, n, inner), both of out's dtype:
// out[o, j, i] = Σ_{m <= j} x[o, m, i], or Σ_{m >= j} when `reverse` (the backward of cumsum).
// float64 and float32 accumulate in float64, narrow floats in float32 (each output rounded once),
// integers and bool in int64 (wrapping on overflow, as PyTorch).
struct CumsumLaunch {
  Tensor x, out;
  bool reverse;
};
using CumsumKernel = void(const CumsumLaunch&);
KernelRegistry<CumsumKernel>& cumsum_kernels();
void cpu_cumsum(const CumsumLaunch& args);

}  // namespace weft::detail
