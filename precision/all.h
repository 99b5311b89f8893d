// The precision floor in one include (and everything below it): precision inputs, plugins,
// autocast, GradScaler and the FSDP/DeepSpeed precision tables.
#pragma once

#include "io/all.h"

#include "precision/autocast.h"
#include "precision/context.h"
#include "precision/convert.h"
#include "precision/deepspeed_precision.h"
#include "precision/fsdp_precision.h"
#include "precision/grad_scaler.h"
#include "precision/make_precision.h"
#include "precision/mixed_precision.h"
#include "precision/precision.h"
#include "precision/precision_input.h"
#include "precision/replace_layers.h"
#include "precision/true_precision.h"
#include "precision/warnings.h"
