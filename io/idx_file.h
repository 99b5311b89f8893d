// Reading IDX files, the format of the MNIST family of datasets (optionally gzip-compressed).
//
// An IDX file is a 4-byte magic (two zero bytes, an element-type code, the number of dims), one
// big-endian uint32 per dim, then the elements in row-major order, big-endian. read_idx returns
// them as a CPU tensor of the matching dtype (uint8 images stay uint8). A truncated, oversized or
// malformed file is rejected with an error that names the file and what was wrong.
#pragma once

#include <string>

#include "tensor/tensor.h"

namespace weft::io {

Tensor read_idx(const std::string& path);

}  // namespace weft::io
