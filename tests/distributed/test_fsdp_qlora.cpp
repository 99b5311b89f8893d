// QLoRA-FSDP: a model whose linears are frozen NF4 layers (Linear4bit) with LoRA adapters, trained
// under FSDP FULL_SHARD at 2 ranks, against one process on the whole batch. The 4-bit base is a
// frozen byte-storage unit per layer (Note [Frozen byte storage] in distributed/flat_param.h):
// each rank holds half its bytes, it gets no gradient and no optimizer state, and after training
// its bytes are exactly those it started with; the adapters train as one process trains them.
//
// Checkpoints, full and sharded, round-trip the 4-bit bytes and load at another world size.
//
// Tolerance: every row goes through the same 4-bit kernel on the same bytes (6 and 12 rows both
// take the fused path for up to 16 rows), so the ranks and the reference differ only in the
// float32 summation order of the batch mean (two halves averaged vs one mean over 12 rows): about
// 1e-7 relative per step, which three AdamW steps keep far below 1e-5.
#include <doctest/doctest.h>

#include "train_helpers.h"

using namespace weft;
using distributed::FullyShardedDataParallel;
using precision::quant::Linear4bitImpl;

namespace {

constexpr int kSteps = 3;
constexpr int64_t kRows = 12, kFeatures = 64, kHidden = 40, kClasses = 16;

// Linear(64, 40) - ReLU - Linear(40, 16) from `seed`, both linears frozen as NF4 (float32 compute;
// double quantization when `nested`), rank-4 adapters on both.
nn::Sequential make_qlora_mlp(uint64_t seed, bool nested) {
  manual_seed(seed);
  const nn::Linear first(kFeatures, kHidden), second(kHidden, kClasses);
  const precision::quant::Linear4bitOptions nf4{.quant_type = precision::quant::QuantKind::NF4,
                                                .compress_statistics = nested, .compute_dtype = kFloat32};
  nn::Sequential net(precision::quant::Linear4bit(Linear4bitImpl::from_linear(*first, nf4)), nn::ReLU(),
                     precision::quant::Linear4bit(Linear4bitImpl::from_linear(*second, nf4)));
  precision::quant::apply_lora(*net, {.rank = 4, .alpha = 8.0});
  return net;
}

// The same batch every step, so the loss must fall as the adapters fit it.
test::Batch batch() {
  Generator g(700);
  return {randn({kRows, kFeatures}, kFloat32, &g), randint(0, kClasses, {kRows}, {}, &g)};
}

std::vector<Tensor> trainable(const std::vector<Tensor>& params) {
  std::vector<Tensor> out;
  for (const Tensor& p : params)
    if (p.requires_grad()) out.push_back(p);
  return out;
}

// The layers' 4-bit tensors (packed codes, statistics) by state-dict name, and their bytes.
nn::TensorDict base_storage(const nn::Module& net, int64_t* bytes) {
  nn::TensorDict out;
  *bytes = 0;
  for (const auto& [name, m] : net.named_modules())
    if (const auto* layer = dynamic_cast<const Linear4bitImpl*>(m.get()))
      for (const auto& [key, t] : layer->sharded_storage()) {
        if (key != "weight.block_absmax") out.insert(name + "." + key, t.clone());
        *bytes += static_cast<int64_t>(t.nbytes());
      }
  return out;
}

// `dict` with `value` under `key`.
nn::TensorDict replaced(const nn::TensorDict& dict, const std::string& key, const Tensor& value) {
  nn::TensorDict out;
  for (const auto& [name, t] : dict) out.insert(name, name == key ? value : t);
  return out;
}

distributed::FSDPOptions qlora_options(const std::string& policy) {
  distributed::FSDPOptions o;
  // "lora": every LoRA layer a unit (its frozen bias, its adapters and its 4-bit bytes are three
  // flat parameters); "none": the root holds them all.
  if (policy == "lora") o.auto_wrap_policy = distributed::module_type_auto_wrap_policy({"LoraLinear"});
  return o;
}

}  // namespace

// args: policy, nested ("0"/"1"). Saves the losses (every rank's own half), the full state dict
// after training, the 4-bit tensors before wrapping, and the byte and optimizer counts.
WEFT_RANK_WORKER(qlora_fsdp) {
  auto pg = test::init_group();
  const int rank = pg->rank(), world = pg->size();
  nn::Sequential net = make_qlora_mlp(42, args.at(1) == "1");
  int64_t base_bytes = 0;
  const nn::TensorDict before = base_storage(*net, &base_bytes);
  FullyShardedDataParallel fsdp(net, pg, qlora_options(args.at(0)));

  int64_t shard_bytes = 0, padded_bytes = 0, storage_units = 0;
  for (size_t u = 0; u < fsdp->units().size(); ++u)
    if (fsdp->units()[u].byte_storage) {
      test::require(fsdp->shard(u).dtype() == kUInt8 && !fsdp->shard(u).requires_grad(),
                    "a byte-storage shard must be frozen uint8");
      shard_bytes += static_cast<int64_t>(fsdp->shard(u).nbytes());
      padded_bytes += fsdp->units()[u].padded_numel;
      ++storage_units;
    }
  // At rest the layers' own tensors are empty: the bytes live in the shards only.
  for (const auto& m : net->modules())
    if (const auto* layer = dynamic_cast<const Linear4bitImpl*>(m.get()))
      for (const auto& [key, t] : layer->sharded_storage())
        test::require(t.numel() == 0, "'" + key + "' is still materialised after wrapping");

  optim::AdamW opt(trainable(fsdp->parameters()), {.lr = 0.01});
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) {
    const test::Batch b = test::local_rows(batch(), rank, world);
    opt.zero_grad();
    const Tensor loss = cross_entropy(fsdp(b.x), b.y);
    loss.backward();
    for (size_t u = 0; u < fsdp->units().size(); ++u)
      test::require(fsdp->shard(u).requires_grad() == fsdp->shard(u).grad().defined(),
                    "only the trainable shards get a gradient");
    opt.step();
    losses.push_back(loss.item<double>());
  }
  int64_t state_values = 0;
  for (const auto& [key, t] : opt.state_dict().tensors) state_values += t.numel();
  int64_t trainable_shard_values = 0;
  for (const Tensor& p : trainable(fsdp->parameters())) trainable_shard_values += p.numel();

  nn::TensorDict out = fsdp->full_state_dict();
  // A sharded checkpoint (the 4-bit tensors cut by bytes) loads into another model at 2 ranks; the
  // test loads it at 1 as well.
  fsdp->save_sharded(test::run_dir() / "sharded", &opt);
  nn::Sequential other = make_qlora_mlp(7, args.at(1) == "1");
  FullyShardedDataParallel fsdp2(other, pg, qlora_options(args.at(0)));
  optim::AdamW opt2(trainable(fsdp2->parameters()), {.lr = 0.01});
  fsdp2->load_sharded(test::run_dir() / "sharded", &opt2);
  for (const auto& [key, t] : fsdp2->full_state_dict())
    test::require(equal(t, out.at(key)), "'" + key + "' differs after a sharded save and load");

  for (const auto& [key, t] : before) out.insert("before." + key, t);
  out.insert("losses", from_vector(losses, {kSteps}, TensorOptions(kFloat64)));
  out.insert("counts", from_vector(std::vector<int64_t>{shard_bytes, padded_bytes, base_bytes, storage_units,
                                                        state_values, trainable_shard_values},
                                   {6}, TensorOptions(kInt64)));
  test::save_result(rank, out);
  return 0;
}

TEST_CASE("QLoRA under FSDP at 2 ranks: the NF4 base sharded as frozen bytes, the adapters trained as one process") {
  for (const std::string nested : {"0", "1"})
    for (const std::string policy : {"lora", "none"}) {
      CAPTURE(nested);
      CAPTURE(policy);
      // The reference: one process, the whole batch.
      nn::Sequential ref = make_qlora_mlp(42, nested == "1");
      optim::AdamW opt(trainable(ref->parameters()), {.lr = 0.01});
      std::vector<double> ref_losses;
      for (int step = 0; step < kSteps; ++step) {
        const test::Batch b = batch();
        opt.zero_grad();
        const Tensor loss = cross_entropy(ref(b.x), b.y);
        loss.backward();
        opt.step();
        ref_losses.push_back(loss.item<double>());
      }
      const nn::TensorDict expected = ref->state_dict();

      const auto run = test::run_ranks(2, "qlora_fsdp", {policy, nested});
      INFO(run.logs());
      REQUIRE(run.ok());
      const nn::TensorDict r0 = run.result(0), r1 = run.result(1);
      // The global loss of a step is the mean of the two halves' (equal row counts).
      const auto l0 = r0.at("losses").to_vector<double>(), l1 = r1.at("losses").to_vector<double>();
      for (int step = 0; step < kSteps; ++step)
        CHECK(std::abs((l0[step] + l1[step]) / 2 - ref_losses[step]) <= 1e-5 * std::abs(ref_losses[step]));
      CHECK(ref_losses.back() < ref_losses.front());  // the adapters learn something

      for (const nn::TensorDict* r : {&r0, &r1}) {
        // Every key of the model's state dict, bitsandbytes' 4-bit keys among them.
        for (const auto& [key, t] : expected) {
          const std::string name = key;  // CAPTURE cannot take a structured binding (clang 14)
          CAPTURE(name);
          const Tensor* got = r->find(key);
          REQUIRE(got != nullptr);
          REQUIRE(got->dtype() == t.dtype());
          REQUIRE(got->shape() == t.shape());
          if (key.find("lora_") != std::string::npos) {
            CHECK(allclose(*got, t, 1e-5, 1e-5));
            CHECK(!allclose(*got, zeros_like(*got), 0.0, 0.0));  // B moved away from zero, A from its init
          } else {
            CHECK(equal(*got, t));  // frozen: bit for bit, the 4-bit bytes included
          }
        }
        // The base's bytes after training are the bytes the model had before wrapping.
        for (const auto& [key, t] : *r)
          if (key.rfind("before.", 0) == 0) {
            const std::string name = key;
            CAPTURE(name);
            CHECK(equal(r->at(key.substr(7)), t));
          }
      }
      {  // the sharded checkpoint of 2 ranks at 1
        auto pg = test::solo_group();
        nn::Sequential other = make_qlora_mlp(7, nested == "1");
        FullyShardedDataParallel one(other, pg, qlora_options(policy));
        one->load_sharded(run.dir / "sharded");
        for (const auto& [key, t] : one->full_state_dict()) {
          const std::string name = key;
          CAPTURE(name);
          CHECK(equal(t, r0.at(key)));
        }
        const test::Batch b = batch();
        CHECK(allclose(one(b.x), ref(b.x), 1e-5, 1e-5));
      }
      // Each rank holds half the base's bytes: the two layers' packed codes and statistics, each
      // entry aligned to 64 bytes in its unit's buffer, padded to an even size.
      const auto c0 = r0.at("counts").to_vector<int64_t>(), c1 = r1.at("counts").to_vector<int64_t>();
      const int64_t shard_bytes = c0[0], padded = c0[1], base_bytes = c0[2], units = c0[3];
      const int64_t entries = nested == "1" ? 8 : 4;  // per layer: codes, absmax (+ nested absmax, decoded absmax)
      CHECK(c1[0] == shard_bytes);
      CHECK(units == (policy == "lora" ? 2 : 1));
      CHECK(2 * shard_bytes == padded);
      CHECK(padded >= base_bytes);
      CHECK(padded - base_bytes <= entries * 64);
      const int64_t packed = (kFeatures * kHidden + kHidden * kClasses) / 2;  // 1600 bytes of codes
      CHECK(base_bytes >= packed);
      CHECK(shard_bytes <= (base_bytes + entries * 64) / 2);
      // AdamW keeps exp_avg and exp_avg_sq for the trainable shards only.
      CHECK(c0[5] > 0);
      CHECK(c0[4] == 2 * c0[5]);
    }
}

TEST_CASE("FSDP over 4-bit layers: the full state dict round-trips, another format and int8 layers are refused") {
  auto pg = test::solo_group();
  const test::Batch b = batch();
  nn::Sequential net = make_qlora_mlp(42, true);
  FullyShardedDataParallel fsdp(net, pg, qlora_options("lora"));
  const nn::TensorDict full = fsdp->full_state_dict();
  CHECK(full.find("0.base_layer.weight.quant_state.bitsandbytes__nf4") != nullptr);
  CHECK(full.find("0.base_layer.weight.nested_absmax") != nullptr);
  CHECK(full.find("0.base_layer.weight.block_absmax") == nullptr);  // decoded, never saved
  const Tensor out = fsdp(b.x).detach();

  // Another model (other weights, so other bytes and statistics) takes the first one's state.
  nn::Sequential other = make_qlora_mlp(7, true);
  FullyShardedDataParallel fsdp2(other, pg, qlora_options("lora"));
  CHECK(!equal(fsdp2(b.x).detach(), out));
  fsdp2->load_full_state_dict(full);
  CHECK(equal(fsdp2(b.x).detach(), out));  // the decoded absmax was rebuilt from the loaded statistics
  const nn::TensorDict loaded = fsdp2->full_state_dict();
  for (const auto& [key, t] : full) {
    const std::string name = key;
    CAPTURE(name);
    CHECK(equal(loaded.at(key), t));
  }
  // The format of a wrapped model is fixed: its bytes are laid out for it.
  const nn::TensorDict other_format =
      replaced(full, "2.base_layer.weight.quant_map", full.at("2.base_layer.weight.quant_map") * 2.0);
  CHECK_THROWS_WITH_AS(fsdp2->load_full_state_dict(other_format),
                       doctest::Contains("'2.base_layer.weight.quant_map' differs from the model's"), Error);
  const nn::TensorDict wrong_dtype = replaced(full, "0.base_layer.weight", full.at("0.base_layer.weight").to(kInt8));
  CHECK_THROWS_WITH_AS(fsdp2->load_full_state_dict(wrong_dtype),
                       doctest::Contains("'0.base_layer.weight' is int8, the model's 4-bit layer holds uint8"), Error);
  CHECK(equal(fsdp2(b.x).detach(), out));  // a refused load changed nothing

  manual_seed(1);
  nn::Sequential int8(nn::Linear(kFeatures, kHidden));
  precision::BitsandbytesPrecision("int8").convert_module(*int8);
  CHECK_THROWS_WITH_AS(FullyShardedDataParallel(int8, pg), doctest::Contains("'0.weight' is a int8 parameter"), Error);
}
