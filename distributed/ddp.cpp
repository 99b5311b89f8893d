// DistributedDataParallel and its reducer (see ddp.h).
#include "distributed/ddp.h"

#include <algorithm>
#include <optional>

#include "distributed/coalesce.h"
#include "distributed/reduce_kernels.h"
#include "nn/lazy.h"
#include "tensor/autograd.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace weft::distributed {
namespace {

struct Bucket {
  std::vector<size_t> params;  // indices into Reducer::params, in their order in `buffer`
  DType dtype = kFloat32;
  int64_t numel = 0;
  size_t pending = 0;  // parameters not ready yet in this backward
  Tensor buffer;
  Tensor wire;  // the bucket as a compressing comm hook sends it (undefined without one)
  std::shared_ptr<Work> work;
};

// The dtype a compressing comm hook sends buckets in; none for the plain all-reduce.
std::optional<DType> wire_dtype(DDPCommHook hook) {
  switch (hook) {
    case DDPCommHook::AllReduce: return std::nullopt;
    case DDPCommHook::Fp16Compress: return kFloat16;
    case DDPCommHook::Bf16Compress: return kBFloat16;
  }
  return std::nullopt;
}

}  // namespace

// Note [DDP reducer state]: `armed` is set by a forward that synchronises and cleared by finish();
// hooks of a backward that was not armed (no_sync) do nothing. finish() runs once per armed
// backward, queued by the first hook that fires in it.
struct DistributedDataParallelImpl::Reducer {
  ProcessGroup* pg = nullptr;
  std::vector<Tensor> params;
  std::vector<Tensor> slots;  // each parameter's place in its bucket, shaped as the parameter
  bool grads_are_slots = false;
  std::vector<size_t> bucket_of;
  std::vector<bool> ready;
  std::vector<Bucket> buckets;
  size_t next_to_launch = 0;
  bool armed = false;
  bool finish_queued = false;

  void reset() {
    std::fill(ready.begin(), ready.end(), false);
    for (auto& b : buckets) {
      b.pending = b.params.size();
      b.work.reset();
    }
    next_to_launch = 0;
    finish_queued = false;
  }

  bool grad_is_slot(size_t i) const {
    const Tensor& g = params[i].grad();
    return g.defined() && g.data_ptr() == slots[i].data_ptr();
  }

  void launch(Bucket& b) {
    NoGradGuard no_grad;
    for (const size_t i : b.params)
      if (!grad_is_slot(i)) slots[i].copy_(params[i].grad());
    if (!b.wire.defined()) {
      b.work = pg->all_reduce(b.buffer, ReduceOp::Avg);
      return;
    }
    detail::cast_and_divide(b.dtype, b.buffer.data_ptr(), b.wire.dtype(), b.wire.data_ptr(),
                            static_cast<size_t>(b.numel), static_cast<double>(pg->size()));
    b.work = pg->all_reduce(b.wire, ReduceOp::Sum);
  }

  // Launches full buckets in index order, so every rank issues the same sequence.
  void launch_ready() {
    while (next_to_launch < buckets.size() && buckets[next_to_launch].pending == 0) launch(buckets[next_to_launch++]);
  }

  void on_grad_ready(size_t i) {
    if (!armed || ready[i]) return;
    if (!finish_queued) {
      finish_queued = true;
      autograd::queue_callback([this] { finish(); });
    }
    ready[i] = true;
    --buckets[bucket_of[i]].pending;
    launch_ready();
  }

  // End of backward: parameters without a gradient count as zeros; wait for every bucket and
  // copy the averages back (or point the gradients at them).
  void finish() {
    armed = false;
    for (size_t i = 0; i < params.size(); ++i) {
      if (ready[i]) continue;
      Tensor p = params[i];
      if (!p.grad().defined()) p.set_grad(zeros_like(p));
      ready[i] = true;
      --buckets[bucket_of[i]].pending;
    }
    launch_ready();
    NoGradGuard no_grad;
    for (auto& b : buckets) {
      b.work->wait();
      if (b.wire.defined()) b.buffer.copy_(b.wire);
      for (const size_t i : b.params) {
        if (grad_is_slot(i)) continue;
        if (grads_are_slots) params[i].set_grad(slots[i]);
        else params[i].grad().copy_(slots[i]);
      }
    }
    reset();
  }
};

DistributedDataParallelImpl::DistributedDataParallelImpl(std::shared_ptr<nn::Module> module,
                                                         std::shared_ptr<ProcessGroup> pg, DDPOptions options)
    : module_(std::move(module)), pg_(std::move(pg)), options_(options), reducer_(std::make_shared<Reducer>()) {
  WEFT_CHECK(module_ != nullptr && pg_ != nullptr, "[DistributedDataParallel] expected a module and a process group");
  WEFT_CHECK(!nn::has_uninitialized_params(*module_),
             "[DistributedDataParallel] Modules with uninitialized parameters can't be used with "
             "`DistributedDataParallel`. Run a dummy forward pass to correctly initialize the modules "
             "(nn::materialize(model, example_input))");
  WEFT_CHECK(options.bucket_cap_mb > 0 && options.first_bucket_cap_mb > 0,
             "[DistributedDataParallel] expected positive bucket sizes, got ", options.bucket_cap_mb, " and ",
             options.first_bucket_cap_mb, " MB");
  register_module("module", module_);

  const std::vector<Tensor> all = module_->parameters();
  verify_same_shapes(*pg_, all, "DistributedDataParallel");
  std::vector<Tensor> state = all;
  for (const auto& b : module_->buffers()) state.push_back(b);
  broadcast_coalesced(*pg_, state, 0);

  // Buckets over the parameters that need gradients, in reverse registration order.
  Reducer& r = *reducer_;
  r.pg = pg_.get();
  for (const auto& p : all)
    if (p.requires_grad()) r.params.push_back(p);
  r.bucket_of.assign(r.params.size(), 0);
  r.ready.assign(r.params.size(), false);
  double cap = options.first_bucket_cap_mb * 1024 * 1024;
  for (size_t k = r.params.size(); k-- > 0;) {
    const Tensor& p = r.params[k];
    const bool fits = !r.buckets.empty() && r.buckets.back().dtype == p.dtype() &&
                      static_cast<double>(r.buckets.back().numel * static_cast<int64_t>(itemsize(p.dtype()))) < cap;
    if (!fits) {
      if (!r.buckets.empty()) cap = options.bucket_cap_mb * 1024 * 1024;
      r.buckets.emplace_back();
      r.buckets.back().dtype = p.dtype();
    }
    Bucket& b = r.buckets.back();
    b.params.push_back(k);
    b.numel += p.numel();
    r.bucket_of[k] = r.buckets.size() - 1;
  }
  r.slots.resize(r.params.size());
  const std::optional<DType> wire = wire_dtype(options.comm_hook);
  for (auto& b : r.buckets) {
    b.buffer = zeros({b.numel}, TensorOptions(b.dtype));
    if (wire) b.wire = empty({b.numel}, TensorOptions(*wire));
    int64_t offset = 0;
    for (const size_t i : b.params) {
      r.slots[i] = b.buffer.narrow(0, offset, r.params[i].numel()).view(r.params[i].shape());
      offset += r.params[i].numel();
    }
  }
  r.grads_are_slots = options.gradient_as_bucket_view;
  r.reset();
  std::weak_ptr<Reducer> weak = reducer_;
  for (size_t k = 0; k < r.params.size(); ++k)
    r.params[k].register_post_accumulate_grad_hook([weak, k](Tensor&) {
      if (auto reducer = weak.lock()) reducer->on_grad_ready(k);
    });
}

DistributedDataParallelImpl::~DistributedDataParallelImpl() = default;

Tensor DistributedDataParallelImpl::forward(const Tensor& input) {
  if (options_.broadcast_buffers && pg_->size() > 1) {
    const auto buffers = module_->buffers();
    if (!buffers.empty()) broadcast_coalesced(*pg_, buffers, 0);
  }
  if (reducer_->finish_queued) {  // the last backward threw before its end: settle, then start afresh
    for (auto& b : reducer_->buckets)
      if (b.work) b.work->wait();
    reducer_->reset();
  }
  reducer_->armed = autograd::grad_mode_enabled() && sync_enabled_;
  return module_->call(input);
}

std::vector<std::vector<size_t>> DistributedDataParallelImpl::bucket_layout() const {
  std::vector<std::vector<size_t>> layout;
  for (const auto& b : reducer_->buckets) layout.push_back(b.params);
  return layout;
}

}  // namespace weft::distributed
