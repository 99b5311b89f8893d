// Which library computes floating-point matrix products on the CPU.
//
// weft always carries Eigen's GEMM. When it is built with OpenBLAS (the OpenMP flavour, found by
// CMake; see WEFT_OPENBLAS) that becomes the default: on AVX2 machines its sgemm is about 1.3×
// Eigen's, and the OpenMP flavour runs on the same thread pool as weft's own kernels, so the two
// never fight over cores (the pthread flavour would). Integer products never use either.
// The choice is process-wide; tests switch it to check that both give the same products.
#pragma once

namespace weft {

enum class GemmLibrary { Eigen, OpenBLAS };

const char* to_string(GemmLibrary library);

// True for Eigen always; for OpenBLAS only in a build that links it.
bool cpu_gemm_library_available(GemmLibrary library);

GemmLibrary cpu_gemm_library();

// Throws, naming the way to get it, when the library is not available in this build.
void set_cpu_gemm_library(GemmLibrary library);

}  // namespace weft
