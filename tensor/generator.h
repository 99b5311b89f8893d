// Seeded random numbers. A Generator is a xoshiro256** stream seeded through splitmix64, so a
// seed gives the same numbers on every platform and compiler (the standard library's
// distributions do not promise that). Normal samples use Box–Muller on two uniforms.
//
// Random factories take an optional Generator*; without one they use the process-wide default
// generator, which manual_seed() resets.
//
// Note [Generator locking]: a Generator may be shared by threads, as libtorch's generators are:
// every member function takes the generator's lock, and a random factory fills a whole tensor
// under one lock (draws()), so each call gets a contiguous run of the stream. Threads drawing
// from one generator at once therefore get numbers that are each exactly what some sequential
// order of their calls would give; which order is up to the scheduler. For reproducible numbers
// per thread, give each thread its own Generator.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

namespace weft {

class Generator {
  // The unsynchronised stream; Generator guards it with its mutex.
  struct Stream {
    uint64_t seed = 0;
    uint64_t s[4] = {};
    bool has_spare_normal = false;
    double spare_normal = 0.0;

    void reseed(uint64_t new_seed);
    uint64_t next_u64();
    double uniform();            // [0, 1) with 53 random bits
    double normal();             // standard normal
    uint64_t below(uint64_t n);  // uniform in [0, n), unbiased
  };

 public:
  explicit Generator(uint64_t seed = 0x5EEDull) { stream_.reseed(seed); }
  // Copies the state, as it is at the moment of the copy.
  Generator(const Generator& other);
  Generator& operator=(const Generator& other);

  void manual_seed(uint64_t seed);
  uint64_t seed() const;

  // One number each, under the lock.
  uint64_t next_u64();
  double uniform();          // [0, 1) with 53 random bits
  double normal();           // standard normal
  uint64_t below(uint64_t n);  // uniform in [0, n), unbiased

  // Many numbers under one lock, held until the Draws is gone (Note [Generator locking]). Draw
  // only through it while it lives: the generator's own members would wait for the lock.
  class Draws {
   public:
    uint64_t next_u64() { return stream_.next_u64(); }
    double uniform() { return stream_.uniform(); }
    double normal() { return stream_.normal(); }
    uint64_t below(uint64_t n) { return stream_.below(n); }

   private:
    friend class Generator;
    explicit Draws(Generator& g) : lock_(g.mutex_), stream_(g.stream_) {}
    std::unique_lock<std::mutex> lock_;
    Stream& stream_;
  };
  Draws draws() { return Draws(*this); }

  // The whole state, for checkpoints that must resume bit for bit.
  std::array<uint64_t, 6> state() const;
  void set_state(const std::array<uint64_t, 6>& state);

 private:
  mutable std::mutex mutex_;
  Stream stream_;
};

Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace weft
