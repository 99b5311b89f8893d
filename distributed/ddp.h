// DistributedDataParallel: data parallelism by gradient averaging, as PyTorch's DDP.
//
//   auto pg = distributed::init_process_group();
//   distributed::DistributedDataParallel ddp(model, pg);   // broadcasts rank 0's parameters
//   optim::AdamW opt(ddp->parameters(), {.lr = 1e-3});
//   Tensor loss = cross_entropy(ddp(x_local), y_local);    // this rank's share of the batch
//   loss.backward();                                        // gradients averaged across ranks
//   opt.step();                                             // identical on every rank
//
// Every rank holds the whole model. Construction checks that every rank built the same model,
// then copies rank 0's parameters and buffers to all. Gradients are reduced in buckets (about
// bucket_cap_mb each, the first one smaller so communication starts early), filled in reverse
// registration order, roughly the order backward produces them: a post-accumulate hook on each
// parameter marks it ready, and a full bucket's average all-reduce starts at once on the
// communication thread while backward goes on (buckets are launched in index order, so every rank
// issues the same collectives in the same order). At the end of the backward pass (an autograd
// callback) the last buckets are launched, every reduction is waited for, and the averages are
// copied back into .grad. A parameter that got no gradient on this rank counts as a zero
// gradient (and gets one), so all ranks stay in step.
//
// With gradient_as_bucket_view (PyTorch's option of that name) each .grad becomes a view of its
// place in a bucket when the averages are in: nothing is copied back, a backward that accumulates
// into those views (zero_grad(false)) copies nothing in either, and the gradients need no memory
// of their own. A gradient that is not such a view (after zero_grad(), or one set by hand) is
// copied into its bucket and replaced by the view, as before.
//
// comm_hook chooses how a bucket travels, as PyTorch's built-in communication hooks do:
// AllReduce averages it as it is; Fp16Compress and Bf16Compress cast it to 16 bits, divide by the
// world size (before summing, so float16 does not overflow where the average would not), sum it
// across ranks in that dtype and cast the result back into the bucket. Half the bytes cross the
// network, and every averaged gradient carries the 16-bit roundings (a float16 gradient below
// 2^-25 · world size becomes zero, so Bf16Compress is the safer choice without loss scaling).
//
// When the buckets travel (bucket_launch): AsReady starts each bucket's all-reduce as soon as its
// gradients are in, overlapping backward, as PyTorch's DDP does. AtEnd waits for the end of
// backward and sends every bucket of a dtype in one all-reduce. Auto, the default, picks AtEnd
// for CPU process groups whose ranks all share this host when a rank has no CPU beyond its
// compute threads, and AsReady otherwise (Note [When buckets travel] in ddp.cpp says why). The
// ranks settle it together at construction, so all of them send alike (and all fail, naming a
// rank, if they were asked for different modes); bucket_launch() tells which one a DDP uses.
//
// Gradient accumulation: forward passes run under no_sync() leave their backward passes local;
// the first forward after it synchronises the accumulated sums.
//
// Lazy modules must be materialised first (nn::materialize with an example input): the shapes
// decide the buckets, so uninitialised parameters are refused with PyTorch's message.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "nn/module.h"
#include "nn/module_holder.h"

namespace weft::distributed {

// PyTorch's allreduce_hook, fp16_compress_hook and bf16_compress_hook.
enum class DDPCommHook { AllReduce, Fp16Compress, Bf16Compress };

enum class DDPBucketLaunch { Auto, AsReady, AtEnd };

struct DDPOptions {
  double bucket_cap_mb = 25.0;
  double first_bucket_cap_mb = 1.0;
  bool broadcast_buffers = true;  // rank 0's buffers at every forward (parameters only at construction)
  bool gradient_as_bucket_view = false;
  DDPCommHook comm_hook = DDPCommHook::AllReduce;
  DDPBucketLaunch bucket_launch = DDPBucketLaunch::Auto;
};

// Auto's rule on one rank, from the facts the constructor reads (cpu_group: the process group
// reduces in CPU memory; one_host: every rank runs on this machine; cpus_per_rank: this machine's
// CPUs a rank can count on; compute_threads: num_threads()). Returns AsReady or AtEnd; a requested
// mode other than Auto is returned as it is.
DDPBucketLaunch resolve_bucket_launch(DDPBucketLaunch requested, bool cpu_group, bool one_host, int cpus_per_rank,
                                      int compute_threads);
// The ranks settle the mode together (every rank calls it, with what it was asked for and what
// resolve_bucket_launch chose there): the requests must match, else every rank fails naming one
// that differs; the result is AtEnd if any rank chose it, else AsReady.
DDPBucketLaunch agree_on_bucket_launch(ProcessGroup& pg, DDPBucketLaunch requested, DDPBucketLaunch chosen);
std::string bucket_launch_name(DDPBucketLaunch launch);

class DistributedDataParallelImpl : public nn::Module {
 public:
  DistributedDataParallelImpl(std::shared_ptr<nn::Module> module, std::shared_ptr<ProcessGroup> pg,
                              DDPOptions options = {});
  template <class Impl>
  DistributedDataParallelImpl(const nn::ModuleHolder<Impl>& module, std::shared_ptr<ProcessGroup> pg,
                              DDPOptions options = {})
      : DistributedDataParallelImpl(std::static_pointer_cast<nn::Module>(module.ptr()), std::move(pg), options) {}
  ~DistributedDataParallelImpl() override;

  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "DistributedDataParallel"; }

  const std::shared_ptr<nn::Module>& module() const { return module_; }
  ProcessGroup& process_group() const { return *pg_; }

  // While the guard lives, forward passes skip gradient synchronisation in their backward.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallelImpl& ddp) : ddp_(ddp), previous_(ddp.sync_enabled_) {
      ddp.sync_enabled_ = false;
    }
    ~NoSyncGuard() { ddp_.sync_enabled_ = previous_; }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallelImpl& ddp_;
    bool previous_;
  };
  NoSyncGuard no_sync() { return NoSyncGuard(*this); }
  void set_requires_gradient_sync(bool sync) { sync_enabled_ = sync; }

  // How the gradients are bucketed: per bucket, indices into the parameters that require grad
  // (in parameters() order).
  std::vector<std::vector<size_t>> bucket_layout() const;
  // AsReady or AtEnd: what the options' bucket_launch came to on this rank.
  DDPBucketLaunch bucket_launch() const;

 private:
  struct Reducer;
  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<ProcessGroup> pg_;
  DDPOptions options_;
  bool sync_enabled_ = true;
  std::shared_ptr<Reducer> reducer_;
};

// The holder: `DistributedDataParallel ddp(model, pg, {.bucket_cap_mb = 10});`
class DistributedDataParallel : public nn::ModuleHolder<DistributedDataParallelImpl> {
 public:
  DistributedDataParallel(std::nullptr_t) : ModuleHolder(nullptr) {}  // NOLINT
  DistributedDataParallel(std::shared_ptr<DistributedDataParallelImpl> impl) : ModuleHolder(std::move(impl)) {}  // NOLINT
  template <class Model>
  DistributedDataParallel(const Model& module, std::shared_ptr<ProcessGroup> pg, DDPOptions options = {})
      : ModuleHolder(std::make_shared<DistributedDataParallelImpl>(module, std::move(pg), options)) {}
};

}  // namespace weft::distributed
