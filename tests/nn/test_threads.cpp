// Modules and threads, as docs/GUIDE.md promises: layers built on several threads at once draw
// their initial weights from the shared default generator (Note [Generator locking] in
// tensor/generator.h) and no two get the same numbers; a model serves forward passes on several
// threads under NoGradGuard. The ThreadSanitizer job runs this file (scripts/run-tests.sh --tsan).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <thread>
#include <vector>

#include "nn/all.h"

using namespace weft;

TEST_CASE("Linear layers built on two threads at once are each initialised from their own numbers") {
  constexpr int kLayers = 40;
  std::vector<std::vector<double>> weights[2];
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
      threads.emplace_back([&weights, t] {
        for (int i = 0; i < kLayers; ++i)
          weights[t].push_back(nn::Linear(16, 16)->weight.to(kFloat64).to_vector<double>());
      });
    for (auto& thread : threads) thread.join();
  }
  std::set<double> firsts;
  for (const auto& thread_weights : weights)
    for (const auto& w : thread_weights) {
      // kaiming_uniform_(a = √5) over fan_in 16: U(-1/4, 1/4).
      CHECK(std::all_of(w.begin(), w.end(), [](double v) { return std::abs(v) <= 0.25; }));
      firsts.insert(w[0]);
    }
  CHECK(firsts.size() == 2 * kLayers);
}

TEST_CASE("a model serves forward passes on several threads at once under NoGradGuard") {
  manual_seed(3);
  nn::Sequential model(nn::Linear(16, 32), nn::ReLU(), nn::Linear(32, 4));
  const Tensor x = randn({8, 16});
  Tensor expected;
  {
    NoGradGuard no_grad;
    expected = model(x);
  }
  std::vector<Tensor> outputs(3);
  {
    std::vector<std::thread> threads;
    for (size_t t = 0; t < outputs.size(); ++t)
      threads.emplace_back([&, t] {
        NoGradGuard no_grad;  // per thread: this thread's grad mode
        for (int i = 0; i < 20; ++i) outputs[t] = model(x);
      });
    for (auto& thread : threads) thread.join();
  }
  for (const Tensor& out : outputs) CHECK(equal(out, expected));
}
