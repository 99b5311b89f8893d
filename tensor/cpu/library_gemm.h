// Floating products on a GEMM library (Eigen, OpenBLAS) rather than weft's own: see
// tensor/cpu/gemm_library.h. Internal to the CPU backend.
#pragma once

#include "tensor/cpu/gemm_library.h"
#include "tensor/tensor.h"

namespace weft::detail {

// out (+)= a · b for (B, M, K) · (B, K, N) -> (B, M, N) of float (T = float) or double, on
// `library` (Eigen or OpenBLAS), each product split into blocks of C over weft's thread pool.
template <class T>
void library_gemm(GemmLibrary library, Tensor a, Tensor b, const Tensor& out, bool accumulate);

}  // namespace weft::detail
