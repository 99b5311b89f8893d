// DistributedDataParallel and its reducer (see ddp.h).
#include "distributed/ddp.h"

#include <algorithm>
#include <optional>
#include <thread>

#include "distributed/coalesce.h"
#include "distributed/launcher.h"
#include "distributed/reduce_kernels.h"
#include "distributed/rendezvous.h"
#include "nn/lazy.h"
#include "tensor/autograd.h"
#include "tensor/enum_check.h"
#include "tensor/error.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace weft::distributed {
namespace {

// One all-reduce of gradients: a bucket's (AsReady) or every bucket of one dtype at once (AtEnd).
// With a compressing comm hook the values travel in `wire`, cast and divided before they leave.
struct Transfer {
  Tensor buffer;
  Tensor wire;  // the buffer as a compressing comm hook sends it (undefined without one)
  std::shared_ptr<Work> work;

  void start(ProcessGroup& pg) {
    if (!wire.defined()) {
      work = pg.all_reduce(buffer, ReduceOp::Avg);
      return;
    }
    detail::cast_and_divide(buffer.dtype(), buffer.data_ptr(), wire.dtype(), wire.data_ptr(),
                            static_cast<size_t>(buffer.numel()), static_cast<double>(pg.size()));
    work = pg.all_reduce(wire, ReduceOp::Sum);
  }
  void complete() {
    if (!work) return;
    work->wait();
    work.reset();
    if (wire.defined()) buffer.copy_(wire);
  }
};

struct Bucket {
  std::vector<size_t> params;  // indices into Reducer::params, in their order in its buffer
  DType dtype = kFloat32;
  int64_t numel = 0;
  size_t pending = 0;  // parameters not ready yet in this backward
  Transfer transfer;   // views of its place in the flat buffer of its dtype
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

// The CPUs of this machine one rank can count on: its affinity mask, or its share of the machine
// when the ranks on this host share it.
int cpus_per_rank(int local_ranks) {
  const int machine = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int allowed = static_cast<int>(allowed_cpus().size());
  return std::max(1, std::min(allowed, machine / std::max(1, local_ranks)));
}

}  // namespace

// Note [When buckets travel]: PyTorch's DDP starts a bucket's all-reduce as soon as its
// gradients are in, so that sending overlaps the rest of backward. That hides the time a network
// takes, and costs nothing where a spare core (or a GPU's copy engines) moves the bytes. A Gloo
// group whose ranks share one host has neither: every byte is copied through the kernel's sockets
// by this machine's CPUs, and when the ranks' compute threads already fill them, an early
// all-reduce only takes CPU time from backward, preempts it at each wake-up of the communication
// threads and adds a collective. Measured on a 2-core Xeon, the example MLP on 2 ranks (2.68 MB of
// gradients, PyTorch's bucket sizes: a 1 MB bucket launched early, the rest at the end): 5.5–6.5 ms
// per step; the same two buckets both sent at the end, one after the other, 5.9–7.1 ms; one
// all-reduce of all of them at the end, 4.8–5.4 ms. So Auto sends everything in one all-reduce per
// dtype after backward where the group is on the CPU, on one host, and the ranks have no CPU beyond
// their compute threads; anywhere else it launches as PyTorch does. Both modes average the same
// values: two ranks get the same bits either way (each adds own + peer's), while Gloo's ring over
// three or more sums an element in an order set by its place in the buffer, so a last bit may
// differ between them.
DDPBucketLaunch resolve_bucket_launch(DDPBucketLaunch requested, bool cpu_group, bool one_host, int cpus_per_rank,
                                      int compute_threads) {
  if (requested != DDPBucketLaunch::Auto) return requested;
  return cpu_group && one_host && cpus_per_rank <= compute_threads ? DDPBucketLaunch::AtEnd : DDPBucketLaunch::AsReady;
}

std::string bucket_launch_name(DDPBucketLaunch launch) {
  switch (launch) {
    case DDPBucketLaunch::Auto: return "auto";
    case DDPBucketLaunch::AsReady: return "as_ready";
    case DDPBucketLaunch::AtEnd: return "at_end";
  }
  return "?";
}

// Every rank must issue the same collectives, so the ranks settle the mode together: what each was
// asked for must match (else every rank fails naming one that differs, where mismatched
// collectives would hang), and under Auto one rank with no CPU to spare makes them all send at
// the end — the others wait for the slowest rank anyway.
DDPBucketLaunch agree_on_bucket_launch(ProcessGroup& pg, DDPBucketLaunch requested, DDPBucketLaunch chosen) {
  const int n = pg.size();
  if (n == 1) return chosen;
  const Tensor mine = from_vector<int64_t>({static_cast<int64_t>(requested), static_cast<int64_t>(chosen)}, {2});
  Tensor all = zeros({2 * n}, kInt64);
  pg.all_gather(all, mine)->wait();
  const std::vector<int64_t> v = all.to_vector<int64_t>();
  bool any_at_end = false;
  for (int r = 0; r < n; ++r) {
    const auto asked = static_cast<DDPBucketLaunch>(v[static_cast<size_t>(2 * r)]);
    WEFT_CHECK(asked == requested, "[DistributedDataParallel] rank ", r, " asked for bucket_launch ",
               bucket_launch_name(asked), " and rank ", pg.rank(), " for ", bucket_launch_name(requested),
               "; every rank must ask for the same");
    any_at_end |= static_cast<DDPBucketLaunch>(v[static_cast<size_t>(2 * r + 1)]) == DDPBucketLaunch::AtEnd;
  }
  return any_at_end ? DDPBucketLaunch::AtEnd : DDPBucketLaunch::AsReady;
}

// Note [DDP reducer state]: `armed` is set by a forward that synchronises and cleared by finish();
// hooks of a backward that was not armed (no_sync) do nothing. finish() runs once per armed
// backward, queued by the first hook that fires in it.
struct DistributedDataParallelImpl::Reducer {
  ProcessGroup* pg = nullptr;
  std::vector<Tensor> params;
  std::vector<Tensor> slots;  // each parameter's place in its bucket, shaped as the parameter
  bool grads_are_slots = false;
  DDPBucketLaunch launch = DDPBucketLaunch::AsReady;  // AsReady or AtEnd, as the ranks agreed
  std::vector<size_t> bucket_of;
  std::vector<bool> ready;
  std::vector<Bucket> buckets;
  std::vector<Transfer> flats;  // per dtype, in order of first appearance: its buckets back to back
  size_t next_to_launch = 0;
  bool armed = false;
  bool finish_queued = false;

  void reset() {
    std::fill(ready.begin(), ready.end(), false);
    for (auto& b : buckets) {
      b.pending = b.params.size();
      b.transfer.work.reset();
    }
    for (auto& f : flats) f.work.reset();
    next_to_launch = 0;
    finish_queued = false;
  }

  // Waits for every transfer in flight (a backward that threw before its end leaves some).
  void settle() {
    for (auto& b : buckets) b.transfer.complete();
    for (auto& f : flats) f.complete();
    reset();
  }

  bool grad_is_slot(size_t i) const {
    const Tensor& g = params[i].grad();
    return g.defined() && g.data_ptr() == slots[i].data_ptr();
  }

  void gather(const Bucket& b) {
    NoGradGuard no_grad;
    for (const size_t i : b.params)
      if (!grad_is_slot(i)) slots[i].copy_(params[i].grad());
  }

  // Launches full buckets in index order, so every rank issues the same sequence.
  void launch_ready() {
    while (next_to_launch < buckets.size() && buckets[next_to_launch].pending == 0) {
      Bucket& b = buckets[next_to_launch++];
      gather(b);
      b.transfer.start(*pg);
    }
  }

  void on_grad_ready(size_t i) {
    if (!armed || ready[i]) return;
    if (!finish_queued) {
      finish_queued = true;
      autograd::queue_callback([this] { finish(); });
    }
    ready[i] = true;
    --buckets[bucket_of[i]].pending;
    if (launch == DDPBucketLaunch::AsReady) launch_ready();
  }

  // End of backward: parameters without a gradient count as zeros; send what has not left yet,
  // wait for every transfer and copy the averages back (or point the gradients at them).
  void finish() {
    armed = false;
    for (size_t i = 0; i < params.size(); ++i) {
      if (ready[i]) continue;
      Tensor p = params[i];
      if (!p.grad().defined()) p.set_grad(zeros_like(p));
      ready[i] = true;
      --buckets[bucket_of[i]].pending;
    }
    NoGradGuard no_grad;
    if (launch == DDPBucketLaunch::AtEnd) {
      for (const auto& b : buckets) gather(b);
      for (auto& f : flats) f.start(*pg);
      for (auto& f : flats) f.complete();
    } else {
      launch_ready();
      for (auto& b : buckets) b.transfer.complete();
    }
    for (const auto& b : buckets)
      for (const size_t i : b.params) {
        if (grad_is_slot(i)) continue;
        if (grads_are_slots) params[i].set_grad(slots[i]);
        else params[i].grad().copy_(slots[i]);
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
  weft::detail::check_enum(options.comm_hook, 3, "DistributedDataParallel", "DDPCommHook");  // 3 in ddp.h
  weft::detail::check_enum(options.bucket_launch, 3, "DistributedDataParallel", "DDPBucketLaunch");  // 3 in ddp.h
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
  // One flat buffer per dtype holds its buckets back to back, so that AtEnd sends it whole.
  r.slots.resize(r.params.size());
  const std::optional<DType> wire = wire_dtype(options.comm_hook);
  std::vector<DType> dtypes;  // in order of first appearance
  for (const auto& b : r.buckets)
    if (std::find(dtypes.begin(), dtypes.end(), b.dtype) == dtypes.end()) dtypes.push_back(b.dtype);
  for (const DType dtype : dtypes) {
    int64_t numel = 0;
    for (const auto& b : r.buckets)
      if (b.dtype == dtype) numel += b.numel;
    Transfer& f = r.flats.emplace_back();
    f.buffer = zeros({numel}, TensorOptions(dtype));
    if (wire) f.wire = empty({numel}, TensorOptions(*wire));
    int64_t bucket_offset = 0;
    for (auto& b : r.buckets) {
      if (b.dtype != dtype) continue;
      b.transfer.buffer = f.buffer.narrow(0, bucket_offset, b.numel);
      if (wire) b.transfer.wire = f.wire.narrow(0, bucket_offset, b.numel);
      bucket_offset += b.numel;
      int64_t offset = 0;
      for (const size_t i : b.params) {
        r.slots[i] = b.transfer.buffer.narrow(0, offset, r.params[i].numel()).view(r.params[i].shape());
        offset += r.params[i].numel();
      }
    }
  }
  // The ranks on this host, as the launcher tells them; a group made without one runs here.
  int local_ranks = pg_->size();
  bool one_host = true;
  if (launched_by_launcher()) {
    const DistEnv env = read_dist_env(false);
    local_ranks = env.local_world_size;
    one_host = env.local_world_size == env.world_size;
  }
  const DDPBucketLaunch alone = resolve_bucket_launch(options.bucket_launch, pg_->device().is_cpu(), one_host,
                                                      cpus_per_rank(local_ranks), num_threads());
  r.launch = agree_on_bucket_launch(*pg_, options.bucket_launch, alone);
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
  if (reducer_->finish_queued) reducer_->settle();  // the last backward threw before its end
  reducer_->armed = autograd::grad_mode_enabled() && sync_enabled_;
  return module_->call(input);
}

std::vector<std::vector<size_t>> DistributedDataParallelImpl::bucket_layout() const {
  std::vector<std::vector<size_t>> layout;
  for (const auto& b : reducer_->buckets) layout.push_back(b.params);
  return layout;
}

DDPBucketLaunch DistributedDataParallelImpl::bucket_launch() const { return reducer_->launch; }

}  // namespace weft::distributed
