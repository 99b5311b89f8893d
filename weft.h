// The whole public API of weft in one include.
#pragma once

#include "nn/safetensors.h"
#include "nn/tensor_dict.h"
#include "tensor/autograd.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/float_formats.h"
#include "tensor/generator.h"
#include "tensor/init_context.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"
#include "tensor/tensor.h"
