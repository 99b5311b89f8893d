// Which code computes floating-point matrix products on the CPU.
//
// Weft (the default) is weft's own GEMM (tensor/cpu/gemm/gemm.h): float32, float64, and bfloat16
// read as such, on kernels chosen at run time for the CPU (tensor/cpu/isa.h); float16 is widened
// to float32. Eigen and OpenBLAS remain choices where the build links them (-DWEFT_EIGEN=ON,
// -DWEFT_OPENBLAS=ON; both off by default), to compare against and as a way out: both run
// single-threaded per block of C on weft's thread pool, so no second pool (OpenMP's) ever competes
// with it for the cores. Integer products use none. The choice is process-wide; tests switch it to
// check that all give the same products.
#pragma once

#include <string>

#include "tensor/dtype.h"

namespace weft {

enum class GemmLibrary { Weft, Eigen, OpenBLAS };

const char* to_string(GemmLibrary library);
// Parses "weft", "eigen" or "openblas"; throws weft::Error listing them otherwise.
GemmLibrary gemm_library_from_name(const std::string& name);

// True for Weft always; for Eigen and OpenBLAS only in a build that links them.
bool cpu_gemm_library_available(GemmLibrary library);

GemmLibrary cpu_gemm_library();

// Throws, naming the way to get it, when the library is not available in this build.
void set_cpu_gemm_library(GemmLibrary library);

// What computes a product of `dtype` inputs now, e.g. "weft avx2 6x16 fp32",
// "weft avx512_bf16 12x32 bf16 pairs", "openblas" (library and instruction-set level taken into account).
std::string cpu_gemm_kernel(DType dtype);

}  // namespace weft
