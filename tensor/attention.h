// What scaled_dot_product_attention (tensor/ops.h) runs, and its unfused reference.
//
// float32, bfloat16 and float16 attention runs a fused kernel (FlashAttention-2: tiles of keys
// and values, an online softmax, no L×S score matrix; tensor/attention_kernels.h) on every device
// that has one. float64, a float mask that requires grad, and GQA whose keys and values have
// different head counts run the composition of existing ops below instead, which materialises the
// scores and gets its gradients from theirs.
#pragma once

#include <cstdint>

#include "tensor/device.h"
#include "tensor/tensor.h"

namespace weft {

// The kernel attention of `dtype` runs on the device now: on the CPU the tile kernels of the
// current instruction set ("scalar", "avx2", "avx512"; tensor/cpu/isa.h), or "amx" for bfloat16
// at the amx level, whose products run on AMX tiles; on CUDA "cuda"; "unfused" for float64 and
// where the device has no kernel.
const char* attention_kernel_name(Device device = kCPU, DType dtype = kFloat32);

namespace detail {

// softmax(q·kᵀ·scale + mask)·v composed of matmul, masked_fill, softmax and mul, with the
// dropout mask of Note [Attention dropout stream] (tensor/attention_kernels.h) drawn from
// `dropout_key`, so it equals the fused kernels' for the same key. Arguments as
// scaled_dot_product_attention's, already checked.
Tensor scaled_dot_product_attention_unfused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                            double dropout_p, bool is_causal, double scale, bool enable_gqa,
                                            uint64_t dropout_key);

}  // namespace detail
}  // namespace weft
