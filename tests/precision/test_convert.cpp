// convert_fp_tensors: floating tensors are cast wherever they sit in nested containers; integer
// and bool tensors and non-tensor values pass through (reference §2.1, the casting of T10/T12).
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "precision/all.h"

using namespace weft;
using precision::convert_fp_tensors;

TEST_CASE("T12: floating tensors in a dict are cast, integer ones are not") {
  const std::map<std::string, Tensor> batch = {{"x", tensor({1.5, 2.5})}, {"i", tensor({1, 2}, kInt64)}};
  const auto converted = convert_fp_tensors(batch, kFloat64);
  CHECK(converted.at("x").dtype() == kFloat64);
  CHECK(converted.at("x").to_vector<double>() == std::vector<double>{1.5, 2.5});
  CHECK(converted.at("i").dtype() == kInt64);
  CHECK(converted.at("i").is_same(batch.at("i")));
  CHECK(batch.at("x").dtype() == kFloat32);  // the input is not modified
  // An output goes back to the default dtype.
  CHECK(convert_fp_tensors(converted.at("x"), default_dtype()).dtype() == kFloat32);
}

TEST_CASE("nested containers, optionals, tuples and tensor dicts are walked; other values pass through") {
  using Nested = std::tuple<Tensor, std::vector<std::pair<std::string, Tensor>>, std::optional<Tensor>,
                            std::optional<Tensor>, std::array<Tensor, 2>, int, std::string>;
  const Nested data{tensor({1.0}),
                    {{"a", tensor({2.0})}, {"mask", tensor({1, 0}, kBool)}},
                    tensor({3.0}, kFloat64),
                    std::nullopt,
                    {tensor({4.0}, kBFloat16), Tensor()},
                    7,
                    "label"};
  const Nested out = convert_fp_tensors(data, kBFloat16);
  CHECK(std::get<0>(out).dtype() == kBFloat16);
  CHECK(std::get<1>(out)[0].first == "a");
  CHECK(std::get<1>(out)[0].second.dtype() == kBFloat16);
  CHECK(std::get<1>(out)[1].second.dtype() == kBool);
  CHECK(std::get<2>(out)->dtype() == kBFloat16);
  CHECK_FALSE(std::get<3>(out).has_value());
  CHECK(std::get<4>(out)[0].is_same(std::get<4>(data)[0]));  // already bf16: the same tensor
  CHECK_FALSE(std::get<4>(out)[1].defined());
  CHECK(std::get<5>(out) == 7);
  CHECK(std::get<6>(out) == "label");

  nn::TensorDict dict;
  dict.insert("w", tensor({1.0}));
  dict.insert("step", tensor({3}, kInt64));
  const nn::TensorDict converted = convert_fp_tensors(dict, kFloat16);
  CHECK(converted.at("w").dtype() == kFloat16);
  CHECK(converted.at("step").dtype() == kInt64);
  CHECK(converted.items()[0].first == "w");
}

TEST_CASE("casts are differentiable: gradients come back in the input's dtype") {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  const std::vector<Tensor> in = {x};
  const std::vector<Tensor> out = convert_fp_tensors(in, kFloat64);
  sum(mul(out[0], out[0])).backward();
  CHECK(x.grad().dtype() == kFloat32);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2.0, 4.0});
}
