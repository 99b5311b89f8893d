// Seeded random numbers. A Generator is a xoshiro256** stream seeded through splitmix64, so a
// seed gives the same numbers on every platform and compiler (the standard library's
// distributions do not promise that). Normal samples use Box–Muller on two uniforms.
//
// Random factories take an optional Generator*; without one they use the process-wide default
// generator, which manual_seed() resets. The default generator is shared by all threads and is
// not synchronised: seed and draw from one thread, or give each thread its own Generator.
#pragma once

#include <array>
#include <cstdint>

namespace weft {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0x5EEDull) { manual_seed(seed); }
  void manual_seed(uint64_t seed);
  uint64_t seed() const { return seed_; }

  uint64_t next_u64();
  double uniform();          // [0, 1) with 53 random bits
  double normal();           // standard normal
  uint64_t below(uint64_t n);  // uniform in [0, n), unbiased

  // The whole state, for checkpoints that must resume bit for bit.
  std::array<uint64_t, 6> state() const;
  void set_state(const std::array<uint64_t, 6>& state);

 private:
  uint64_t seed_ = 0;
  uint64_t s_[4] = {};
  bool has_spare_normal_ = false;
  double spare_normal_ = 0.0;
};

Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace weft
