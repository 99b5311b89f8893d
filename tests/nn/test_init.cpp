// nn::init: gains, fans, the distributions' bounds and moments, and the skip-init flag.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "error_message.h"
#include "moments.h"
#include "nn/all.h"

using namespace weft;
using testing::moments;
namespace init = weft::nn::init;

namespace {

// Fills every new CPU block with the byte 0x42, so memory that nobody initialised reads as a
// known float (0x42424242 = 48.5647...). Blocks stay owned by this allocator after it is
// uninstalled, so it must outlive them: one static instance.
class PatternAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
    std::memset(p, 0x42, nbytes);
    return p;
  }
  void deallocate(void* ptr, size_t) override { std::free(ptr); }
};

struct PatternAllocatorGuard {
  PatternAllocatorGuard() {
    static PatternAllocator allocator;
    set_allocator(kCPU, &allocator);
  }
  ~PatternAllocatorGuard() { set_allocator(kCPU, nullptr); }
};

float pattern_float() {
  const uint32_t bits = 0x42424242u;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

TensorFrame skip_init_frame() { return TensorFrame{std::nullopt, std::nullopt, true}; }

}  // namespace

TEST_CASE("calculate_gain follows PyTorch's table") {
  CHECK(init::calculate_gain(init::Nonlinearity::Linear) == 1.0);
  CHECK(init::calculate_gain(init::Nonlinearity::Sigmoid) == 1.0);
  CHECK(init::calculate_gain(init::Nonlinearity::Tanh) == doctest::Approx(5.0 / 3.0));
  CHECK(init::calculate_gain(init::Nonlinearity::ReLU) == doctest::Approx(std::sqrt(2.0)));
  CHECK(init::calculate_gain(init::Nonlinearity::SELU) == 0.75);
  CHECK(init::calculate_gain(init::Nonlinearity::LeakyReLU) == doctest::Approx(std::sqrt(2.0 / 1.0001)));
  // a = √5 gives gain √(1/3), which makes kaiming_uniform_'s bound 1/√fan_in.
  CHECK(init::calculate_gain(init::Nonlinearity::LeakyReLU, std::sqrt(5.0)) == doctest::Approx(std::sqrt(1.0 / 3.0)));
  CHECK_THROWS_WITH_AS(init::calculate_gain(init::Nonlinearity::ReLU, 0.2),
                       "[calculate_gain] only LeakyReLU takes a parameter (its negative slope)", Error);
}

TEST_CASE("fan in and fan out count the receptive field") {
  const auto fc = init::calculate_fan_in_and_fan_out(empty({5, 3}));
  CHECK(fc.fan_in == 3);
  CHECK(fc.fan_out == 5);
  const auto conv = init::calculate_fan_in_and_fan_out(empty({8, 4, 3, 3}));
  CHECK(conv.fan_in == 36);
  CHECK(conv.fan_out == 72);
  CHECK_THROWS_WITH_AS(init::calculate_fan_in_and_fan_out(empty({5})),
                       "[calculate_fan_in_and_fan_out] fan in and fan out need a tensor of 2 or more "
                       "dimensions, got shape (5,)",
                       Error);
}

TEST_CASE("uniform_, normal_ and constants fill in place, even parameters that require grad") {
  Tensor t = zeros({200, 500}).requires_grad_();
  const Tensor alias = t;
  manual_seed(11);
  init::uniform_(t, -2.0, 3.0);
  CHECK(alias.is_same(t));
  CHECK(t.min().item() >= -2.0);
  CHECK(t.max().item() < 3.0);
  auto [mean, var] = moments(t);
  // 100 000 draws: standard errors ~0.0046 (mean) and ~0.3 % (variance).
  CHECK(std::abs(mean - 0.5) < 0.03);
  CHECK(var == doctest::Approx(25.0 / 12.0).epsilon(0.01));
  CHECK(t.grad_fn() == nullptr);

  init::normal_(t, 1.0, 0.5);
  std::tie(mean, var) = moments(t);
  CHECK(std::abs(mean - 1.0) < 0.01);
  CHECK(var == doctest::Approx(0.25).epsilon(0.02));

  init::constant_(t, 0.25);
  CHECK(t.min().item() == 0.25);
  CHECK(t.max().item() == 0.25);
  init::ones_(t);
  CHECK(t.sum().item() == 100000.0);
  init::zeros_(t);
  CHECK(t.abs().sum().item() == 0.0);
}

TEST_CASE("init draws match Tensor::uniform_ for the same seed, and a Generator gives its own stream") {
  Tensor a = empty({4, 4});
  Tensor b = empty({4, 4});
  manual_seed(5);
  init::uniform_(a, -1.0, 1.0);
  manual_seed(5);
  b.uniform_(-1.0, 1.0);
  CHECK(equal(a, b));

  Generator g1(42), g2(42);
  Tensor c = empty({4, 4});
  Tensor d = empty({4, 4});
  init::normal_(c, 0.0, 1.0, &g1);
  init::normal_(d, 0.0, 1.0, &g2);
  CHECK(equal(c, d));
}

TEST_CASE("kaiming and xavier scale with the fans") {
  manual_seed(21);
  Tensor w = empty({400, 300});
  init::kaiming_uniform_(w, 0.0, init::FanMode::FanIn, init::Nonlinearity::ReLU);
  double bound = std::sqrt(2.0) * std::sqrt(3.0 / 300.0);
  CHECK(w.abs().max().item() <= bound);
  CHECK(w.abs().max().item() > 0.99 * bound);
  CHECK(moments(w).second == doctest::Approx(bound * bound / 3.0).epsilon(0.02));

  init::kaiming_normal_(w, 0.0, init::FanMode::FanOut, init::Nonlinearity::ReLU);
  CHECK(moments(w).second == doctest::Approx(2.0 / 400.0).epsilon(0.02));

  init::xavier_uniform_(w, 2.0);
  bound = 2.0 * std::sqrt(6.0 / 700.0);
  CHECK(w.abs().max().item() <= bound);
  CHECK(w.abs().max().item() > 0.99 * bound);

  init::xavier_normal_(w);
  CHECK(moments(w).second == doctest::Approx(2.0 / 700.0).epsilon(0.02));
}

TEST_CASE("under skip-init the init functions leave the tensor alone and draw nothing") {
  Tensor t = full({3, 3}, 7.0);
  manual_seed(0);
  const auto fresh_state = default_generator().state();
  {
    TensorFrameGuard skip(skip_init_frame());
    init::uniform_(t);
    init::normal_(t);
    init::kaiming_uniform_(t);
    init::xavier_normal_(t);
    init::zeros_(t);
    init::ones_(t);
  }
  CHECK(t.to_vector<float>() == std::vector<float>(9, 7.0f));
  CHECK(default_generator().state() == fresh_state);
  init::zeros_(t);  // the flag is gone with its frame
  CHECK(t.to_vector<float>() == std::vector<float>(9, 0.0f));
}

TEST_CASE("layers built under skip-init keep the allocator's bytes; built normally they are initialised") {
  const PatternAllocatorGuard pattern;
  const float untouched = pattern_float();
  manual_seed(0);
  const auto fresh_state = default_generator().state();
  {
    TensorFrameGuard skip(skip_init_frame());
    nn::Linear fc(8, 4);
    nn::LayerNorm ln(4);
    nn::Embedding emb(5, 3);
    CHECK(fc->weight.to_vector<float>() == std::vector<float>(32, untouched));
    CHECK(fc->bias.to_vector<float>() == std::vector<float>(4, untouched));
    CHECK(ln->weight.to_vector<float>() == std::vector<float>(4, untouched));
    CHECK(ln->bias.to_vector<float>() == std::vector<float>(4, untouched));
    CHECK(emb->weight.to_vector<float>() == std::vector<float>(15, untouched));
    CHECK(default_generator().state() == fresh_state);
  }
  nn::Linear fc(8, 4);
  nn::LayerNorm ln(4);
  CHECK(fc->weight.abs().max().item() <= 1.0 / std::sqrt(8.0));
  CHECK(ln->weight.to_vector<float>() == std::vector<float>(4, 1.0f));
  CHECK(ln->bias.to_vector<float>() == std::vector<float>(4, 0.0f));
  CHECK(default_generator().state() != fresh_state);
}

TEST_CASE("init refuses a Nonlinearity or FanMode outside its enumerators, naming it") {
  Tensor w = zeros({3, 4});
  CHECK(error_of([] { init::calculate_gain(static_cast<init::Nonlinearity>(7)); }) ==
        "[calculate_gain] expected a valid Nonlinearity (0 to 6), got the value 7");
  CHECK(error_of([&] { init::kaiming_uniform_(w, 0.0, static_cast<init::FanMode>(2)); }) ==
        "[nn.init] expected a valid FanMode (0 to 1), got the value 2");
  CHECK(error_of([&] { init::kaiming_normal_(w, 0.0, init::FanMode::FanIn, static_cast<init::Nonlinearity>(-1)); }) ==
        "[calculate_gain] expected a valid Nonlinearity (0 to 6), got the value -1");
  CHECK(equal(w, zeros({3, 4})));
}
