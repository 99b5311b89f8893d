// CPU tensors for data that lives as long as a model (loaded or quantized weights), in memory
// that costs the process exactly their bytes.
//
// The caching allocator (tensor/cpu/caching_allocator.h) rounds a request to a size class and
// advises blocks of 2 MiB and more as huge pages: a 2.25 MiB int8 weight takes a 4 MiB block and,
// once written, two resident huge pages. That is right for activations that come and go, and a
// quarter or more of waste for weights that stay. exact_empty takes memory of the tensor's size
// (rounded up to 64 bytes) outside the size classes; zero_pages maps fresh anonymous memory,
// zero-filled by the kernel, of which no page is resident until it is written — the stand-in a
// layer built to be loaded holds until the checkpoint's tensors replace it.
#pragma once

#include "tensor/tensor.h"

namespace weft {

// An uninitialised contiguous CPU tensor in memory of exactly its size, 64-byte aligned.
Tensor exact_empty(const Shape& shape, DType dtype);
// A contiguous copy of t: on the CPU in exact_empty memory, on another device its ordinary clone.
Tensor exact_clone(const Tensor& t);
// A contiguous CPU tensor of zeros that holds no resident memory until written.
Tensor zero_pages(const Shape& shape, DType dtype);

}  // namespace weft
