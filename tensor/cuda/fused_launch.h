// The launch functions of tensor/cuda/fused.cu and the plain argument structs they take (no
// Tensor, no CUDA header: both g++ and nvcc include this). The host wrappers that fill them from
// the fused features' launches are in tensor/cuda/fused.cpp.
#pragma once

#include <cstdint>

#include "tensor/cuda/launch.h"
#include "tensor/cuda/runtime.h"

namespace weft::cuda::detail {

// logits: (rows, classes) contiguous of `dtype`, target: (rows) int64, lse: (rows) of the compute
// type (double for float64, else float), losses / grad_losses: (rows), grad_logits like logits.
struct CrossEntropyArgs {
  const char* logits;
  const int64_t* target;
  char* lse;
  char* losses;
  const char* grad_losses;
  char* grad_logits;
  DType dtype;
  int64_t rows, classes, ignore_index;
  double label_smoothing;
  DeviceError* error;
};
void launch_cross_entropy_forward(const CrossEntropyArgs& a, StreamHandle stream);
void launch_cross_entropy_backward(const CrossEntropyArgs& a, StreamHandle stream);

// x, y, grad_y, grad_x: (rows, cols) contiguous of `dtype`; weight, bias and their gradients:
// (cols) or null; mean, rstd: (rows) of the compute type.
struct LayerNormArgs {
  const char* x;
  const char* weight;
  const char* bias;
  char* y;
  char* mean;
  char* rstd;
  const char* grad_y;
  char* grad_x;
  char* grad_weight;
  char* grad_bias;
  DType dtype;
  int64_t rows, cols;
  double eps;
};
void launch_layer_norm_forward(const LayerNormArgs& a, StreamHandle stream);
void launch_layer_norm_backward(const LayerNormArgs& a, StreamHandle stream);

// x, out: n contiguous elements of `dtype` (Note [Philox streams]).
void launch_dropout(const void* x, void* out, DType dtype, int64_t n, double keep_probability, uint64_t key,
                    StreamHandle stream);

}  // namespace weft::cuda::detail
