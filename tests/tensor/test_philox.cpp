// Philox4x32-10 (tensor/philox.h) against the Random123 known-answer vectors, the layout of a
// stream (Note [Philox streams]), and dropout's mask as a function of the key and the index only,
// which is what makes CPU and CUDA masks bit-identical.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>

#include "tensor/all.h"
#include "tensor/philox.h"

using namespace weft;
using weft::detail::PhiloxBlock;

namespace {

void check_block(const PhiloxBlock& got, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  CHECK(got.w[0] == a);
  CHECK(got.w[1] == b);
  CHECK(got.w[2] == c);
  CHECK(got.w[3] == d);
}

}  // namespace

TEST_CASE("philox4x32-10 gives the Random123 known answers") {
  // kat_vectors: counter (4 words), key (2 words) -> output (4 words).
  check_block(detail::philox4x32_10(PhiloxBlock{{0, 0, 0, 0}}, 0, 0), 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8);
  check_block(detail::philox4x32_10(PhiloxBlock{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff,
                                    0xffffffff),
              0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd);
  check_block(detail::philox4x32_10(PhiloxBlock{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822,
                                    0x299f31d0),
              0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1);
}

TEST_CASE("a philox stream: element i is word i % 4 of the group i / 4, keyed by the 64-bit key") {
  const uint64_t key = 0x0123456789abcdefull;
  const uint64_t group = (uint64_t{1} << 32) + 7;  // the group number spans both counter words
  const PhiloxBlock direct = detail::philox4x32_10(PhiloxBlock{{7, 1, 0, 0}}, 0x89abcdef, 0x01234567);
  const PhiloxBlock words = detail::philox_group(key, group);
  for (int lane = 0; lane < 4; ++lane) {
    CHECK(words.w[lane] == direct.w[lane]);
    const float u = detail::philox_uniform_at(key, 4 * group + static_cast<uint64_t>(lane));
    CHECK(u == static_cast<float>(direct.w[lane] >> 8) / 16777216.0f);
  }
  CHECK(detail::philox_uniform(0xffffffffu) < 1.0f);
  CHECK(detail::philox_uniform(0xffffffffu) == 1.0f - 1.0f / 16777216.0f);
  CHECK(detail::philox_uniform(0x000000ffu) == 0.0f);
}

TEST_CASE("philox uniforms are uniform: mean and a coarse histogram") {
  constexpr int kN = 1 << 16;
  int bins[8] = {};
  double mean = 0;
  for (uint64_t i = 0; i < kN; ++i) {
    const float u = detail::philox_uniform_at(42, i);
    REQUIRE(u >= 0.0f);
    REQUIRE(u < 1.0f);
    mean += u / kN;
    ++bins[static_cast<int>(u * 8)];
  }
  CHECK(mean == doctest::Approx(0.5).epsilon(0.01));  // standard error ≈ 0.0011
  for (int b : bins) CHECK(b == doctest::Approx(kN / 8).epsilon(0.05));
}

TEST_CASE("dropout's mask is philox_uniform_at(key, i) < 1 - p with the generator's next key") {
  for (DType dtype : {kFloat32, kFloat64, kBFloat16}) {
    CAPTURE(dtype);
    const double p = 0.25;
    const Tensor x = ones({3, 37}, dtype);
    Generator gen(7), twin(7);
    const auto y = dropout(x, p, /*training=*/true, &gen).to_vector<double>();
    const uint64_t key = twin.next_u64();
    const double scale = dtype == kFloat64 ? 1.0 / 0.75 : dtype == kFloat32 ? double(1.0f / 0.75f) : 1.3359375;
    for (size_t i = 0; i < y.size(); ++i) {
      CAPTURE(i);
      const bool kept = detail::philox_uniform_at(key, i) < 0.75f;
      CHECK(y[i] == (kept ? scale : 0.0));
    }
  }
}
