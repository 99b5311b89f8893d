// WEFT_HD marks functions compiled for both the CPU and, by nvcc, the GPU: the arithmetic that
// CPU and CUDA kernels must share bit for bit (narrow float codecs, Philox, reduction combines).
// With any other compiler it expands to nothing, so these headers are ordinary C++ there and the
// CPU tests exercise the very code the GPU runs.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define WEFT_HD __host__ __device__
#else
#define WEFT_HD
#endif

namespace weft::detail {

// std::bit_cast is not callable from device code; memcpy is, and compiles to a register move.
WEFT_HD inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

WEFT_HD inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace weft::detail
