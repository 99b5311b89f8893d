// Linear weights packed once for inference (CPU, bfloat16, AVX-512 BF16 or AMX): an opt-in cache.
//
// A bfloat16 product on the CPU packs its B into the K-pair panels its kernels read (Note [bf16
// K-pair panels] in tensor/cpu/gemm/packing.h) on every call: for linear at a prompt's batch, a
// full pass over the weight, about a third of the product's time. With a limit set, linear(x, W,
// b) on more than one row of bfloat16 keeps W packed — a W that does not require grad and that
// linear gets as it is (not a cast copy) — and reuses the packed copy for every later call on the
// same W. A copy is dropped and made again when W changes (its storage's version moves, its data
// moves), and is never used for another level (set_cpu_isa) or after W is freed. One row (a
// decode step) reads W in place and never uses the cache.
//
// Memory: each packed copy is the size of its weight (plus padding to whole panels), held beside
// it, so the cache is off until a limit is set: a model's packed weights count against peak memory
// as a second copy of its linears. Weights past the limit are computed as without the cache.
#pragma once

#include <cstdint>

namespace weft {

// Bytes the cache may hold; 0 (the default) turns it off. A limit below what is held drops every copy.
void set_packed_weight_limit(int64_t bytes);
int64_t packed_weight_limit();
// Bytes of packed copies held now.
int64_t packed_weight_bytes();
// Drops every packed copy.
void clear_packed_weights();

}  // namespace weft
