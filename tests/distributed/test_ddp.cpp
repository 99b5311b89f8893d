// DistributedDataParallel: N ∈ {1, 2, 3, 4} ranks on shares of a global batch end where one
// process on the whole batch ends, in every precision the CPU runs, with SGD (momentum) and AdamW;
// gradients are reduced in buckets while backward runs, or (AtEnd) in one all-reduce per dtype after
// it, as Auto decides from the machine; no_sync accumulates locally; gradients
// can live in the buckets (gradient_as_bucket_view); the 16-bit comm hooks average with PyTorch's
// roundings; rank 0's parameters win at construction; lazy and mismatched models are refused.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>

#include "tensor/all.h"
#include "train_helpers.h"

using namespace weft;
using distributed::DDPBucketLaunch;
using distributed::DistributedDataParallel;

namespace {

const std::vector<std::string> kPrecisions = {"32-true", "64-true", "bf16-true", "16-true", "bf16-mixed"};
const std::vector<std::string> kOptimizers = {"sgd", "adamw"};
// Both explicit launch modes, with the prefix their results are saved under.
const std::vector<std::pair<DDPBucketLaunch, std::string>> kLaunches = {{DDPBucketLaunch::AsReady, "ready_"},
                                                                         {DDPBucketLaunch::AtEnd, "end_"}};
constexpr int kSteps = 4;

// One training loop as a precision plugin runs it (what Fabric does for a step).
void train(precision::Precision& plugin, const std::function<Tensor(const Tensor&)>& forward, nn::Module* module,
           optim::Optimizer& opt, int rank, int world, int steps) {
  for (int step = 0; step < steps; ++step) {
    const test::Batch b = test::local_rows(test::global_batch(step), rank, world);
    opt.zero_grad();
    const Tensor x = plugin.convert_input(b.x);
    Tensor out;
    {
      precision::Context ctx = plugin.forward_context();
      out = forward(x);
    }
    const Tensor loss = cross_entropy(plugin.convert_output(out), b.y);
    plugin.backward(loss, module);
    plugin.optimizer_step(opt);
  }
}

}  // namespace

WEFT_RANK_WORKER(ddp_equivalence) {
  auto pg = test::init_group();
  for (const auto& [launch, launch_prefix] : kLaunches)
    for (const auto& p : kPrecisions)
      for (const auto& o : kOptimizers) {
        auto plugin = precision::make_precision(p, "cpu");
        auto model = test::make_mlp(1234 + static_cast<uint64_t>(pg->rank()));  // rank 0's must win
        plugin->convert_module(*model);
        DistributedDataParallel ddp(model, pg,
                                    {.bucket_cap_mb = 0.0003, .first_bucket_cap_mb = 0.0001, .bucket_launch = launch});
        auto opt = test::make_optimizer(o, ddp->parameters());
        train(*plugin, [&](const Tensor& x) { return ddp(x); }, ddp.ptr().get(), *opt, pg->rank(), pg->size(), kSteps);
        test::save_result(pg->rank(), model->state_dict(), launch_prefix + p + "_" + o + "_");
      }
  return 0;
}

TEST_CASE("DDP at 1-4 ranks matches one process on the full batch, in every CPU precision and launch mode") {
  std::map<std::string, nn::TensorDict> reference;
  for (const auto& p : kPrecisions)
    for (const auto& o : kOptimizers) {
      auto plugin = precision::make_precision(p, "cpu");
      auto model = test::make_mlp(1234);
      plugin->convert_module(*model);
      auto opt = test::make_optimizer(o, model->parameters());
      train(*plugin, [&](const Tensor& x) { return model(x); }, model.ptr().get(), *opt, 0, 1, kSteps);
      reference[p + "_" + o + "_"] = model->state_dict();
    }
  for (int n : {1, 2, 3, 4}) {
    CAPTURE(n);
    const auto run = test::run_ranks(n, "ddp_equivalence");
    INFO(run.logs());
    REQUIRE(run.ok());
    for (const auto& launch : kLaunches)
      for (const auto& entry : reference) {
        const auto& name = entry.first;  // named: clang 14 refuses bindings in CAPTURE's lambda
        const auto& ref = entry.second;
        const std::string key = launch.second + name;
        CAPTURE(key);
        const nn::TensorDict r0 = run.result(0, key);
        for (int r = 1; r < n; ++r) CHECK(test::bitwise_equal(run.result(r, key), r0));  // ranks never drift apart
        // Two ranks add own + peer's whatever the buckets, so both modes give the same bits.
        if (n == 2) CHECK(test::bitwise_equal(run.result(0, "end_" + name), run.result(0, "ready_" + name)));
        const std::string precision = name.substr(0, name.find('_'));
        const std::string optimizer = name.substr(name.find('_') + 1, name.rfind('_') - name.find('_') - 1);
        std::string why;
        CHECK_MESSAGE(test::close_enough(r0, ref, precision, optimizer, kSteps, &why), why);
      }
  }
}

WEFT_RANK_WORKER(ddp_buckets_overlap) {
  auto pg = test::init_group();
  auto model = test::make_mlp(7);
  auto first = model->at<nn::LinearImpl>(0);
  // Registered before DDP's own hook, so it runs before the first layer's gradient is counted:
  // the second layer's buckets must already be on their way.
  int64_t issued_when_first_layer_ready = -1;
  first->weight.register_post_accumulate_grad_hook(
      [&](Tensor&) { issued_when_first_layer_ready = pg->stats().collectives; });
  DistributedDataParallel ddp(
      model, pg, {.bucket_cap_mb = 0.00005, .first_bucket_cap_mb = 0.00001, .bucket_launch = DDPBucketLaunch::AsReady});
  const size_t buckets = ddp->bucket_layout().size();
  test::require(buckets >= 3, "expected several buckets, got " + std::to_string(buckets));
  const test::Batch b = test::local_rows(test::global_batch(0), pg->rank(), pg->size());
  pg->reset_stats();
  pg->set_recording(true);
  cross_entropy(ddp(b.x), b.y).backward();
  const auto records = pg->records();
  test::require(records.size() == buckets, "expected one all_reduce per bucket, got " + std::to_string(records.size()));
  for (const auto& r : records)
    test::require(r.kind == distributed::CollectiveKind::AllReduce && r.dtype == kFloat32, "unexpected collective");
  test::require(issued_when_first_layer_ready >= 1 && issued_when_first_layer_ready < static_cast<int64_t>(buckets),
                "reductions did not start during backward: " + std::to_string(issued_when_first_layer_ready) +
                    " issued when the first layer's gradient arrived");
  return 0;
}

TEST_CASE("DDP reduces gradients in buckets, launched while backward still runs") {
  const auto run = test::run_ranks(2, "ddp_buckets_overlap");
  INFO(run.logs());
  CHECK(run.ok());
}

namespace {

// Two layers of different dtypes side by side: DDP keeps one flat buffer per dtype.
struct TwoDtypesImpl : nn::Module {
  nn::Linear narrow{nullptr}, wide{nullptr};
  TwoDtypesImpl() {
    manual_seed(41);
    narrow = register_module("narrow", nn::Linear(test::kIn, test::kOut));
    wide = register_module("wide", nn::Linear(test::kIn, test::kOut));
    wide->to(kFloat64);
  }
  Tensor forward(const Tensor& x) override { return narrow(x) + wide(x.to(kFloat64)).to(kFloat32); }
};

}  // namespace

// AtEnd: nothing leaves while backward runs; then one all-reduce per dtype carries every bucket,
// the dtype whose bucket comes first (reverse registration order) first.
WEFT_RANK_WORKER(ddp_buckets_at_end) {
  auto pg = test::init_group();
  const test::Batch b = test::local_rows(test::global_batch(0), pg->rank(), pg->size());
  for (const auto& [launch, prefix] : kLaunches) {
    auto model = test::make_mlp(7);
    int64_t issued_when_first_layer_ready = -1;
    model->at<nn::LinearImpl>(0)->weight.register_post_accumulate_grad_hook(
        [&](Tensor&) { issued_when_first_layer_ready = pg->stats().collectives; });
    DistributedDataParallel ddp(model, pg,
                                {.bucket_cap_mb = 0.00005, .first_bucket_cap_mb = 0.00001, .bucket_launch = launch});
    test::require(ddp->bucket_launch() == launch, "bucket_launch() is not the mode asked for");
    test::require(ddp->bucket_layout().size() >= 3, "expected several buckets");
    auto mixed = std::make_shared<TwoDtypesImpl>();
    DistributedDataParallel two(std::static_pointer_cast<nn::Module>(mixed), pg,
                                {.bucket_cap_mb = 0.00005, .first_bucket_cap_mb = 0.00001, .bucket_launch = launch});
    pg->reset_stats();
    pg->set_recording(true);
    cross_entropy(ddp(b.x), b.y).backward();
    const auto mlp_records = pg->records();
    pg->set_recording(true);  // starts a fresh record
    cross_entropy(two(b.x), b.y).backward();
    const auto two_records = pg->records();
    pg->set_recording(false);
    test::save_result(pg->rank(), test::gradients_of(*model), prefix + "mlp_");
    test::save_result(pg->rank(), test::gradients_of(*mixed), prefix + "two_");
    if (launch != DDPBucketLaunch::AtEnd) continue;
    test::require(issued_when_first_layer_ready == 0,
                  std::to_string(issued_when_first_layer_ready) + " collectives left during backward");
    int64_t mlp_numel = 0;
    for (const auto& p : model->parameters()) mlp_numel += p.numel();
    test::require(mlp_records.size() == 1 && mlp_records[0].kind == distributed::CollectiveKind::AllReduce &&
                      mlp_records[0].dtype == kFloat32 && mlp_records[0].numel == mlp_numel,
                  "expected one float32 all_reduce of " + std::to_string(mlp_numel) + " elements, got " +
                      std::to_string(mlp_records.size()) + " collectives");
    const int64_t layer_numel = (test::kIn + 1) * test::kOut;
    test::require(two_records.size() == 2 && two_records[0].dtype == kFloat64 && two_records[0].numel == layer_numel &&
                      two_records[1].dtype == kFloat32 && two_records[1].numel == layer_numel,
                  "expected a float64 then a float32 all_reduce of " + std::to_string(layer_numel) + " elements each");
  }
  return 0;
}

TEST_CASE("DDP AtEnd sends every bucket after backward, one all-reduce per dtype, averaging as AsReady does") {
  for (int n : {2, 3}) {
    CAPTURE(n);
    const auto run = test::run_ranks(n, "ddp_buckets_at_end");
    INFO(run.logs());
    REQUIRE(run.ok());
    for (const std::string model : {"mlp_", "two_"}) {
      CAPTURE(model);
      // Two ranks add own + peer's whatever the buffer; a ring of three sums each element in an
      // order set by its place in the buffer, so the modes may round apart.
      if (n == 2) CHECK(test::bitwise_equal(run.result(0, "end_" + model), run.result(0, "ready_" + model)));
      else CHECK(test::max_relative_difference(run.result(0, "end_" + model), run.result(0, "ready_" + model)) <= 1e-5);
    }
  }
}

// Auto, under the launcher on one host: AtEnd while the compute threads take every CPU this rank
// can count on (its affinity, or its share of the machine), AsReady with a CPU to spare; the ranks
// agree on one mode, and refuse to differ in the one they ask for.
WEFT_RANK_WORKER(ddp_auto_launch) {
  auto pg = test::init_group();
  const int machine = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));  // the CPUs online
  const int share = std::max(1, std::min(static_cast<int>(distributed::allowed_cpus().size()), machine / pg->size()));
  auto model = test::make_mlp(3);
  set_num_threads(share);
  test::require(DistributedDataParallel(model, pg)->bucket_launch() == DDPBucketLaunch::AtEnd,
                "Auto did not choose AtEnd with " + std::to_string(share) + " compute threads on as many CPUs");
  if (share > 1) {
    set_num_threads(share - 1);
    test::require(DistributedDataParallel(model, pg)->bucket_launch() == DDPBucketLaunch::AsReady,
                  "Auto did not choose AsReady with a CPU to spare");
  }
  // Ranks that chose differently on their own agree: one that chose AtEnd makes all of them send
  // at the end; all AsReady stays AsReady.
  using distributed::agree_on_bucket_launch;
  const DDPBucketLaunch alone = pg->rank() == 0 ? DDPBucketLaunch::AtEnd : DDPBucketLaunch::AsReady;
  test::require(agree_on_bucket_launch(*pg, DDPBucketLaunch::Auto, alone) == DDPBucketLaunch::AtEnd,
                "the ranks did not all send at the end when rank 0 chose to");
  test::require(agree_on_bucket_launch(*pg, DDPBucketLaunch::Auto, DDPBucketLaunch::AsReady) == DDPBucketLaunch::AsReady,
                "the ranks did not stay AsReady when all chose it");
  // Ranks asked for different modes all fail, naming one, instead of mismatching collectives.
  const DDPBucketLaunch asked = pg->rank() == 0 ? DDPBucketLaunch::AsReady : DDPBucketLaunch::AtEnd;
  std::string refusal = "none: DDP accepted ranks asking for different bucket launches";
  try {
    DistributedDataParallel ddp(model, pg, {.bucket_launch = asked});
  } catch (const Error& e) {
    refusal = e.what();
  }
  test::require(refusal.find("asked for bucket_launch") != std::string::npos, "unexpected refusal: " + refusal);
  return 0;
}

TEST_CASE("DDP's Auto bucket launch: at the end only for CPU groups on one host with no CPU to spare; ranks agree") {
  using L = DDPBucketLaunch;
  using distributed::resolve_bucket_launch;
  // (requested, cpu_group, one_host, cpus_per_rank, compute_threads)
  CHECK(resolve_bucket_launch(L::Auto, true, true, 1, 1) == L::AtEnd);
  CHECK(resolve_bucket_launch(L::Auto, true, true, 4, 4) == L::AtEnd);
  CHECK(resolve_bucket_launch(L::Auto, true, true, 2, 4) == L::AtEnd);
  CHECK(resolve_bucket_launch(L::Auto, true, true, 2, 1) == L::AsReady);   // a CPU to spare
  CHECK(resolve_bucket_launch(L::Auto, true, false, 1, 1) == L::AsReady);  // several hosts: hide the network
  CHECK(resolve_bucket_launch(L::Auto, false, true, 1, 1) == L::AsReady);  // a GPU group: copy engines move the bytes
  CHECK(resolve_bucket_launch(L::AsReady, true, true, 1, 1) == L::AsReady);
  CHECK(resolve_bucket_launch(L::AtEnd, false, false, 8, 1) == L::AtEnd);
  CHECK(distributed::bucket_launch_name(L::AtEnd) == "at_end");
  const auto run = test::run_ranks(2, "ddp_auto_launch");
  INFO(run.logs());
  CHECK(run.ok());
}

WEFT_RANK_WORKER(ddp_no_sync) {
  auto pg = test::init_group();
  const int n = pg->size(), r = pg->rank();
  // Three micro-batches: two under no_sync, the third synchronised.
  auto model = test::make_mlp(11);
  DistributedDataParallel ddp(model, pg);
  pg->reset_stats();
  for (int micro = 0; micro < 3; ++micro) {
    const test::Batch b = test::local_rows(test::global_batch(micro), r, n);
    if (micro < 2) {
      auto guard = ddp->no_sync();
      cross_entropy(ddp(b.x), b.y).backward();
      test::require(pg->stats().collectives == 0, "a collective ran under no_sync");
    } else {
      cross_entropy(ddp(b.x), b.y).backward();
    }
  }
  test::save_result(r, test::gradients_of(*model));
  return 0;
}

TEST_CASE("DDP no_sync accumulates locally, then one synchronised backward averages the sums") {
  // Reference: the sum over micro-batches of the mean loss on the whole global micro-batch.
  auto model = test::make_mlp(11);
  for (int micro = 0; micro < 3; ++micro) {
    const test::Batch b = test::global_batch(micro);
    cross_entropy(model(b.x), b.y).backward();
  }
  nn::TensorDict expected;
  for (const auto& [name, p] : model->named_parameters()) expected.insert(name, p.grad());
  for (int n : {2, 3}) {
    const auto run = test::run_ranks(n, "ddp_no_sync");
    INFO(run.logs());
    REQUIRE(run.ok());
    for (int r = 0; r < n; ++r) CHECK(test::max_relative_difference(run.result(r), expected) <= 1e-5);
  }
}

// Four steps of AdamW, each a no_sync micro-batch then a synchronised one, with and without
// gradient_as_bucket_view, clearing gradients to none or to zeros.
WEFT_RANK_WORKER(ddp_bucket_view) {
  auto pg = test::init_group();
  const int n = pg->size(), r = pg->rank();
  for (const bool view : {false, true})
    for (const bool set_to_none : {true, false}) {
      auto model = test::make_mlp(21);
      DistributedDataParallel ddp(model, pg,
                                  {.bucket_cap_mb = 0.0003, .first_bucket_cap_mb = 0.0001, .gradient_as_bucket_view = view});
      auto opt = test::make_optimizer("adamw", ddp->parameters());
      const std::vector<Tensor> params = ddp->parameters();
      for (int step = 0; step < 4; ++step) {
        opt->zero_grad(set_to_none);
        for (int micro = 0; micro < 2; ++micro) {
          const test::Batch b = test::local_rows(test::global_batch(2 * step + micro), r, n);
          if (micro == 0) {
            auto guard = ddp->no_sync();
            cross_entropy(ddp(b.x), b.y).backward();
          } else {
            cross_entropy(ddp(b.x), b.y).backward();
          }
        }
        if (view)  // each bucket's gradients lie end to end in its memory
          for (const auto& bucket : ddp->bucket_layout())
            for (size_t k = 0; k + 1 < bucket.size(); ++k) {
              const Tensor& g = params[bucket[k]].grad();
              test::require(static_cast<const char*>(g.data_ptr()) + g.nbytes() == params[bucket[k + 1]].grad().data_ptr(),
                            "a gradient is not a view of its bucket after step " + std::to_string(step));
            }
        opt->step();
      }
      test::save_result(r, model->state_dict(), std::string(view ? "view_" : "copy_") + (set_to_none ? "none_" : "zeros_"));
    }
  return 0;
}

TEST_CASE("DDP with gradient_as_bucket_view trains bit for bit as with copies, its gradients views of the buckets") {
  for (int n : {2, 3}) {
    CAPTURE(n);
    const auto run = test::run_ranks(n, "ddp_bucket_view");
    INFO(run.logs());
    REQUIRE(run.ok());
    for (int r = 0; r < n; ++r)
      for (const std::string clear : {"none_", "zeros_"}) {
        CAPTURE(clear);
        CHECK(test::bitwise_equal(run.result(r, "view_" + clear), run.result(r, "copy_" + clear)));
      }
  }
}

// One synchronised backward under each compressing comm hook (and under bf16 with the gradients
// as bucket views): the averaged gradients, after checking that every bucket travelled in 16 bits.
WEFT_RANK_WORKER(ddp_comm_hook) {
  auto pg = test::init_group();
  const int n = pg->size(), r = pg->rank();
  using distributed::DDPCommHook;
  struct Run {
    std::string name;
    DDPCommHook hook;
    bool view;
  };
  for (const auto& [launch, prefix] : kLaunches)
    for (const Run& run : {Run{"fp16_", DDPCommHook::Fp16Compress, false}, Run{"bf16_", DDPCommHook::Bf16Compress, false},
                           Run{"bf16_view_", DDPCommHook::Bf16Compress, true}}) {
      auto model = test::make_mlp(31);
      DistributedDataParallel ddp(model, pg,
                                  {.bucket_cap_mb = 0.0003, .first_bucket_cap_mb = 0.0001, .gradient_as_bucket_view = run.view,
                                   .comm_hook = run.hook, .bucket_launch = launch});
      const test::Batch b = test::local_rows(test::global_batch(0), r, n);
      pg->set_recording(true);
      cross_entropy(ddp(b.x), b.y).backward();
      const auto records = pg->records();
      pg->set_recording(false);
      const size_t expected = launch == DDPBucketLaunch::AtEnd ? 1 : ddp->bucket_layout().size();
      test::require(records.size() == expected, prefix + run.name + ": expected " + std::to_string(expected) +
                                                    " all_reduces, got " + std::to_string(records.size()));
      const DType wire = run.hook == DDPCommHook::Fp16Compress ? kFloat16 : kBFloat16;
      for (const auto& c : records)
        test::require(c.kind == distributed::CollectiveKind::AllReduce && c.dtype == wire,
                      prefix + run.name + ": a bucket did not travel as " + std::string(dtype_name(wire)));
      test::save_result(r, test::gradients_of(*model), prefix + run.name);
    }
  return 0;
}

namespace {

// A float rounded to the 16-bit format (nearest, ties to even), as a float.
float round16(float v, bool bf16) {
  return bf16 ? bfloat16_to_float(float_to_bfloat16(v)) : half_to_float(float_to_half(v));
}

// Each rank's own gradients on its rows of the batch, computed here in one process.
std::vector<nn::TensorDict> local_gradients(int n) {
  std::vector<nn::TensorDict> grads;
  for (int r = 0; r < n; ++r) {
    auto model = test::make_mlp(31);
    const test::Batch b = test::local_rows(test::global_batch(0), r, n);
    cross_entropy(model(b.x), b.y).backward();
    grads.push_back(test::gradients_of(*model));
  }
  return grads;
}

}  // namespace

TEST_CASE("DDP's fp16 and bf16 comm hooks: cast, divide by the world size, sum in 16 bits, cast back") {
  for (int n : {2, 3}) {
    CAPTURE(n);
    const auto run = test::run_ranks(n, "ddp_comm_hook");
    INFO(run.logs());
    REQUIRE(run.ok());
    const std::vector<nn::TensorDict> local = local_gradients(n);
    for (const std::string hook :
         {"ready_fp16_", "ready_bf16_", "ready_bf16_view_", "end_fp16_", "end_bf16_", "end_bf16_view_"}) {
      CAPTURE(hook);
      const bool bf16 = hook.find("fp16") == std::string::npos;
      for (int r = 0; r < n; ++r) CHECK(test::bitwise_equal(run.result(r, hook), run.result(0, hook)));
      size_t differs_from_float32 = 0;
      for (const auto& [name, got_tensor] : run.result(0, hook)) {
        const std::vector<float> got = got_tensor.to_vector<float>();
        std::vector<std::vector<float>> own, sent;  // each rank's gradient g, and round(round(g) / n)
        for (int r = 0; r < n; ++r) {
          own.push_back(local[static_cast<size_t>(r)].at(name).to_vector<float>());
          std::vector<float> c = own.back();
          for (float& v : c) v = round16(round16(v, bf16) / static_cast<float>(n), bf16);
          sent.push_back(c);
        }
        for (size_t i = 0; i < got.size(); ++i) {
          double exact_average = 0, sum = 0, magnitude = 0;
          for (size_t r = 0; r < own.size(); ++r) {
            exact_average += static_cast<double>(own[r][i]) / n;
            sum += sent[r][i];
            magnitude += std::abs(sent[r][i]);
          }
          if (n == 2) {
            // One exchange: both ranks add c0 + c1 in float32 and round it to 16 bits once.
            CHECK(got[i] == round16(sent[0][i] + sent[1][i], bf16));
          } else {
            // A ring: one rounding per hop, in an order the test does not fix.
            const double unit = bf16 ? 0x1p-8 : 0x1p-11;
            CHECK(std::abs(got[i] - sum) <= 2 * unit * magnitude);
          }
          if (static_cast<double>(got[i]) != static_cast<double>(static_cast<float>(exact_average))) ++differs_from_float32;
        }
      }
      CHECK(differs_from_float32 > 0);  // the roundings show: the buckets were compressed
    }
  }
}

// Every rank's weight gradient is 40000 (its input): in float16 the sum of the ranks' gradients
// overflows (65504 is the largest value), the sum of their shares does not.
WEFT_RANK_WORKER(ddp_fp16_hook_range) {
  auto pg = test::init_group();
  manual_seed(0);
  nn::Linear layer(2, 1, /*bias=*/false);
  DistributedDataParallel ddp(layer, pg, {.comm_hook = distributed::DDPCommHook::Fp16Compress});
  ddp(full({1, 2}, 40000.0)).sum().backward();
  test::save_result(pg->rank(), test::gradients_of(*layer));
  return 0;
}

TEST_CASE("DDP's fp16 hook divides before it sums: gradients whose sum overflows float16 average exactly") {
  // 40000 / 2 = 20000 and 40000 / 3 → 13336 (float16's step there is 8) are exact shares or
  // rounded ones whose sums round back to 40000 (the step above 32768 is 32); summing first
  // would give inf.
  for (int n : {2, 3}) {
    CAPTURE(n);
    const auto run = test::run_ranks(n, "ddp_fp16_hook_range");
    INFO(run.logs());
    REQUIRE(run.ok());
    for (int r = 0; r < n; ++r) CHECK(run.result(r).at("weight").to_vector<float>() == std::vector<float>{40000.0f, 40000.0f});
  }
}

WEFT_RANK_WORKER(ddp_mismatch) {
  auto pg = test::init_group();
  manual_seed(0);
  nn::Sequential model(nn::Linear(4, pg->rank() == 1 ? 6 : 5));
  DistributedDataParallel ddp(model, pg);
  return 0;
}

TEST_CASE("DDP refuses ranks whose models differ, naming the rank") {
  const auto run = test::run_ranks(2, "ddp_mismatch");
  CHECK_FALSE(run.ok());
  for (int r = 0; r < 2; ++r)
    CHECK(run.log(r).find("[DistributedDataParallel] rank 1's model differs from rank 0's") != std::string::npos);
}

TEST_CASE("DDP refuses uninitialized lazy parameters; materialised, the model is accepted (T49)") {
  auto pg = test::solo_group();
  nn::Sequential model(nn::LazyLinear(3));
  CHECK_THROWS_WITH_AS(DistributedDataParallel(model, pg),
                       doctest::Contains("Modules with uninitialized parameters can't be used with "
                                         "`DistributedDataParallel`. Run a dummy forward pass"),
                       Error);
  nn::materialize(model, ones({2, 4}));
  DistributedDataParallel ddp(model, pg);
  CHECK(ddp(ones({2, 4})).shape() == Shape{2, 3});
}
