// CPU kernels of sort and topk (tensor/selection_kernels.h) on (outer, n, inner) views: each line
// x[o, :, i] is read as compute values (narrow floats widened to float32, exactly) and its
// positions ordered under Note [Order of values]; the front-ends gather the values afterwards.
//
// sort orders (value, position) pairs with std::sort under a total order whose last key is the
// position, which makes it stable without std::stable_sort's buffer. topk of a few out of many (a
// language model's vocabulary, k of a few dozen out of ~50k) keeps a heap of the k best seen so
// far: almost every element is rejected by a comparison with the heap's worst, done a block at a
// time, so a row costs about n vector comparisons and no copy. When k is a sizable part of n,
// nth_element over all the pairs is cheaper. Lines are split over the pool when there are many.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "tensor/cpu/convert.h"
#include "tensor/cpu/loops.h"
#include "tensor/selection_kernels.h"

namespace weft::detail {
namespace {

// a before b in ascending order (Note [Order of values]): NaN above everything, NaNs equal.
template <class C>
bool ascending(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) return a < b || (b != b && a == a);
  else return a < b;
}

template <class C>
struct Item {
  C value;
  int64_t index;
};

// The order a kernel wants first: ascending or descending values, then increasing position.
template <class C>
struct Before {
  bool descending;
  bool values(C a, C b) const { return descending ? ascending(b, a) : ascending(a, b); }
  bool operator()(const Item<C>& a, const Item<C>& b) const {
    if (values(a.value, b.value)) return true;
    if (values(b.value, a.value)) return false;
    return a.index < b.index;
  }
};

// The type a line is compared in: the compute type, with bool as uint8_t (false < true), which
// std::vector stores as plain elements.
template <class S>
using Key = std::conditional_t<std::is_same_v<S, bool>, uint8_t, Compute<S>>;

// Line (o, i) of a contiguous (outer, n, inner) array as keys: the line itself when it is
// contiguous and stored as its key type, else converted into `buffer`.
template <class S>
const Key<S>* line_values(const S* x, int64_t o, int64_t i, int64_t n, int64_t inner, std::vector<Key<S>>& buffer) {
  const S* start = x + o * n * inner + i;
  if constexpr (std::is_same_v<S, Key<S>>) {
    if (inner == 1) return start;
  }
  buffer.resize(static_cast<size_t>(n));
  if constexpr (kIsNarrowFloat<S>) {
    const auto stride = static_cast<int64_t>(inner * sizeof(S));
    for (int64_t b = 0; b < n; b += kChunk)
      load_chunk<S>(reinterpret_cast<const char*>(start) + b * stride, stride, std::min(kChunk, n - b),
                    buffer.data() + b);
  } else {
    for (int64_t j = 0; j < n; ++j) buffer[static_cast<size_t>(j)] = static_cast<Key<S>>(start[j * inner]);
  }
  return buffer.data();
}

// Calls line(o, i, scratch) for every line of an (outer, n, inner) array, lines split over the
// pool in contiguous blocks when the whole array is worth it; each block has its own scratch.
template <class Scratch, class Line>
void for_each_line(int64_t outer, int64_t n, int64_t inner, Line line) {
  const int64_t lines = outer * inner;
  const int64_t blocks = lines * n >= kParallelGrain ? std::min<int64_t>(num_threads(), lines) : 1;
  parallel_for(blocks, [&](int64_t b) {
    Scratch scratch;
    for (int64_t l = lines * b / blocks; l < lines * (b + 1) / blocks; ++l) line(l / inner, l % inner, scratch);
  });
}

struct Geometry {
  int64_t outer, n, inner;
};

Geometry geometry_of(const Tensor& x, const Tensor& indices, const char* op) {
  WEFT_CHECK(x.dim() == 3 && x.is_contiguous() && indices.dim() == 3 && indices.is_contiguous() &&
                 indices.dtype() == kInt64,
             "[", op, "] internal: expected contiguous 3-D operands and int64 indices, got ", x.shape(), " and ",
             indices.shape());
  return {x.size(0), x.size(1), x.size(2)};
}

// The k best items of v[0, n) (the largest or the smallest), best first when `sorted`, else in
// increasing position.
template <bool kLargest, class C>
void select_best(const C* v, int64_t n, int64_t k, bool sorted, std::vector<Item<C>>& items) {
  const Before<C> before{kLargest};
  items.clear();
  if (k * 16 <= n) {
    // A heap whose front is the worst of the best k so far (std heaps put the largest under the
    // comparison first, and `before` ranks the best lowest). Later positions lose ties, so an
    // element enters only when its value is strictly better than the front's.
    for (int64_t j = 0; j < k; ++j) items.push_back({v[j], j});
    std::make_heap(items.begin(), items.end(), before);
    for (int64_t j = k; j < n;) {
      // Blocks where nothing can enter are skipped after one vectorisable pass: !(x <= t) holds
      // for every x better than t (NaN included), and for some that are not, which the exact
      // test below then turns away. About 2.5x faster on rows of random logits.
      const int64_t end = std::min(n, j + 32);
      const C threshold = items.front().value;
      int hits = 0;
      for (int64_t m = j; m < end; ++m) hits += kLargest ? !(v[m] <= threshold) : !(v[m] >= threshold);
      if (hits == 0) {
        j = end;
        continue;
      }
      for (; j < end; ++j) {
        if (!before.values(v[j], items.front().value)) continue;
        std::pop_heap(items.begin(), items.end(), before);
        items.back() = {v[j], j};
        std::push_heap(items.begin(), items.end(), before);
      }
    }
  } else {
    for (int64_t j = 0; j < n; ++j) items.push_back({v[j], j});
    std::nth_element(items.begin(), items.begin() + (k - 1), items.end(), before);
    items.resize(static_cast<size_t>(k));
  }
  if (sorted) std::sort(items.begin(), items.end(), before);
  else std::sort(items.begin(), items.end(), [](const Item<C>& a, const Item<C>& b) { return a.index < b.index; });
}

// A whole line ordered by `before`. topk's selection gives a prefix of this order, which
// tests/tensor/test_sorting.cpp checks on both of its paths.
template <class C>
void sort_line(const C* v, int64_t n, Before<C> before, std::vector<Item<C>>& items) {
  items.clear();
  for (int64_t j = 0; j < n; ++j) items.push_back({v[j], j});
  std::sort(items.begin(), items.end(), before);
}

template <class C>
struct LineScratch {
  std::vector<C> values;
  std::vector<Item<C>> items;
};

}  // namespace

void cpu_sort(const SortLaunch& a) {
  const auto g = geometry_of(a.x, a.indices, "sort");
  int64_t* out = a.indices.data<int64_t>();
  WEFT_DISPATCH_ALL(a.x.dtype(), S, {
    using C = Key<S>;
    const S* x = static_cast<const S*>(a.x.data_ptr());
    for_each_line<LineScratch<C>>(g.outer, g.n, g.inner, [&](int64_t o, int64_t i, LineScratch<C>& s) {
      const C* v = line_values(x, o, i, g.n, g.inner, s.values);
      sort_line(v, g.n, Before<C>{a.descending}, s.items);
      int64_t* dst = out + o * g.n * g.inner + i;
      for (int64_t j = 0; j < g.n; ++j) dst[j * g.inner] = s.items[static_cast<size_t>(j)].index;
    });
  });
}

void cpu_topk(const TopkLaunch& a) {
  const auto g = geometry_of(a.x, a.indices, "topk");
  const int64_t k = a.indices.size(1);
  WEFT_CHECK(k >= 0 && k <= g.n, "[topk] internal: k = ", k, " out of [0, ", g.n, "]");
  if (k == 0) return;
  int64_t* out = a.indices.data<int64_t>();
  WEFT_DISPATCH_ALL(a.x.dtype(), S, {
    using C = Key<S>;
    const S* x = static_cast<const S*>(a.x.data_ptr());
    for_each_line<LineScratch<C>>(g.outer, g.n, g.inner, [&](int64_t o, int64_t i, LineScratch<C>& s) {
      const C* v = line_values(x, o, i, g.n, g.inner, s.values);
      if (a.largest) select_best<true>(v, g.n, k, a.sorted, s.items);
      else select_best<false>(v, g.n, k, a.sorted, s.items);
      int64_t* dst = out + o * k * g.inner + i;
      for (int64_t j = 0; j < k; ++j) dst[j * g.inner] = s.items[static_cast<size_t>(j)].index;
    });
  });
}

}  // namespace weft::detail
