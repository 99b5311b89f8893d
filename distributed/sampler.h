// DistributedSampler: which samples of a dataset this rank trains on in an epoch, as PyTorch's
// torch.utils.data.distributed.DistributedSampler decides it.
//
// Every rank draws the same permutation of [0, size) (seeded by seed + epoch, so call
// set_epoch() each epoch for a new order), pads it by repeating its start until its length
// divides by the number of replicas (or, with drop_last, cuts the tail instead), and takes every
// replicas-th index starting at its rank. So the ranks' shares are disjoint (but for the padding),
// equally long, and together cover the dataset.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace weft::distributed {

struct SamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
};

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, SamplerOptions options = {});

  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  // This rank's indices for the current epoch: an int64 tensor of num_samples() elements.
  Tensor indices() const;
  int64_t num_samples() const { return num_samples_; }
  int64_t total_size() const { return num_samples_ * num_replicas_; }

 private:
  int64_t size_;
  int num_replicas_;
  int rank_;
  SamplerOptions options_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
};

}  // namespace weft::distributed
