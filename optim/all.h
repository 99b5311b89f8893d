// The optim floor in one include (and everything below it): optimizers, gradient clipping, LR
// schedulers and the state-dict scalar codec.
#pragma once

#include "nn/all.h"

#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "optim/scalar_codec.h"
#include "optim/sgd.h"
