// CPU kernel of multinomial (tensor/selection_kernels.h): rows of non-negative weights in,
// category indices out. Weights are read as compute values (narrow floats widened to float32) and
// summed in float64; rows are split over the pool when there are many.
//
// Note [Multinomial draws]: the random numbers come from the counter-based Philox stream of the
// `key` the front-end drew from its Generator (Note [Philox streams] in tensor/philox.h), two
// words per draw for 53 random bits: draw d uses words 2·(d % 2) and 2·(d % 2) + 1 of group d / 2.
// So the result depends on the key and the shapes only, not on the thread count.
// - One sample, or sampling with replacement: inverse CDF. Sample s of row r takes draw
//   d = r·num_samples + s, u in [0, 1), and returns the first category whose running sum of
//   weights exceeds u·total. A zero-weight category never has a running sum above its
//   predecessor's, so it is never chosen; where u·total rounds up to the total, the last category
//   of non-zero weight is returned.
// - Several samples without replacement: the exponential race, which orders categories exactly as
//   drawing one at a time and removing it does. Category c of row r takes draw d = r·C + c and
//   the exponential time E_c = −log(1 − u); categories of non-zero weight are ranked by
//   log(w_c) − log(E_c), largest first (ties to the lower index), and the first num_samples of
//   that ranking are the samples, in order.
#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/cpu/loops.h"
#include "tensor/cpu/rows.h"
#include "tensor/philox.h"
#include "tensor/selection_kernels.h"

namespace weft::detail {
namespace {

// Draw d of the stream `key` as a uniform double in [0, 1) with 53 random bits.
double uniform53(uint64_t key, uint64_t d) {
  const PhiloxBlock block = philox_group(key, d / 2);
  const uint32_t* w = block.w + 2 * (d % 2);
  const uint64_t bits = (static_cast<uint64_t>(w[0] >> 5) << 26) | (w[1] >> 6);
  return static_cast<double>(bits) * 0x1p-53;
}

// Checks row r's weights and returns their sum and how many are non-zero.
struct RowTotal {
  double total = 0.0;
  int64_t positive = 0;
  int64_t last_positive = -1;
};

template <class C>
RowTotal check_row(const C* w, int64_t categories, int64_t r) {
  RowTotal t;
  for (int64_t c = 0; c < categories; ++c) {
    const double v = static_cast<double>(w[c]);
    WEFT_CHECK(std::isfinite(v) && v >= 0.0,
               "[multinomial] probability tensor contains either `inf`, `nan` or element < 0: got ", v, " in row ", r,
               ", category ", c);
    t.total += v;
    if (v > 0.0) {
      ++t.positive;
      t.last_positive = c;
    }
  }
  WEFT_CHECK(t.total > 0.0, "[multinomial] invalid multinomial distribution (sum of probabilities <= 0) in row ", r);
  WEFT_CHECK(std::isfinite(t.total), "[multinomial] the weights of row ", r, " sum beyond the float64 range");
  return t;
}

template <class C>
void inverse_cdf(const C* w, int64_t categories, const RowTotal& t, uint64_t key, uint64_t first_draw,
                 int64_t samples, int64_t* out, std::vector<double>& cdf) {
  cdf.resize(static_cast<size_t>(categories));
  double running = 0.0;
  for (int64_t c = 0; c < categories; ++c) cdf[static_cast<size_t>(c)] = running += static_cast<double>(w[c]);
  for (int64_t s = 0; s < samples; ++s) {
    const double target = uniform53(key, first_draw + static_cast<uint64_t>(s)) * t.total;
    const auto c = static_cast<int64_t>(std::upper_bound(cdf.begin(), cdf.end(), target) - cdf.begin());
    out[s] = c < categories ? c : t.last_positive;
  }
}

struct Racer {
  double key;
  int64_t index;
};

template <class C>
void exponential_race(const C* w, int64_t categories, uint64_t key, uint64_t first_draw, int64_t samples,
                      int64_t* out, std::vector<Racer>& racers) {
  racers.clear();
  for (int64_t c = 0; c < categories; ++c) {
    if (!(w[c] > C(0))) continue;
    const double u = uniform53(key, first_draw + static_cast<uint64_t>(c));
    const double time = -std::log1p(-u);
    racers.push_back({std::log(static_cast<double>(w[c])) - std::log(time), c});
  }
  const auto first = [](const Racer& a, const Racer& b) { return a.key > b.key || (a.key == b.key && a.index < b.index); };
  std::partial_sort(racers.begin(), racers.begin() + samples, racers.end(), first);
  for (int64_t s = 0; s < samples; ++s) out[s] = racers[static_cast<size_t>(s)].index;
}

}  // namespace

void cpu_multinomial(const MultinomialLaunch& a) {
  WEFT_CHECK(a.probs.dim() == 2 && a.probs.is_contiguous() && a.out.dim() == 2 && a.out.dtype() == kInt64 &&
                 a.out.size(0) == a.probs.size(0),
             "[multinomial] internal: expected contiguous (rows, C) weights and (rows, n) int64 out, got ",
             a.probs.shape(), " and ", a.out.shape());
  const int64_t rows = a.probs.size(0), categories = a.probs.size(1), samples = a.out.size(1);
  int64_t* out = a.out.data<int64_t>();
  visit_floating_storage(a.probs.dtype(), "multinomial", [&](auto tag) {
    using S = decltype(tag);
    using C = Compute<S>;
    const S* probs = static_cast<const S*>(a.probs.data_ptr());
    parallel_for_if(rows > 1 && rows * categories >= kParallelGrain, rows, [&](int64_t r) {
      std::vector<C> buffer;
      const C* w = row_values(probs, r, categories, buffer);
      const RowTotal t = check_row(w, categories, r);
      const auto row = static_cast<uint64_t>(r);
      if (a.replacement || samples == 1) {
        std::vector<double> cdf;
        inverse_cdf(w, categories, t, a.key, row * static_cast<uint64_t>(samples), samples, out + r * samples, cdf);
      } else {
        WEFT_CHECK(t.positive >= samples, "[multinomial] invalid multinomial distribution (with replacement=False, "
                                          "not enough categories of non-zero weight to sample): row ", r, " has ",
                   t.positive, ", num_samples is ", samples);
        std::vector<Racer> racers;
        exponential_race(w, categories, a.key, row * static_cast<uint64_t>(categories), samples, out + r * samples,
                         racers);
      }
    });
  });
}

}  // namespace weft::detail
