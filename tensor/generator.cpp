// xoshiro256** (Blackman & Vigna) seeded by splitmix64; Box–Muller for normals, keeping the
// second sample of each pair. The stream itself is unsynchronised; Generator's members lock
// (Note [Generator locking]).
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

void Generator::Stream::reseed(uint64_t new_seed) {
  seed = new_seed;
  uint64_t x = new_seed;
  for (auto& word : s) word = splitmix64(x);
  has_spare_normal = false;
  spare_normal = 0.0;
}

uint64_t Generator::Stream::next_u64() {
  const uint64_t result = std::rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = std::rotl(s[3], 45);
  return result;
}

double Generator::Stream::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Generator::Stream::normal() {
  if (has_spare_normal) {
    has_spare_normal = false;
    return spare_normal;
  }
  const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
  const double u2 = uniform();
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  spare_normal = radius * std::sin(angle);
  has_spare_normal = true;
  return radius * std::cos(angle);
}

uint64_t Generator::Stream::below(uint64_t n) {
  // Rejection sampling on the top of the range keeps every value equally likely.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = next_u64();
  } while (x >= limit);
  return x % n;
}

Generator::Generator(const Generator& other) {
  const std::lock_guard lock(other.mutex_);
  stream_ = other.stream_;
}

Generator& Generator::operator=(const Generator& other) {
  if (this != &other) {
    const std::scoped_lock lock(mutex_, other.mutex_);
    stream_ = other.stream_;
  }
  return *this;
}

void Generator::manual_seed(uint64_t seed) {
  const std::lock_guard lock(mutex_);
  stream_.reseed(seed);
}

uint64_t Generator::seed() const {
  const std::lock_guard lock(mutex_);
  return stream_.seed;
}

uint64_t Generator::next_u64() { return draws().next_u64(); }
double Generator::uniform() { return draws().uniform(); }
double Generator::normal() { return draws().normal(); }
uint64_t Generator::below(uint64_t n) { return draws().below(n); }

std::array<uint64_t, 6> Generator::state() const {
  const std::lock_guard lock(mutex_);
  // A pending spare normal is part of the state: without it a restored stream would differ.
  return {stream_.s[0], stream_.s[1], stream_.s[2], stream_.s[3], stream_.has_spare_normal ? 1ull : 0ull,
          std::bit_cast<uint64_t>(stream_.spare_normal)};
}

void Generator::set_state(const std::array<uint64_t, 6>& state) {
  const std::lock_guard lock(mutex_);
  for (int i = 0; i < 4; ++i) stream_.s[i] = state[i];
  stream_.has_spare_normal = state[4] != 0;
  stream_.spare_normal = std::bit_cast<double>(state[5]);
}

Generator& default_generator() {
  static Generator generator;
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace weft
