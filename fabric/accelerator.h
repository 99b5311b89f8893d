// The accelerator a Fabric request names, resolved against what this build and this machine have.
//
//   request          CPU-only build   CUDA build, no GPU   CUDA build with a GPU
//   "cpu"            cpu              cpu                  cpu
//   "auto"           cpu              cpu                  cuda
//   "cuda", "gpu"    error            error                cuda
//   anything else    error            error                error
//
// A pure function of its three inputs, so every cell of the table is tested on any machine;
// Fabric passes cuda::is_built() and cuda::is_available().
#pragma once

#include <string>

#include "tensor/device.h"

namespace weft::fabric {

// "cpu" or "cuda"; throws "[Fabric] ..." naming what was asked and what this build or machine has.
std::string resolve_accelerator(const std::string& requested, bool cuda_built, bool cuda_available);

// The device a single-process Fabric on `accelerator` trains on: cpu, or the current CUDA device.
Device accelerator_device(const std::string& accelerator);

}  // namespace weft::fabric
