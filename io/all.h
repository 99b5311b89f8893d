// The io floor in one include (and everything below it): safetensors, checkpoints, atomic file
// writes, the IDX dataset reader and a JSON document reader.
#pragma once

#include "optim/all.h"

#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "io/idx_file.h"
#include "io/json.h"
#include "io/input_file.h"
#include "io/safetensors.h"
#include "io/utf8.h"
