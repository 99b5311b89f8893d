// The whole public API of weft in one include.
#pragma once

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
#include "nn/clip_grad.h"
#include "nn/lr_scheduler.h"
#include "nn/optim_adam.h"
#include "nn/optim_sgd.h"
