// xoshiro256** (Blackman & Vigna) seeded by splitmix64; Box–Muller for normals, keeping the
// second sample of each pair.
#include "tensor/generator.h"

#include <bit>
#include <cmath>
#include <numbers>

namespace weft {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

void Generator::manual_seed(uint64_t seed) {
  seed_ = seed;
  uint64_t x = seed;
  for (auto& word : s_) word = splitmix64(x);
  has_spare_normal_ = false;
  spare_normal_ = 0.0;
}

uint64_t Generator::next_u64() {
  const uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = std::rotl(s_[3], 45);
  return result;
}

double Generator::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Generator::normal() {
  if (has_spare_normal_) {
    has_spare_normal_ = false;
    return spare_normal_;
  }
  const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
  const double u2 = uniform();
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  spare_normal_ = radius * std::sin(angle);
  has_spare_normal_ = true;
  return radius * std::cos(angle);
}

uint64_t Generator::below(uint64_t n) {
  // Rejection sampling on the top of the range keeps every value equally likely.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = next_u64();
  } while (x >= limit);
  return x % n;
}

std::array<uint64_t, 6> Generator::state() const {
  // A pending spare normal is part of the state: without it a restored stream would differ.
  return {s_[0], s_[1], s_[2], s_[3], has_spare_normal_ ? 1ull : 0ull,
          std::bit_cast<uint64_t>(spare_normal_)};
}

void Generator::set_state(const std::array<uint64_t, 6>& state) {
  for (int i = 0; i < 4; ++i) s_[i] = state[i];
  has_spare_normal_ = state[4] != 0;
  spare_normal_ = std::bit_cast<double>(state[5]);
}

Generator& default_generator() {
  static Generator generator;
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace weft
