// The whole public API of weft in one include, layer by layer.
#pragma once

#include "tensor/autocast_state.h"
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

#include "nn/nn.h"

#include "precision/autocast.h"
#include "precision/convert.h"
#include "precision/deepspeed_precision.h"
#include "precision/fsdp_precision.h"
#include "precision/grad_scaler.h"
#include "precision/precision_input.h"
#include "precision/warnings.h"
