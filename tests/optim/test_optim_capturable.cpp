// Capturable Adam and AdamW (Note [Capturable Adam] in optim/adam.h) and training steps in a CUDA
// graph (Note [CUDA graphs] in tensor/cuda.h).
//
// On the CPU, where nothing is captured, `capturable` must change nothing: the same bits, the same
// state dict, and a load keeps the optimizer's own setting. On a GPU: a capturable AdamW, its
// count on the device, steps as the plain one does; a captured MLP training step replayed N times
// equals N eager steps; and an optimizer that cannot be replayed refuses to be captured, changing
// nothing. The GPU cases are reported as skipped by doctest where there is none (and in a build
// without CUDA).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "optim/all.h"
#include "cuda_test_helpers.h"
#include "error_message.h"

using namespace weft;
using test::check_close;
using test::kGpu;
using test::kNoGpu;

namespace {

// Two parameters of fixed values and the gradients of step k, on `device`.
std::vector<Tensor> start_params(Device device) {
  Generator gen(11);
  return {randn({3, 4}, {}, &gen).to(device).requires_grad_(), randn({4}, {}, &gen).to(device).requires_grad_()};
}
void set_grads(std::vector<Tensor>& params, int k) {
  Generator gen(100 + static_cast<uint64_t>(k));
  for (Tensor& p : params) p.set_grad(randn(p.shape(), {}, &gen).to(p.device()));
}

template <class Opt, class Options>
std::vector<Tensor> run_steps(Device device, Options options, int steps, optim::OptimizerState* state = nullptr) {
  std::vector<Tensor> params = start_params(device);
  Opt opt(params, options);
  for (int k = 0; k < steps; ++k) {
    set_grads(params, k);
    opt.step();
  }
  if (state != nullptr) *state = opt.state_dict();
  return params;
}

nn::Sequential small_mlp() {
  nn::Sequential net;
  net->push_back(nn::Linear(6, 8));
  net->push_back(nn::ReLU());
  net->push_back(nn::Linear(8, 3));
  return net;
}

}  // namespace

TEST_CASE("capturable changes nothing on the CPU and is not part of the state dict") {
  for (bool amsgrad : {false, true}) {
    CAPTURE(amsgrad);
    optim::OptimizerState plain_state, capturable_state;
    const auto plain =
        run_steps<optim::AdamW>(kCPU, optim::AdamWOptions{.lr = 0.05, .amsgrad = amsgrad}, 4, &plain_state);
    const auto capturable = run_steps<optim::AdamW>(
        kCPU, optim::AdamWOptions{.lr = 0.05, .amsgrad = amsgrad, .capturable = true}, 4, &capturable_state);
    for (size_t i = 0; i < plain.size(); ++i) CHECK(capturable[i].to_vector<double>() == plain[i].to_vector<double>());
    CHECK(capturable_state.scalars == plain_state.scalars);
    CHECK(capturable_state.scalars.at("state.0.step") == "4");
    CHECK(capturable_state.scalars.count("param_groups.0.capturable") == 0);
    const auto adam_plain = run_steps<optim::Adam>(kCPU, optim::AdamOptions{.lr = 0.05, .weight_decay = 0.1}, 3);
    const auto adam_capturable =
        run_steps<optim::Adam>(kCPU, optim::AdamOptions{.lr = 0.05, .weight_decay = 0.1, .capturable = true}, 3);
    for (size_t i = 0; i < plain.size(); ++i)
      CHECK(adam_capturable[i].to_vector<double>() == adam_plain[i].to_vector<double>());

    // A load takes every option the state dict holds and keeps the optimizer's own capturable.
    std::vector<Tensor> params = start_params(kCPU);
    optim::AdamW fresh(params, {.lr = 0.5, .capturable = true});
    fresh.load_state_dict(plain_state);
    CHECK(fresh.param_groups()[0].options.capturable);
    CHECK(fresh.param_groups()[0].options.lr == 0.05);
    CHECK(fresh.param_groups()[0].options.amsgrad == amsgrad);
  }
}

TEST_CASE("capturable AdamW on CUDA steps as the plain one, its count on the device" * doctest::skip(kNoGpu)) {
  for (bool amsgrad : {false, true}) {
    CAPTURE(amsgrad);
    const optim::AdamWOptions plain_options{.lr = 0.05, .amsgrad = amsgrad};
    optim::AdamWOptions capturable_options = plain_options;
    capturable_options.capturable = true;
    optim::OptimizerState plain_state, capturable_state;
    const auto plain = run_steps<optim::AdamW>(kGpu, plain_options, 6, &plain_state);
    const auto capturable = run_steps<optim::AdamW>(kGpu, capturable_options, 6, &capturable_state);
    // The same kernel; only the bias corrections come from the device's pow instead of the host's.
    for (size_t i = 0; i < plain.size(); ++i) check_close(capturable[i], plain[i], 1e-6, 1e-7);
    CHECK(capturable_state.scalars.at("state.0.step") == "6");
    CHECK(capturable_state.scalars.at("state.1.step") == "6");
    CHECK(capturable_state.scalars == plain_state.scalars);

    // A capturable optimizer loaded from the state dict continues from the saved count.
    std::vector<Tensor> params;
    for (const Tensor& t : capturable) params.push_back(t.detach().clone().requires_grad_());
    optim::AdamW resumed(params, capturable_options);
    resumed.load_state_dict(capturable_state);
    set_grads(params, 6);
    resumed.step();
    const auto seven = run_steps<optim::AdamW>(kGpu, plain_options, 7);
    for (size_t i = 0; i < params.size(); ++i) check_close(params[i], seven[i], 1e-6, 1e-7);
  }
}

TEST_CASE("a captured MLP training step replayed N times equals N eager steps" * doctest::skip(kNoGpu)) {
  constexpr int kBatches = 8, kWarmUp = 3;
  nn::Sequential eager_net = small_mlp(), graph_net = small_mlp();
  graph_net->load_state_dict(eager_net->state_dict());
  eager_net->to(kGpu);
  graph_net->to(kGpu);
  optim::AdamW eager_opt(eager_net->parameters(), {.lr = 0.01});
  optim::AdamW graph_opt(graph_net->parameters(), {.lr = 0.01, .capturable = true});
  Generator gen(5);
  std::vector<Tensor> inputs, targets;
  for (int i = 0; i < kBatches; ++i) {
    inputs.push_back(randn({16, 6}, {}, &gen).to(kGpu));
    targets.push_back(randint(0, 3, {16}, TensorOptions(kInt64), &gen).to(kGpu));
  }

  Tensor x = zeros({16, 6}, kGpu), y = zeros({16}, TensorOptions(kInt64).device(kGpu)), graph_loss;
  auto graph_step = [&] {
    const Tensor loss = cross_entropy(graph_net(x), y);
    graph_opt.zero_grad();
    loss.backward();
    graph_opt.step();
    graph_loss = loss.detach();
  };
  cuda::Graph graph;
  for (int i = 0; i < kBatches; ++i) {
    x.copy_(inputs[i]);
    y.copy_(targets[i]);
    if (i < kWarmUp) {
      graph.warm_up(graph_step);
      continue;
    }
    if (!graph.is_captured()) graph.capture(graph_step);
    graph.replay();
  }

  Tensor eager_loss;
  for (int i = 0; i < kBatches; ++i) {
    const Tensor loss = cross_entropy(eager_net(inputs[i]), targets[i]);
    eager_opt.zero_grad();
    loss.backward();
    eager_opt.step();
    eager_loss = loss.detach();
  }
  check_close(graph_loss, eager_loss, 1e-5, 1e-6);
  const auto graph_params = graph_net->parameters(), eager_params = eager_net->parameters();
  for (size_t i = 0; i < eager_params.size(); ++i) check_close(graph_params[i], eager_params[i], 1e-5, 1e-6);
  CHECK(graph_opt.state_dict().scalars.at("state.0.step") == std::to_string(kBatches));
}

TEST_CASE("an optimizer a replay would get wrong refuses to be captured and changes nothing" *
          doctest::skip(kNoGpu)) {
  Tensor p = ones({4}, kGpu).requires_grad_();
  p.set_grad(full({4}, 0.5, kGpu));
  cuda::Graph graph;
  optim::AdamW plain({p}, {.lr = 0.1});
  CHECK(error_of([&] { graph.capture([&] { plain.step(); }); }) ==
        "[AdamW] a CUDA graph is being captured but capturable is false: the step count and bias corrections would "
        "be fixed in the graph and every replay would repeat this step; construct AdamW with capturable = true");
  optim::AdamW capturable({p}, {.lr = 0.1, .capturable = true});
  CHECK(error_of([&] { graph.capture([&] { capturable.step(); }); }) ==
        "[AdamW] a parameter's state would be created during a CUDA graph capture, and every replay would reset "
        "it; run the step eagerly first (cuda::Graph::warm_up)");
  CHECK(capturable.state(p) == nullptr);
  CHECK(p.to_vector<float>() == std::vector<float>{1, 1, 1, 1});
  optim::SGD sgd({p}, {.lr = 0.1, .momentum = 0.9});
  CHECK(error_of([&] { graph.capture([&] { sgd.step(); }); }) ==
        "[SGD] a momentum buffer would be created during a CUDA graph capture, and every replay would reset it; run "
        "the step eagerly first (cuda::Graph::warm_up)");
  capturable.step();  // eagerly, all is well
  CHECK(capturable.state_dict().scalars.at("state.0.step") == "1");
}
