// FlatParam: flattening, gathering, freeing and reducing one FSDP unit (see flat_param.h).
#include "distributed/flat_param.h"

#include "distributed/coalesce.h"
#include "tensor/autograd.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace weft::distributed::detail {

FlatParam::FlatParam(std::string name, std::vector<FlatParamEntry> entries, int rank, int world, bool sharded,
                     DType compute_dtype, DType reduce_dtype, DType grad_dtype)
    : name_(std::move(name)),
      entries_(std::move(entries)),
      rank_(rank),
      world_(sharded ? world : 1),
      sharded_(sharded),
      compute_dtype_(compute_dtype),
      reduce_dtype_(reduce_dtype),
      grad_dtype_(grad_dtype) {
  init(1);
}

FlatParam::FlatParam(ByteStorageTag, std::string name, std::vector<FlatParamEntry> entries, int rank, int world,
                     bool sharded)
    : name_(std::move(name)),
      entries_(std::move(entries)),
      rank_(rank),
      world_(sharded ? world : 1),
      sharded_(sharded),
      bytes_(true),
      compute_dtype_(kUInt8),
      reduce_dtype_(kUInt8),
      grad_dtype_(kUInt8) {
  init(kByteStorageAlign);
}

std::unique_ptr<FlatParam> FlatParam::byte_storage(std::string name, std::vector<FlatParamEntry> entries, int rank,
                                                   int world, bool sharded) {
  return std::unique_ptr<FlatParam>(
      new FlatParam(ByteStorageTag{}, std::move(name), std::move(entries), rank, world, sharded));
}

void FlatParam::init(int64_t align) {
  WEFT_CHECK(!entries_.empty(), "[FullyShardedDataParallel] unit '", name_, "' has no parameters");
  requires_grad_ = !bytes_ && entries_[0].param.requires_grad();
  std::vector<Tensor> values;
  for (auto& e : entries_) {
    e.dtype = e.param.dtype();
    e.shape = e.param.shape();
    e.numel = e.param.numel() * (bytes_ ? static_cast<int64_t>(itemsize(e.dtype)) : 1);
    e.offset = (numel_ + align - 1) / align * align;
    numel_ = e.offset + e.numel;
    values.push_back(e.param);
  }
  padded_ = (numel_ + world_ - 1) / world_ * world_;
  shard_numel_ = padded_ / world_;
  shard_offset_ = sharded_ ? rank_ * shard_numel_ : 0;
  load_shard_from_full(flatten(values));
  shard_.requires_grad_(requires_grad_);
  grad_seen_.assign(entries_.size(), false);
  reset_grads();

  full_aliases_shard_ = !sharded_ && compute_dtype_ == master_dtype();
  if (full_aliases_shard_) {
    full_ = shard_.detach();
    unsharded_ = true;
    point_params_at_full();
  } else {
    full_ = empty({padded_}, TensorOptions(compute_dtype_));
    full_.storage()->resize_(0);
    empty_params();
  }
}

Tensor FlatParam::flatten(const std::vector<Tensor>& values) const {
  WEFT_CHECK(values.size() == entries_.size(), "[FullyShardedDataParallel] unit '", name_, "' expected ",
             entries_.size(), " tensors, got ", values.size());
  if (!bytes_) return flatten_into_buffer(values, entries_[0].dtype);
  Tensor flat = zeros({numel_}, TensorOptions(kUInt8));
  for (size_t k = 0; k < entries_.size(); ++k) {
    const FlatParamEntry& e = entries_[k];
    WEFT_CHECK(values[k].dtype() == e.dtype && values[k].shape() == e.shape, "[FullyShardedDataParallel] '", e.fqn,
               "' expected ", e.dtype, " ", e.shape, ", got ", values[k].dtype(), " ", values[k].shape());
    if (e.numel > 0) flat.narrow(0, e.offset, e.numel).copy_(values[k].contiguous().reshape({-1}).view(kUInt8));
  }
  return flat;
}

Tensor FlatParam::entry_view(const Tensor& flat, size_t k) const {
  const FlatParamEntry& e = entries_[k];
  Tensor part = flat.narrow(0, e.offset, e.numel);
  if (bytes_) part = part.view(e.dtype);
  return part.view(e.shape);
}

void FlatParam::load_shard_from_full(const Tensor& flat) {
  NoGradGuard no_grad;
  if (!shard_.defined()) shard_ = zeros({shard_numel_}, TensorOptions(flat.dtype()));
  else shard_.zero_();
  const int64_t have = std::min<int64_t>(flat.numel(), numel_);
  const int64_t begin = std::min(shard_offset_, have);
  const int64_t end = std::min(shard_offset_ + shard_numel_, have);
  if (end > begin) shard_.narrow(0, 0, end - begin).copy_(flat.narrow(0, begin, end - begin));
}

void FlatParam::point_params_at_full() {
  for (size_t k = 0; k < entries_.size(); ++k) entries_[k].param.set_data(entry_view(full_, k));
}

void FlatParam::empty_params() {
  for (auto& e : entries_) e.param.set_data(empty({0}, TensorOptions(bytes_ ? e.dtype : compute_dtype_)));
}

void FlatParam::start_gather(ProcessGroup& pg) {
  if (unsharded_ || gather_work_) return;
  NoGradGuard no_grad;
  full_.storage()->resize_(static_cast<size_t>(padded_) * itemsize(compute_dtype_));
  gather_input_ = compute_dtype_ == master_dtype() ? shard_.detach() : shard_.detach().to(compute_dtype_);
  if (sharded_) {
    gather_work_ = pg.all_gather(full_, gather_input_);
  } else {
    full_.copy_(gather_input_);
    unsharded_ = true;
    gather_input_ = Tensor();
    point_params_at_full();
  }
}

void FlatParam::finish_gather(ProcessGroup& pg) {
  if (unsharded_) return;
  start_gather(pg);
  if (!gather_work_) return;
  gather_work_->wait();
  gather_work_.reset();
  gather_input_ = Tensor();
  unsharded_ = true;
  point_params_at_full();
}

void FlatParam::reshard() {
  if (!can_free()) return;
  if (gather_work_) {  // never free memory a collective is still writing
    gather_work_->wait();
    gather_work_.reset();
    gather_input_ = Tensor();
  }
  empty_params();
  full_.storage()->resize_(0);
  unsharded_ = false;
}

bool FlatParam::grad_ready(size_t entry) {
  if (!grad_seen_[entry]) {
    grad_seen_[entry] = true;
    --pending_grads_;
  }
  return pending_grads_ == 0;
}

void FlatParam::reset_grads() {
  std::fill(grad_seen_.begin(), grad_seen_.end(), false);
  pending_grads_ = requires_grad_ ? entries_.size() : 0;
}

void FlatParam::start_reduce(ProcessGroup& pg) {
  NoGradGuard no_grad;
  reduce_input_ = empty({padded_}, TensorOptions(reduce_dtype_));
  if (padded_ > numel_) reduce_input_.narrow(0, numel_, padded_ - numel_).zero_();
  for (auto& e : entries_) {
    Tensor slot = reduce_input_.narrow(0, e.offset, e.numel);
    const Tensor g = e.param.grad();
    if (g.defined()) slot.view(e.shape).copy_(g);
    else slot.zero_();
    e.param.set_grad(Tensor());
  }
  if (sharded_) {
    reduce_output_ = empty({shard_numel_}, TensorOptions(reduce_dtype_));
    reduce_work_ = pg.reduce_scatter(reduce_output_, reduce_input_, ReduceOp::Avg);
  } else {
    reduce_output_ = reduce_input_;
    reduce_work_ = pg.all_reduce(reduce_input_, ReduceOp::Avg);
  }
}

void FlatParam::finish_reduce() {
  if (!reduce_work_) return;
  reduce_work_->wait();
  reduce_work_.reset();
  NoGradGuard no_grad;
  const Tensor g = reduce_output_.to(grad_dtype_);
  Tensor existing = shard_.grad();
  if (existing.defined()) existing.add_(g);  // Note [Low-precision gradient shards]
  else shard_.set_grad(g);
  reduce_input_ = Tensor();
  reduce_output_ = Tensor();
}

}  // namespace weft::distributed::detail
