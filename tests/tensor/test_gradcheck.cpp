// Tests of the gradient checker itself: it must fail on wrong rules, or none of the
// gradient checks built on it can fail.
#include <doctest/doctest.h>

#include "gradcheck.h"

using namespace weft;
using weft::autograd::SavedTensor;
using weft::testing::arg;
using weft::testing::check_gradients;

namespace {

// x² whose backward forgets the factor 2.
Tensor square_missing_factor(const Tensor& x) {
  Tensor out = mul(x.detach(), x.detach());
  autograd::record("SquareMissingFactor", out, {x},
                   [sx = SavedTensor(x)](const Tensor& g) { return std::vector<Tensor>{mul(g, sx.unpack())}; });
  return out;
}

// 3·x whose backward sends each element's gradient to the mirrored element: the total is right,
// the placement is not.
Tensor triple_mirrored_backward(const Tensor& x) {
  Tensor out = mul(x.detach(), 3.0);
  autograd::record("TripleMirrored", out, {x}, [n = x.numel()](const Tensor& g) {
    return std::vector<Tensor>{mul(index_select(g, 0, arange(n - 1, -1, -1)), 3.0)};
  });
  return out;
}

// exp whose backward reads the saved input as if it were contiguous: right for contiguous
// inputs only.
Tensor exp_assuming_contiguous(const Tensor& x) {
  Tensor out = exp(x.detach());
  autograd::record("ExpAssumingContiguous", out, {x}, [sx = SavedTensor(x)](const Tensor& g) {
    const Tensor& v = sx.unpack();
    std::vector<double> flat(v.data<double>(), v.data<double>() + v.numel());
    return std::vector<Tensor>{mul(g, exp(from_vector(flat, v.shape(), kFloat64)))};
  });
  return out;
}

}  // namespace

TEST_CASE("gradcheck accepts a correct rule") {
  const auto report = check_gradients([](const std::vector<Tensor>& in) { return mul(in[0], in[0]); }, {arg({3}, 1)});
  CHECK_MESSAGE(report.ok, report.text);
}

TEST_CASE("gradcheck rejects a rule with a wrong factor") {
  const auto report = check_gradients([](const std::vector<Tensor>& in) { return square_missing_factor(in[0]); },
                                      {arg({3}, 2)});
  CHECK_FALSE(report.ok);
  CHECK(report.text.find("input 0 element") != std::string::npos);
}

TEST_CASE("gradcheck rejects a rule that misplaces gradients whose total is right") {
  const auto report = check_gradients([](const std::vector<Tensor>& in) { return triple_mirrored_backward(in[0]); },
                                      {arg({4}, 3)});
  CHECK_FALSE(report.ok);
}

TEST_CASE("gradcheck's non-contiguous pass catches a rule that assumes contiguity") {
  auto fn = [](const std::vector<Tensor>& in) { return exp_assuming_contiguous(in[0]); };
  testing::GradcheckOptions contiguous_only;
  contiguous_only.check_noncontiguous = false;
  CHECK(check_gradients(fn, {arg({2, 3}, 4)}, contiguous_only).ok);
  const auto report = check_gradients(fn, {arg({2, 3}, 4)});
  CHECK_FALSE(report.ok);
  CHECK(report.text.find("[non-contiguous]") != std::string::npos);
  CHECK(report.text.find("[contiguous]") == std::string::npos);
}

TEST_CASE("gradcheck's non-contiguous leaves hold the same values in a non-contiguous layout") {
  const Tensor x = testing::uniform({2, 3, 4}, -1, 1, 5);
  const Tensor v = testing::detail::noncontiguous_copy(x);
  CHECK_FALSE(v.is_contiguous());
  CHECK(v.shape() == x.shape());
  CHECK(equal(v, x));
}

TEST_CASE("gradcheck rejects inputs that require grad in a dtype it cannot difference") {
  const Tensor x = ones({2}, kFloat32).requires_grad_();
  const auto report = check_gradients([](const std::vector<Tensor>& in) { return mul(in[0], 2.0); }, {x});
  CHECK_FALSE(report.ok);
  CHECK(report.text.find("not float64") != std::string::npos);
}
