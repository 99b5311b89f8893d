// The io floor in one include (and everything below it): safetensors, checkpoints, atomic file
// writes and the IDX dataset reader.
#pragma once

#include "optim/all.h"

#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "io/idx_file.h"
#include "io/input_file.h"
#include "io/safetensors.h"
