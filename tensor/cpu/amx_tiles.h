// The AMX tile configuration every weft AMX kernel uses, shared by their kernel units
// (Note [ISA kernel units] in tensor/cpu/simd.h). Plain declarations.
//
// An AMX thread must load a tile configuration (LDTILECFG) before any tile instruction; weft's
// kernels all use palette 1 with the eight tiles at their largest, 16 rows of 64 bytes, and split
// them the same way (C: 0-3, A: 4-5, B: 6-7).
#pragma once

#include <cstdint>

namespace weft::detail {

// Loads the configuration unless this thread has it already: reading the current one back
// (STTILECFG, ~35 cycles alone, and it waits for tile instructions in flight) is cheaper than
// loading it (~100 cycles), but is still for once per block of tiles, not per tile. Call only
// where cpu_isa() is Amx.
void amx_configure_tiles();

// Returns the thread's tiles to their initial state, which a context switch saves for free.
void amx_release_tiles();

// C tiles 0-3 from / to the rows × cols corner (at most 32 × 32) of a block of 4-byte values
// (int32 or float) at c, rows row_bytes apart: tile 0 the top-left 16 × 16, 1 top-right, 2
// bottom-left, 3 bottom-right. A whole block goes straight between C and the tiles; a partial one
// through a zero-padded copy, where a tile would reach past C. amx_load_c orders the caller's
// stores to C before the tile loads.
void amx_load_c(const void* c, int64_t row_bytes, int64_t rows, int64_t cols);
void amx_store_c(void* c, int64_t row_bytes, int64_t rows, int64_t cols);

}  // namespace weft::detail
