// The nn floor in one include (and everything below it): the Module tree, holders, initialisers,
// the construction seam, layers, containers and lazy modules.
#pragma once

#include "tensor/all.h"

#include "nn/activation.h"
#include "nn/containers.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/init.h"
#include "nn/layer_norm.h"
#include "nn/lazy.h"
#include "nn/lazy_linear.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/module_holder.h"
#include "nn/module_init_context.h"
#include "nn/tensor_dict.h"
#include "nn/tied_state.h"
