// Storage and views: every view op shares its input's storage (a write through one handle is read
// through the other), has the right shape / strides / offset, and in-place writes bump the one
// version counter all views share. contiguous() and reshape() copy only when the strides demand
// it; view() refuses incompatible strides with a message that points to reshape().
#include <doctest/doctest.h>

#include <vector>

#include "tensor/all.h"

using namespace weft;

namespace {

// 0, 1, ..., n-1 as float32 in the given shape.
Tensor iota(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return arange(0.0, static_cast<double>(n), 1.0, kFloat32).view(shape);
}

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

// Writes through `v` and checks the write lands in `base` at flat position `base_index`.
void check_write_through(const Tensor& base, Tensor v, int64_t base_index) {
  Tensor element = v;
  while (element.dim() > 0) element = element.select(0, 0);
  element.fill_(-7.0f);
  CHECK(values(base)[static_cast<size_t>(base_index)] == -7.0f);
}

}  // namespace

TEST_CASE("view ops share storage and get shape, strides and offset right") {
  Tensor base = iota({2, 3, 4});
  CHECK(base.strides() == Shape{12, 4, 1});
  CHECK(base.is_contiguous());

  SUBCASE("view") {
    Tensor v = base.view({6, -1});
    CHECK(v.shape() == Shape{6, 4});
    CHECK(v.strides() == Shape{4, 1});
    CHECK(v.storage() == base.storage());
    CHECK(base.view({-1}).shape() == Shape{24});
    v.select(0, 5).select(0, 2).fill_(100.0);
    CHECK(values(base)[22] == 100.0f);
  }
  SUBCASE("transpose and t") {
    Tensor v = base.transpose(0, 2);
    CHECK(v.shape() == Shape{4, 3, 2});
    CHECK(v.strides() == Shape{1, 4, 12});
    CHECK_FALSE(v.is_contiguous());
    CHECK(v.storage() == base.storage());
    CHECK(values(v)[1] == 12.0f);  // v[0, 0, 1] = base[1, 0, 0]
    Tensor m = iota({2, 3}).t();
    CHECK(m.shape() == Shape{3, 2});
    CHECK(values(m) == std::vector<float>{0, 3, 1, 4, 2, 5});
    check_write_through(base, v.select(0, 3).select(0, 1), 7);  // v[3,1,0] = base[0,1,3]
  }
  SUBCASE("permute") {
    Tensor v = base.permute({2, 0, 1});
    CHECK(v.shape() == Shape{4, 2, 3});
    CHECK(v.strides() == Shape{1, 12, 4});
    CHECK(v.storage() == base.storage());
    CHECK(values(v)[0 * 6 + 1 * 3 + 2] == 20.0f);  // v[0,1,2] = base[1,2,0]
    Tensor w = v.select(0, 3).select(0, 1).select(0, 2);  // base[1,2,3] = 23
    CHECK(w.item() == 23.0);
    w.fill_(-1.0);
    CHECK(values(base)[23] == -1.0f);
    CHECK_THROWS_AS(base.permute({0, 0, 1}), Error);
    CHECK_THROWS_AS(base.permute({0, 1}), Error);
  }
  SUBCASE("narrow") {
    Tensor v = base.narrow(1, 1, 2);
    CHECK(v.shape() == Shape{2, 2, 4});
    CHECK(v.strides() == Shape{12, 4, 1});
    CHECK(v.offset() == 4);
    CHECK(v.storage() == base.storage());
    CHECK(values(v)[0] == 4.0f);
    CHECK(base.narrow(-1, -2, 2).offset() == 2);
    check_write_through(base, v.select(0, 1), 16);
  }
  SUBCASE("slice with a step") {
    Tensor v = base.slice(2, 1, 4, 2);
    CHECK(v.shape() == Shape{2, 3, 2});
    CHECK(v.strides() == Shape{12, 4, 2});
    CHECK(v.offset() == 1);
    CHECK(values(v.select(0, 0).select(0, 0)) == std::vector<float>{1, 3});
    CHECK(base.slice(0, -1, 100).shape() == Shape{1, 3, 4});  // Python rules: negative and clamped
    CHECK(base.slice(1, 2, 1).shape() == Shape{2, 0, 4});
    check_write_through(base, v.select(0, 1).select(0, 2), 12 + 8 + 1);
  }
  SUBCASE("select and operator[]") {
    Tensor v = base.select(1, 2);
    CHECK(v.shape() == Shape{2, 4});
    CHECK(v.strides() == Shape{12, 1});
    CHECK(v.offset() == 8);
    CHECK(base.select(-1, -1).offset() == 3);
    CHECK(base[1].offset() == 12);
    CHECK(base[1][2][3].item() == 23.0);
    CHECK(base[1][2][3].dim() == 0);
    check_write_through(base, v.select(0, 1), 12 + 8);
  }
  SUBCASE("unsqueeze and squeeze") {
    Tensor v = base.unsqueeze(1);
    CHECK(v.shape() == Shape{2, 1, 3, 4});
    CHECK(v.strides() == Shape{12, 12, 4, 1});
    CHECK(base.unsqueeze(-1).shape() == Shape{2, 3, 4, 1});
    CHECK(base.unsqueeze(-1).strides() == Shape{12, 4, 1, 1});
    CHECK(v.squeeze(1).shape() == Shape{2, 3, 4});
    CHECK(v.squeeze(0).shape() == v.shape());  // size 2: untouched
    CHECK(iota({1, 3, 1}).squeeze().shape() == Shape{3});
    CHECK(v.storage() == base.storage());
    check_write_through(base, v.select(0, 1), 12);
    CHECK_THROWS_AS(base.unsqueeze(4), Error);
  }
  SUBCASE("expand") {
    Tensor row = iota({1, 4});
    Tensor v = row.expand({3, 4});
    CHECK(v.shape() == Shape{3, 4});
    CHECK(v.strides() == Shape{0, 1});
    CHECK(v.storage() == row.storage());
    CHECK(values(v) == std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3});
    CHECK(iota({3}).expand({2, -1}).shape() == Shape{2, 3});
    CHECK(iota({3}).expand({2, -1}).strides() == Shape{0, 1});
    v.select(0, 2).select(0, 1).fill_(9.0);  // every row sees it: they are one row
    CHECK(values(row) == std::vector<float>{0, 9, 2, 3});
    CHECK(values(v)[1] == 9.0f);
    CHECK_THROWS_AS(iota({2}).expand({3}), Error);
  }
  SUBCASE("flatten") {
    Tensor v = base.flatten(1);
    CHECK(v.shape() == Shape{2, 12});
    CHECK(v.storage() == base.storage());
    CHECK(base.flatten().shape() == Shape{24});
    CHECK(base.flatten(0, 1).shape() == Shape{6, 4});
    CHECK(scalar_tensor(3.0).flatten().shape() == Shape{1});
    check_write_through(base, v.select(0, 1), 12);
  }
}

TEST_CASE("contiguous() returns the same tensor when contiguous and copies otherwise") {
  Tensor a = iota({3, 4});
  CHECK(a.contiguous().is_same(a));
  Tensor t = a.t();
  Tensor c = t.contiguous();
  CHECK_FALSE(c.is_same(t));
  CHECK(c.is_contiguous());
  CHECK(c.storage() != a.storage());
  CHECK(c.strides() == Shape{3, 1});
  CHECK(values(c) == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  // Size-1 dims do not break contiguity, whatever their stride.
  CHECK(a.narrow(0, 1, 1).is_contiguous());
  CHECK(a.unsqueeze(0).is_contiguous());
  CHECK_FALSE(a.narrow(1, 0, 2).is_contiguous());
}

TEST_CASE("reshape copies only when the strides demand it") {
  Tensor a = iota({2, 3, 4});
  CHECK(a.reshape({4, 6}).storage() == a.storage());
  CHECK(a.reshape({-1}).storage() == a.storage());
  // A narrowed last dim cannot be merged with its neighbour without a copy...
  Tensor n = a.narrow(2, 0, 2);
  Tensor r = n.reshape({12});
  CHECK(r.storage() != a.storage());
  CHECK(values(r) == std::vector<float>{0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21});
  // ...but the untouched leading dims can be.
  CHECK(n.reshape({6, 2}).storage() == a.storage());
  CHECK(n.reshape({6, 2}).strides() == Shape{4, 1});
  // A transposed tensor can be split along a dim, not merged across the transposition.
  Tensor t = a.transpose(1, 2);  // (2, 4, 3), strides (12, 1, 4)
  CHECK(t.reshape({2, 2, 2, 3}).storage() == a.storage());
  CHECK(t.reshape({2, 2, 2, 3}).strides() == Shape{12, 2, 1, 4});
  CHECK(t.reshape({8, 3}).storage() != a.storage());
  CHECK(values(t.reshape({8, 3})) == values(t.contiguous()));
  CHECK_THROWS_AS(a.reshape({5, -1}), Error);
  CHECK_THROWS_AS(a.reshape({-1, -1}), Error);
}

TEST_CASE("view on incompatible strides fails and says to use reshape") {
  Tensor t = iota({2, 3}).t();
  CHECK_THROWS_WITH_AS(t.view({6}),
                       "[view] shape (6,) is not compatible with the input's size (3, 2) and strides (1, 3); "
                       "use reshape() (which copies when needed)",
                       Error);
  CHECK_THROWS_WITH_AS(iota({2, 3}).view({4, 2}),
                       "[view] shape (4, 2) is invalid for input of shape (2, 3) (6 elements)", Error);
}

TEST_CASE("in-place writes bump the version counter every view shares") {
  Tensor a = zeros({2, 3});
  Tensor row = a.select(0, 1);
  Tensor t = a.t();
  const uint64_t v0 = a.version();
  CHECK(row.version() == v0);
  row.add_(1.0);
  CHECK(a.version() == v0 + 1);
  CHECK(t.version() == v0 + 1);
  CHECK(values(a) == std::vector<float>{0, 0, 0, 1, 1, 1});
  t.mul_(2.0);
  row.fill_(5.0);
  a.zero_();
  t.copy_(ones({3, 2}));
  a.clamp_(0.0, 0.5);
  CHECK(row.version() == v0 + 6);
  CHECK(values(a) == std::vector<float>(6, 0.5f));
  // A detached alias shares the counter too; a clone does not.
  Tensor d = a.detach();
  Tensor c = a.clone();
  d.add_(1.0);
  CHECK(a.version() == v0 + 7);
  CHECK(c.version() == 0);
}
