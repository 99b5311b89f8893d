// Region views' backward (tensor/autograd_region.h): the gradients of the pieces of a split, of
// slices and of selects reach their input summed correctly whichever way the engine combines them
// (a fresh zero tensor, or an add into the region of a gradient already waiting), including when
// the input also gets a gradient directly, when a piece gets none, when pieces overlap, through a
// cast, and twice over a retained graph.
#include <doctest/doctest.h>

#include <vector>

#include "tensor/all.h"

using namespace weft;

namespace {

std::vector<double> values(const Tensor& t) { return t.contiguous().to(kFloat64).to_vector<double>(); }

}  // namespace

TEST_CASE("split pieces: each piece's gradient lands in its own columns") {
  const Tensor x = arange(12.0, TensorOptions(kFloat64)).reshape({2, 6}).requires_grad_();
  const Tensor h = mul(x, 1.0);  // a non-leaf input, as a projection's output is
  const std::vector<Tensor> pieces = split(h, 2, 1);
  // d/dx of sum(1·p0 + 2·p1 + 3·p2) is 1, 2, 3 on the pieces' columns.
  const Tensor loss = add(add(pieces[0].sum(), mul(pieces[1], 2.0).sum()), mul(pieces[2], 3.0).sum());
  loss.backward();
  CHECK(values(x.grad()) == std::vector<double>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
}

TEST_CASE("split pieces: an unused piece gets zeros, and a direct use of the input adds to every column") {
  const Tensor x = arange(8.0, TensorOptions(kFloat64)).reshape({2, 4}).requires_grad_();
  const Tensor h = mul(x, 1.0);
  const std::vector<Tensor> pieces = split(h, 1, 1);  // four single columns
  // pieces 0 and 3 weighted by the values of x itself, piece 2 unused, h used whole as well.
  const Tensor loss = add(add(mul(pieces[0], pieces[0]).sum(), mul(pieces[3], 5.0).sum()), mul(h, 0.5).sum());
  loss.backward();
  // column 0: 2·x + 0.5; column 1, 2: 0.5; column 3: 5.5.
  CHECK(values(x.grad()) == std::vector<double>{0.5, 0.5, 0.5, 5.5, 8.5, 0.5, 0.5, 5.5});
}

TEST_CASE("overlapping slices and selects add up where they overlap") {
  const Tensor x = arange(5.0, TensorOptions(kFloat64)).requires_grad_();
  const Tensor h = mul(x, 1.0);
  const Tensor a = h.slice(0, 0, 3), b = h.slice(0, 2, 5), c = h.select(0, 2), d = h.slice(0, 0, 5, 2);
  const Tensor loss = add(add(add(a.sum(), mul(b, 10.0).sum()), mul(c, 100.0)), mul(d, 1000.0).sum());
  loss.backward();
  CHECK(values(x.grad()) == std::vector<double>{1001, 1, 1111, 10, 1010});
}

TEST_CASE("pieces used through a dtype cast get their gradients in the input's dtype") {
  const Tensor x = arange(4.0, TensorOptions(kFloat32)).requires_grad_();
  const Tensor h = mul(x, 1.0);
  const std::vector<Tensor> pieces = split(h, 2, 0);
  const Tensor loss = add(pieces[0].to(kFloat64).sum(), mul(pieces[1].to(kFloat64), 3.0).sum());
  loss.backward();
  CHECK(x.grad().dtype() == kFloat32);
  CHECK(values(x.grad()) == std::vector<double>{1, 1, 3, 3});
}

TEST_CASE("retain_graph: a second backward through the same pieces gives the same gradient again") {
  const Tensor x = arange(6.0, TensorOptions(kFloat64)).requires_grad_();
  const std::vector<Tensor> pieces = split(mul(x, 2.0), 3, 0);
  const Tensor loss = add(pieces[0].sum(), mul(pieces[1], 4.0).sum());
  loss.backward(Tensor(), /*retain_graph=*/true);
  loss.backward();
  CHECK(values(x.grad()) == std::vector<double>{4, 4, 4, 16, 16, 16});
}

TEST_CASE("index_select's rows add into a waiting gradient of its input, or into zeros, duplicates summed") {
  // A tied embedding: the table gathered by index_select and used whole by a product. Whichever
  // gradient the engine holds first, the rows' gradients are added where they came from
  // (row 1 twice), into the product's gradient of the whole table or into zeros of their own.
  const Tensor index = tensor({1.0, 3.0, 1.0}).to(kInt64);
  const Tensor weights = tensor({1.0, 10.0, 100.0}).view({3, 1}).to(kFloat64);
  // d/dtable of sum(weights · rows): row 1 gets 1 + 100, row 3 gets 10; of sum(0.5 · table²): table.
  const std::vector<double> rows_only = {0, 0, 101, 101, 0, 0, 10, 10};
  const std::vector<double> both = {0, 1, 103, 104, 4, 5, 16, 17};
  for (const bool gather_last : {false, true}) {
    CAPTURE(gather_last);
    const Tensor table = arange(8.0, TensorOptions(kFloat64)).reshape({4, 2}).requires_grad_();
    const Tensor gathered = mul(index_select(table, 0, index), weights).sum();
    const Tensor whole = mul(mul(table, table), 0.5).sum();
    const Tensor loss = gather_last ? add(whole, gathered) : add(gathered, whole);
    loss.backward();
    CHECK(values(table.grad()) == both);
  }
  const Tensor alone = arange(8.0, TensorOptions(kFloat64)).reshape({4, 2}).requires_grad_();
  mul(index_select(alone, 0, index), weights).sum().backward();
  CHECK(values(alone.grad()) == rows_only);
}
