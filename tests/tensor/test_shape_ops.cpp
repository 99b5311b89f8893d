// Joining, splitting and indexing: cat / stack / split / chunk, index_select / gather /
// index_add / scatter_add and embedding, with the results written out by hand.
#include <doctest/doctest.h>

#include <vector>

#include "tensor_test_helpers.h"
#include "tensor/all.h"

using namespace weft;
using testing::values;

namespace {

Tensor idx(std::initializer_list<double> v) { return tensor(v, kInt64); }

}  // namespace

TEST_CASE("cat") {
  const Tensor a = tensor({1, 2, 3, 4, 5, 6}).view({2, 3});
  const Tensor b = tensor({7, 8, 9}).view({1, 3});
  const Tensor r = cat({a, b});
  CHECK(r.shape() == Shape{3, 3});
  CHECK(values(r) == std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  const Tensor c = cat({a, tensor({-1, -2}).view({2, 1})}, 1);
  CHECK(c.shape() == Shape{2, 4});
  CHECK(values(c) == std::vector<double>{1, 2, 3, -1, 4, 5, 6, -2});
  CHECK(values(cat({a.t(), a.t()}, -1)) == std::vector<double>{1, 4, 1, 4, 2, 5, 2, 5, 3, 6, 3, 6});
  // The result dtype promotes.
  CHECK(cat({tensor({1}, kInt64), tensor({0.5})}).dtype() == kFloat32);
  CHECK(values(cat({tensor({1}, kInt64), tensor({0.5})})) == std::vector<double>{1, 0.5});
  CHECK(cat({zeros({0, 3}), a}).shape() == Shape{2, 3});
  CHECK_THROWS_WITH_AS(cat({a, tensor({1, 2}).view({1, 2})}),
                       "[cat] sizes must match except in dimension 0: tensor 0 has shape (2, 3), tensor 1 has shape (1, 2)",
                       Error);
  CHECK_THROWS_AS(cat({}), Error);
  CHECK_THROWS_AS(cat({a, tensor({1, 2, 3})}), Error);
}

TEST_CASE("stack") {
  const Tensor a = tensor({1, 2}), b = tensor({3, 4});
  CHECK(stack({a, b}).shape() == Shape{2, 2});
  CHECK(values(stack({a, b})) == std::vector<double>{1, 2, 3, 4});
  CHECK(stack({a, b}, 1).shape() == Shape{2, 2});
  CHECK(values(stack({a, b}, 1)) == std::vector<double>{1, 3, 2, 4});
  CHECK(stack({a, b}, -1).shape() == Shape{2, 2});
  CHECK(stack({scalar_tensor(1.0), scalar_tensor(2.0)}).shape() == Shape{2});
  CHECK_THROWS_WITH_AS(stack({a, tensor({1, 2, 3})}),
                       "[stack] expects tensors of equal shape: tensor 0 has (2,), tensor 1 has (3,)", Error);
}

TEST_CASE("split and chunk give views") {
  Tensor x = arange(10, kFloat32).view({5, 2});
  auto parts = split(x, 2);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].shape() == Shape{2, 2});
  CHECK(parts[2].shape() == Shape{1, 2});
  CHECK(values(parts[2]) == std::vector<double>{8, 9});
  CHECK(parts[1].storage() == x.storage());
  parts[1].fill_(-1.0);
  CHECK(values(x)[4] == -1.0);
  const auto sized = split(x, std::vector<int64_t>{1, 4});
  CHECK(sized[1].shape() == Shape{4, 2});
  const auto cols = split(arange(10, kFloat32).view({5, 2}), 1, 1);
  REQUIRE(cols.size() == 2);
  CHECK(values(cols[1]) == std::vector<double>{1, 3, 5, 7, 9});
  CHECK_THROWS_WITH_AS(split(x, std::vector<int64_t>{1, 2}),
                       "[split] sizes (1, 2) sum to 3 but dimension 0 has size 5", Error);
  CHECK_THROWS_AS(split(x, 0), Error);

  const Tensor y = arange(5, kFloat32);
  const auto ch = chunk(y, 3);  // sizes 2, 2, 1
  REQUIRE(ch.size() == 3);
  CHECK(values(ch[2]) == std::vector<double>{4});
  CHECK(chunk(arange(6), 4).size() == 3);  // as PyTorch: ceil(6 / 4) = 2 per chunk
  CHECK(chunk(arange(2), 5).size() == 2);
  CHECK_THROWS_AS(chunk(y, 0), Error);
}

TEST_CASE("index_select") {
  const Tensor x = arange(12, kFloat32).view({3, 4});
  const Tensor c = index_select(x, 1, idx({3, 0, 3}));
  CHECK(c.shape() == Shape{3, 3});
  CHECK(values(c) == std::vector<double>{3, 0, 3, 7, 4, 7, 11, 8, 11});
  CHECK(values(index_select(x, 0, idx({2, 0}))) == std::vector<double>{8, 9, 10, 11, 0, 1, 2, 3});
  CHECK(values(index_select(x.t(), 0, idx({1}))) == std::vector<double>{1, 5, 9});
  CHECK(values(index_select(x, 0, tensor({1}, kInt32))) == std::vector<double>{4, 5, 6, 7});
  CHECK(index_select(x, 0, tensor({}, kInt64)).shape() == Shape{0, 4});
  CHECK_THROWS_WITH_AS(index_select(x, 0, idx({3})), "[index_select] index 3 is out of bounds for size 3", Error);
  CHECK_THROWS_AS(index_select(x, 0, idx({-1})), Error);
  CHECK_THROWS_WITH_AS(index_select(x, 0, tensor({1.0})),
                       "[index_select] expected an integer index tensor, got float32", Error);
}

// Large enough to be copied on several threads, rows picked out of order and repeated, with an
// outer dim: every element is checked against its source position.
TEST_CASE("index_select of many scattered rows") {
  constexpr int64_t kOuter = 3, kRows = 500, kInner = 70, kPicked = 300;
  const Tensor x = arange(kOuter * kRows * kInner, kFloat32).view({kOuter, kRows, kInner});
  std::vector<int64_t> picks;
  for (int64_t j = 0; j < kPicked; ++j) picks.push_back((j * 37 + 11) % kRows);
  const Tensor y = index_select(x, 1, from_vector(picks, {kPicked}, kInt64));
  REQUIRE(y.shape() == Shape{kOuter, kPicked, kInner});
  const std::vector<double> got = values(y);
  int64_t wrong = 0;
  for (int64_t o = 0; o < kOuter; ++o)
    for (int64_t j = 0; j < kPicked; ++j)
      for (int64_t i = 0; i < kInner; ++i)
        wrong += got[static_cast<size_t>((o * kPicked + j) * kInner + i)] !=
                 static_cast<double>((o * kRows + picks[static_cast<size_t>(j)]) * kInner + i);
  CHECK(wrong == 0);
}

TEST_CASE("gather") {
  const Tensor x = tensor({1, 2, 3, 4, 5, 6}).view({2, 3});
  const Tensor g = gather(x, 1, tensor({0, 0, 2, 1}, kInt64).view({2, 2}));
  CHECK(g.shape() == Shape{2, 2});
  CHECK(values(g) == std::vector<double>{1, 1, 6, 5});
  CHECK(values(gather(x, 0, tensor({1, 0, 1}, kInt64).view({1, 3}))) == std::vector<double>{4, 2, 6});
  // The index may be smaller than x outside the gathered dim.
  CHECK(values(gather(x, 1, tensor({2}, kInt64).view({1, 1}))) == std::vector<double>{3});
  CHECK_THROWS_WITH_AS(gather(x, 1, tensor({3}, kInt64).view({1, 1})), "[gather] index 3 is out of bounds for size 3",
                       Error);
  CHECK_THROWS_AS(gather(x, 1, tensor({0}, kInt64)), Error);  // rank differs
}

TEST_CASE("index_add and scatter_add accumulate, repeated indices included") {
  const Tensor src = tensor({1, 2, 10, 20, 100, 200}).view({3, 2});
  const Tensor r = index_add(zeros({4, 2}), 0, idx({0, 2, 0}), src);
  CHECK(values(r) == std::vector<double>{101, 202, 0, 0, 10, 20, 0, 0});
  const Tensor base = ones({4, 2});
  CHECK(values(index_add(base, 0, idx({3, 3, 3}), src)) == std::vector<double>{1, 1, 1, 1, 1, 1, 112, 223});
  CHECK(values(base) == std::vector<double>(8, 1.0));  // out of place
  CHECK_THROWS_AS(index_add(zeros({4, 2}), 0, idx({0, 4, 0}), src), Error);
  CHECK_THROWS_AS(index_add(zeros({4, 2}), 0, idx({0, 1}), src), Error);

  const Tensor s = scatter_add(zeros({2, 4}), 1, tensor({0, 1, 0, 3, 3, 2}, kInt64).view({2, 3}), ones({2, 3}));
  CHECK(values(s) == std::vector<double>{2, 1, 0, 0, 0, 0, 1, 2});
  const Tensor s0 = scatter_add(zeros({3, 2}), 0, tensor({2, 0}, kInt64).view({1, 2}), tensor({5, 7}).view({1, 2}));
  CHECK(values(s0) == std::vector<double>{0, 7, 0, 0, 5, 0});
  CHECK_THROWS_WITH_AS(scatter_add(zeros({2, 4}), 1, tensor({4}, kInt64).view({1, 1}), ones({1, 1})),
                       "[scatter_add] index 4 is out of bounds for size 4", Error);
}

TEST_CASE("embedding picks rows for any index shape") {
  const Tensor w = arange(12, kFloat32).view({4, 3});
  const Tensor e = embedding(w, tensor({3, 0, 1, 3}, kInt64).view({2, 2}));
  CHECK(e.shape() == Shape{2, 2, 3});
  CHECK(values(e) == std::vector<double>{9, 10, 11, 0, 1, 2, 3, 4, 5, 9, 10, 11});
  CHECK(embedding(w, tensor({2}, kInt64).view(Shape{})).shape() == Shape{3});
  CHECK_THROWS_AS(embedding(w, tensor({4}, kInt64)), Error);
  CHECK_THROWS_AS(embedding(w, tensor({1.0})), Error);
}
