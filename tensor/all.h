// The tensor floor in one include: dtypes, devices, Tensor and its ops, autograd, the init-context
// stack, RNG, threads, the CPU kernel choices (GEMM library, instruction set, packed weights) and
// the CUDA devices (streams, memory; present in every build, tensor/cuda.h). The lowest floor: it
// includes nothing of weft above it.
#pragma once

#include "tensor/attention.h"
#include "tensor/autocast_state.h"
#include "tensor/autograd.h"
#include "tensor/cpu/caching_allocator.h"
#include "tensor/cpu/gemm_library.h"
#include "tensor/cpu/isa.h"
#include "tensor/cuda.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/float_formats.h"
#include "tensor/generator.h"
#include "tensor/init_context.h"
#include "tensor/ops.h"
#include "tensor/packed_weights.h"
#include "tensor/parallel.h"
#include "tensor/storage.h"
#include "tensor/tensor.h"
