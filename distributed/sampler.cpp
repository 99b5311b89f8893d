// DistributedSampler (see sampler.h).
#include "distributed/sampler.h"

#include "tensor/error.h"
#include "tensor/generator.h"
#include "tensor/ops.h"

namespace weft::distributed {

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank, SamplerOptions options)
    : size_(dataset_size), num_replicas_(num_replicas), rank_(rank), options_(options) {
  WEFT_CHECK(num_replicas >= 1 && rank >= 0 && rank < num_replicas, "[DistributedSampler] expected 0 <= rank < "
             "num_replicas, got rank ", rank, " of ", num_replicas);
  WEFT_CHECK(dataset_size >= 0, "[DistributedSampler] expected a dataset size >= 0, got ", dataset_size);
  num_samples_ = options.drop_last && size_ % num_replicas != 0 ? (size_ - num_replicas + num_replicas - 1) / num_replicas
                                                                 : (size_ + num_replicas - 1) / num_replicas;
  if (num_samples_ < 0) num_samples_ = 0;
}

Tensor DistributedSampler::indices() const {
  Tensor all;
  if (options_.shuffle) {
    Generator g(options_.seed + static_cast<uint64_t>(epoch_));
    all = randperm(size_, &g);
  } else {
    all = arange(static_cast<double>(size_), TensorOptions(kInt64));
  }
  const int64_t total = total_size();
  if (total > size_ && size_ > 0) {  // pad by repeating the start (several times if needed)
    std::vector<Tensor> parts{all};
    for (int64_t have = size_; have < total; have += size_) parts.push_back(all.narrow(0, 0, std::min(size_, total - have)));
    all = cat(parts);
  }
  all = all.narrow(0, 0, total);
  return all.slice(0, rank_, total, num_replicas_).contiguous();
}

}  // namespace weft::distributed
