// bench_distributed: data-parallel training figures, one rank per process (run under weft-run;
// bench/compare_distributed.sh runs it beside PyTorch in the same run).
//
//   weft-run -n 2 bench_distributed step   --strategy ddp|fsdp   the example MLP (784-512-512-10),
//        global batch 128, one thread per rank: step time (median and p90 of 20 steps after 3 warm-up
//        steps, or --steps) and bytes sent per step per rank, counted by the process group and measured as the
//        bytes the process wrote to sockets and files (/proc/self/io wchar, which is what Gloo's
//        writev calls count in; PyTorch's peer reads the same counter); `--bucket-view on` gives DDP
//        gradient_as_bucket_view, `--comm-hook fp16|bf16` its 16-bit compressing comm hook,
//        `--bucket-launch auto|as_ready|at_end` when its buckets travel (the JSON's bucket_launch
//        says what auto chose)
//   weft-run -n N bench_distributed memory --strategy ddp|fsdp|zero2   an MLP of `--layers` square
//        layers of `--width` (Ψ parameters), bf16-mixed parameters under AdamW: the model-state
//        bytes each rank keeps between steps (parameters + gradients + optimizer state, summed over
//        the tensors that hold them) against the ZeRO formula for its stage (anchors.md C.5, K = 12:
//        fp32 master + momentum + variance), and the allocator's high-water mark during a step
//        (the unsharded working set and activations come on top of the formula). The sharded
//        stages keep bf16 gradient shards (keep_low_precision_grads), the formula's 2-byte
//        gradient partitions, unless `--grads fp32` (PyTorch FSDP's default); the JSON's
//        grad_dtype says which dtype the gradients had
//
// Rank 0 prints a table line and one JSON line.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "weft.h"

using namespace weft;

namespace {

struct Args {
  std::string mode = "step";
  std::string strategy = "ddp";
  int64_t layers = 16;
  int64_t width = 256;
  int steps = 20;
  int warmup = 3;
  bool low_precision_grads = true;  // memory: the sharded stages' keep_low_precision_grads
  bool bucket_view = false;         // step, ddp: gradient_as_bucket_view
  std::string comm_hook = "none";   // step, ddp: none, fp16 or bf16 (DDPCommHook)
  std::string bucket_launch = "auto";  // step, ddp: auto, as_ready or at_end (DDPBucketLaunch)
};

Args parse(int argc, char** argv) {
  Args a;
  if (argc > 1) a.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--strategy") a.strategy = value;
    else if (flag == "--layers") a.layers = std::stoll(value);
    else if (flag == "--width") a.width = std::stoll(value);
    else if (flag == "--steps") a.steps = std::stoi(value);
    else if (flag == "--bucket-view") {
      WEFT_CHECK(value == "on" || value == "off", "[bench_distributed] expected --bucket-view on or off, got ", value);
      a.bucket_view = value == "on";
    }
    else if (flag == "--comm-hook") {
      WEFT_CHECK(value == "none" || value == "fp16" || value == "bf16",
                 "[bench_distributed] expected --comm-hook none, fp16 or bf16, got ", value);
      a.comm_hook = value;
    }
    else if (flag == "--bucket-launch") {
      WEFT_CHECK(value == "auto" || value == "as_ready" || value == "at_end",
                 "[bench_distributed] expected --bucket-launch auto, as_ready or at_end, got ", value);
      a.bucket_launch = value;
    }
    else if (flag == "--grads") {
      WEFT_CHECK(value == "bf16" || value == "fp32", "[bench_distributed] expected --grads bf16 or fp32, got ", value);
      a.low_precision_grads = value == "bf16";
    }
    else throw Error("[bench_distributed] unknown option " + flag);
  }
  WEFT_CHECK(a.mode == "step" || a.mode == "memory", "[bench_distributed] expected mode step or memory, got ", a.mode);
  WEFT_CHECK((!a.bucket_view && a.comm_hook == "none" && a.bucket_launch == "auto") ||
                 (a.mode == "step" && a.strategy == "ddp"),
             "[bench_distributed] --bucket-view, --comm-hook and --bucket-launch are DDP options of step mode, got mode ", a.mode,
             " with strategy ", a.strategy);
  return a;
}

int64_t bytes_written() {
  std::ifstream io("/proc/self/io");
  std::string key;
  int64_t value = 0;
  while (io >> key >> value)
    if (key == "wchar:") return value;
  return 0;
}

// Counts live and peak bytes of every CPU allocation weft makes.
class CountingAllocator final : public Allocator {
 public:
  explicit CountingAllocator(Allocator& inner) : inner_(inner) {}
  void* allocate(size_t n) override {
    const int64_t now = live_ += static_cast<int64_t>(n);
    int64_t seen = peak_.load();
    while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
    }
    return inner_.allocate(n);
  }
  void deallocate(void* p, size_t n) override {
    live_ -= static_cast<int64_t>(n);
    inner_.deallocate(p, n);
  }
  int64_t peak() const { return peak_; }
  void reset_peak() { peak_ = live_.load(); }

 private:
  Allocator& inner_;
  std::atomic<int64_t> live_{0};
  std::atomic<int64_t> peak_{0};
};

std::shared_ptr<nn::Module> wrap(const std::string& strategy, const nn::Sequential& model,
                                 const std::shared_ptr<distributed::ProcessGroup>& pg,
                                 std::optional<precision::FSDPMixedPrecision> mixed,
                                 const distributed::DDPOptions& ddp = {}) {
  if (strategy == "ddp") return distributed::DistributedDataParallel(model, pg, ddp).ptr();
  distributed::FSDPOptions o;
  o.sharding_strategy = strategy == "zero2" ? distributed::ShardingStrategy::ShardGradOp
                                            : distributed::ShardingStrategy::FullShard;
  o.auto_wrap_policy = distributed::module_type_auto_wrap_policy({"Linear"});
  o.mixed_precision = mixed;
  return distributed::FullyShardedDataParallel(model, pg, o).ptr();
}

distributed::DDPOptions ddp_options(const Args& a) {
  const auto hook = a.comm_hook == "fp16"   ? distributed::DDPCommHook::Fp16Compress
                    : a.comm_hook == "bf16" ? distributed::DDPCommHook::Bf16Compress
                                            : distributed::DDPCommHook::AllReduce;
  const auto launch = a.bucket_launch == "as_ready" ? distributed::DDPBucketLaunch::AsReady
                      : a.bucket_launch == "at_end" ? distributed::DDPBucketLaunch::AtEnd
                                                    : distributed::DDPBucketLaunch::Auto;
  return {.gradient_as_bucket_view = a.bucket_view, .comm_hook = hook, .bucket_launch = launch};
}

void step_mode(const Args& a) {
  set_num_threads(1);
  auto pg = distributed::init_process_group();
  const int world = pg->size();
  manual_seed(0);
  nn::Sequential model(nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 512), nn::ReLU(), nn::Linear(512, 10));
  auto wrapped = wrap(a.strategy, model, pg, std::nullopt, ddp_options(a));
  optim::AdamW opt(wrapped->parameters(), {.lr = 1e-3});
  Generator g(1 + static_cast<uint64_t>(pg->rank()));
  const Tensor x = rand({128 / world, 784}, kFloat32, &g);
  const Tensor y = randint(0, 10, {128 / world}, {}, &g);
  std::vector<double> ms;
  int64_t sent = 0, written = 0;
  for (int step = 0; step < a.warmup + a.steps; ++step) {
    if (step == a.warmup) {
      pg->reset_stats();
      written = bytes_written();
    }
    const auto start = std::chrono::steady_clock::now();
    opt.zero_grad();
    cross_entropy(wrapped->call(x), y).backward();
    opt.step();
    if (step >= a.warmup) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  sent = pg->stats().bytes_sent / a.steps;
  written = (bytes_written() - written) / a.steps;
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2], p90 = ms[ms.size() * 9 / 10];
  const auto* ddp = dynamic_cast<const distributed::DistributedDataParallelImpl*>(wrapped.get());
  const std::string launch = ddp ? distributed::bucket_launch_name(ddp->bucket_launch()) : "none";
  if (pg->rank() == 0) {
    std::printf("weft %-5s %d ranks: %.2f ms/step (p90 %.2f), %lld bytes sent per step (counted), %lld written\n",
                a.strategy.c_str(), world, median, p90, static_cast<long long>(sent), static_cast<long long>(written));
    std::printf("{\"program\": \"weft bench_distributed\", \"mode\": \"step\", \"strategy\": \"%s\", \"ranks\": %d, "
                "\"cpus_per_rank\": %zu, \"bucket_view\": %s, \"comm_hook\": \"%s\", \"bucket_launch\": \"%s\", "
                "\"median_ms\": %.3f, "
                "\"p90_ms\": %.3f, \"bytes_sent_per_step\": %lld, \"bytes_written_per_step\": %lld}\n",
                a.strategy.c_str(), world, distributed::allowed_cpus().size(), a.bucket_view ? "true" : "false",
                a.comm_hook.c_str(), launch.c_str(), median, p90, static_cast<long long>(sent), static_cast<long long>(written));
  }
}

void memory_mode(const Args& a) {
  CountingAllocator counting(allocator_for(kCPU));
  set_allocator(kCPU, &counting);
  auto pg = distributed::init_process_group();
  const int world = pg->size();
  manual_seed(0);
  nn::Sequential model;
  for (int64_t l = 0; l < a.layers; ++l) model->push_back(nn::Linear(a.width, a.width));
  int64_t psi = 0;
  for (const auto& p : model->parameters()) psi += p.numel();
  // DDP keeps fp32 parameters and gradients (the formula's 2 + 2 bytes are bf16 there: its 16Ψ
  // total is the same); the sharded stages compute in bf16 from fp32 master shards.
  auto mixed = a.strategy == "ddp" ? std::nullopt
                                   : std::optional(precision::FSDPPrecision("bf16-mixed").mixed_precision_config());
  if (mixed) mixed->keep_low_precision_grads = a.low_precision_grads;
  auto wrapped = wrap(a.strategy, model, pg, mixed);
  optim::AdamW opt(wrapped->parameters(), {.lr = 1e-3});
  const Tensor x = rand({2, a.width});
  const auto fsdp = std::dynamic_pointer_cast<distributed::FullyShardedDataParallelImpl>(wrapped);
  int64_t unsharded_after_forward = 0;  // parameters gathered and kept for backward (ZeRO-2)
  counting.reset_peak();
  for (int step = 0; step < 2; ++step) {
    opt.zero_grad(false);
    Tensor out;
    {
      precision::AutocastGuard autocast(DeviceType::CPU, kBFloat16, fsdp != nullptr);
      out = wrapped->call(x);
    }
    unsharded_after_forward = 0;
    if (fsdp)
      for (const auto& u : fsdp->units())
        if (u.unsharded) unsharded_after_forward += u.padded_numel * static_cast<int64_t>(itemsize(kBFloat16));
    out.to(kFloat32).sum().backward();
    opt.step();
  }
  int64_t states = 0;  // parameters + gradients + optimizer state this rank keeps between steps
  std::string grad_dtype = "none";
  for (const auto& p : wrapped->parameters()) {
    states += static_cast<int64_t>(p.nbytes());
    if (p.grad().defined()) {
      states += static_cast<int64_t>(p.grad().nbytes());
      grad_dtype = dtype_name(p.grad().dtype());
    }
  }
  for (const auto& [name, t] : opt.state_dict().tensors) states += static_cast<int64_t>(t.nbytes());
  const double k = 12;
  const double formula = a.strategy == "ddp"     ? (2 + 2 + k) * static_cast<double>(psi)
                         : a.strategy == "zero2" ? 2.0 * static_cast<double>(psi) + (2 + k) * static_cast<double>(psi) / world
                                                 : (2 + 2 + k) * static_cast<double>(psi) / world;
  // The sharded stages' peak adds the parameters gathered between forward and backward: none left
  // by FULL_SHARD, all of them (bf16) under ZeRO-2.
  const int64_t measured = states + unsharded_after_forward;
  if (pg->rank() == 0) {
    std::printf("weft %-5s %d ranks, psi %lld: model states %.2f MB vs ZeRO formula %.2f MB (%.1f%%), "
                "allocator peak %.2f MB\n",
                a.strategy.c_str(), world, static_cast<long long>(psi), measured / 1e6, formula / 1e6,
                100.0 * (static_cast<double>(measured) / formula - 1), counting.peak() / 1e6);
    std::printf("{\"program\": \"weft bench_distributed\", \"mode\": \"memory\", \"strategy\": \"%s\", \"ranks\": %d, "
                "\"psi\": %lld, \"model_state_bytes\": %lld, \"zero_formula_bytes\": %.0f, \"ratio\": %.4f, "
                "\"allocator_peak_bytes\": %lld, \"grad_dtype\": \"%s\"}\n",
                a.strategy.c_str(), world, static_cast<long long>(psi), static_cast<long long>(measured), formula,
                static_cast<double>(measured) / formula, static_cast<long long>(counting.peak()), grad_dtype.c_str());
  }
  wrapped.reset();
  set_allocator(kCPU, nullptr);
}

}  // namespace

int main(int argc, char** argv) try {
  const Args a = parse(argc, argv);
  if (a.mode == "step") step_mode(a);
  else memory_mode(a);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "bench_distributed: " << e.what() << "\n";
  return 1;
}
