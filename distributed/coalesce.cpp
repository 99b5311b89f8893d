// Coalesced collectives and the cross-rank shape check.
#include "distributed/coalesce.h"

#include <map>

#include "tensor/autograd.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace weft::distributed {

Tensor flatten_into_buffer(const std::vector<Tensor>& tensors, DType dtype) {
  NoGradGuard no_grad;
  int64_t total = 0;
  for (const auto& t : tensors) total += t.numel();
  Tensor buffer = empty({total}, TensorOptions(dtype));
  int64_t offset = 0;
  for (const auto& t : tensors) {
    buffer.narrow(0, offset, t.numel()).view(t.shape()).copy_(t);
    offset += t.numel();
  }
  return buffer;
}

void copy_from_buffer(const Tensor& buffer, const std::vector<Tensor>& tensors) {
  NoGradGuard no_grad;
  int64_t offset = 0;
  for (const auto& t : tensors) {
    Tensor target = t;
    target.copy_(buffer.narrow(0, offset, t.numel()).view(t.shape()));
    offset += t.numel();
  }
}

void broadcast_coalesced(ProcessGroup& pg, const std::vector<Tensor>& tensors, int root) {
  if (pg.size() == 1) return;
  std::map<DType, std::vector<Tensor>> by_dtype;
  for (const auto& t : tensors) by_dtype[t.dtype()].push_back(t);
  std::vector<std::pair<Tensor, std::shared_ptr<Work>>> pending;
  for (const auto& [dtype, group] : by_dtype) {
    Tensor buffer = flatten_into_buffer(group, dtype);
    pending.emplace_back(buffer, pg.broadcast(buffer, root));
  }
  size_t i = 0;
  for (const auto& [dtype, group] : by_dtype) {
    pending[i].second->wait();
    copy_from_buffer(pending[i].first, group);
    ++i;
  }
}

void verify_same_shapes(ProcessGroup& pg, const std::vector<Tensor>& tensors, const char* what) {
  // count, total elements, and an FNV-1a hash of every (dtype, shape) in order
  uint64_t hash = 1469598103934665603ull;
  const auto mix = [&](uint64_t v) { hash = (hash ^ v) * 1099511628211ull; };
  int64_t total = 0;
  for (const auto& t : tensors) {
    mix(static_cast<uint64_t>(t.dtype()));
    mix(static_cast<uint64_t>(t.dim()));
    for (int64_t d : t.shape()) mix(static_cast<uint64_t>(d));
    total += t.numel();
  }
  const int n = pg.size();
  Tensor mine = from_vector<int64_t>({static_cast<int64_t>(tensors.size()), total, static_cast<int64_t>(hash)}, {3});
  Tensor all = zeros({3 * n}, kInt64);
  pg.all_gather(all, mine)->wait();
  const auto v = all.to_vector<int64_t>();
  for (int r = 1; r < n; ++r) {
    const size_t o = static_cast<size_t>(3 * r);
    WEFT_CHECK(v[o] == v[0] && v[o + 1] == v[1] && v[o + 2] == v[2], "[", what, "] rank ", r,
               "'s model differs from rank 0's: ", v[o], " tensors with ", v[o + 1], " elements against ", v[0],
               " with ", v[1], (v[o] == v[0] && v[o + 1] == v[1] ? " (shapes or dtypes differ)" : ""),
               "; every rank must build the same model");
  }
}

}  // namespace weft::distributed
