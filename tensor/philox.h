// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011): a
// counter-based generator. Each 128-bit counter and 64-bit key give four independent 32-bit
// words, so element i of a random tensor can be computed from (key, i) alone, by any thread, in
// any order. That is what makes weft's dropout masks the same on the CPU and on the GPU bit for
// bit, and independent of the GPU's launch shape (cuRAND's numbers, and PyTorch's, depend on it).
//
// Note [Philox streams]: a random op draws one 64-bit key from its Generator. Element i then uses
// word i % 4 of philox(counter = (i / 4 as a 64-bit number in words 0-1, 0, 0), key). The
// uniform of a word is its top 24 bits times 2^-24, in [0, 1) and exact in float32.
// Tested against the Random123 known-answer vectors (tests/tensor/test_philox.cpp).
#pragma once

#include <cstdint>

#include "tensor/host_device.h"

namespace weft::detail {

struct PhiloxBlock {
  uint32_t w[4];
};

WEFT_HD inline void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product);
}

// Ten rounds of Philox4x32 on `counter` under `key`.
WEFT_HD inline PhiloxBlock philox4x32_10(PhiloxBlock counter, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMultiplier0 = 0xD2511F53u, kMultiplier1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t* c = counter.w;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += kWeyl0;
      key1 += kWeyl1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kMultiplier0, c[0], hi0, lo0);
    philox_mulhilo(kMultiplier1, c[2], hi1, lo1);
    const PhiloxBlock next{{hi1 ^ c[1] ^ key0, lo1, hi0 ^ c[3] ^ key1, lo0}};
    counter = next;
  }
  return counter;
}

// The four words that elements 4·group … 4·group + 3 of the stream `key` use.
WEFT_HD inline PhiloxBlock philox_group(uint64_t key, uint64_t group) {
  const PhiloxBlock counter{{static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32), 0u, 0u}};
  return philox4x32_10(counter, static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
}

// Word → uniform in [0, 1): its top 24 bits, exactly representable in float32.
WEFT_HD inline float philox_uniform(uint32_t word) { return static_cast<float>(word >> 8) * (1.0f / 16777216.0f); }

// The uniform of element i of the stream `key` (Note [Philox streams]).
WEFT_HD inline float philox_uniform_at(uint64_t key, uint64_t i) {
  return philox_uniform(philox_group(key, i / 4).w[i % 4]);
}

}  // namespace weft::detail
