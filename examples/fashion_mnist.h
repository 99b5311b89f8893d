// Fashion-MNIST as the examples read it: the IDX files of one split (Debian's
// dataset-fashion-mnist puts them under /usr/share/datasets/fashion-mnist), the images flattened
// to (N, 784) float32 in [0, 1] and the labels as int64.
#pragma once

#include <cstdint>
#include <string>

#include "weft.h"

namespace weft::examples {

struct Split {
  Tensor images;  // (N, 784) float32 in [0, 1]
  Tensor labels;  // (N) int64
};

// The split named `prefix` ("train" or "t10k") in `dir`; with limit > 0, its first `limit` samples.
inline Split load_fashion_mnist(const std::string& dir, const std::string& prefix, int64_t limit = 0) {
  Tensor x = io::read_idx(dir + "/" + prefix + "-images-idx3-ubyte.gz");
  Tensor y = io::read_idx(dir + "/" + prefix + "-labels-idx1-ubyte.gz");
  WEFT_CHECK(x.dim() == 3 && y.dim() == 1 && x.size(0) == y.size(0), "[fashion_mnist] ", prefix,
             ": expected images (N, 28, 28) and labels (N), got ", x.shape(), " and ", y.shape());
  if (limit > 0 && limit < x.size(0)) {
    x = x.narrow(0, 0, limit);
    y = y.narrow(0, 0, limit);
  }
  // Scaled in place: a second (N, 784) float tensor would cost as much again in fresh pages,
  // which is most of the loading time.
  Tensor pixels = x.reshape({x.size(0), -1}).to(kFloat32);
  pixels.div_(255.0);
  return {pixels, y.to(kInt64)};
}

}  // namespace weft::examples
