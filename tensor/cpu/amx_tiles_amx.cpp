// The AMX tile configuration (tensor/cpu/amx_tiles.h; ISA kernel unit: Note [ISA kernel units] in
// tensor/cpu/simd.h).
#include "tensor/cpu/amx_tiles.h"
#include "tensor/cpu/simd.h"

namespace weft::detail {
namespace {

constexpr int kTiles = 8;
constexpr int kRows = 16;
constexpr int kBytesPerRow = 64;

// The layout LDTILECFG reads and STTILECFG writes (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t bytes_per_row[16];
  uint8_t rows[16];
};

// GCC 12's _tile_loadconfig and _tile_storeconfig are asm statements that declare only 8 bytes
// of the configuration as read or written (and _tile_loadd none of what it reads), so the other
// stores could be dropped, and reads after could be answered from registers. This barrier keeps
// the order.
void memory_barrier() { __asm__ volatile("" ::: "memory"); }

}  // namespace

void amx_configure_tiles() {
  TileConfig current;
  _tile_storeconfig(&current);
  memory_barrier();
  bool ours = current.palette == 1;
  for (int t = 0; t < kTiles && ours; ++t) ours = current.rows[t] == kRows && current.bytes_per_row[t] == kBytesPerRow;
  if (ours) return;
  TileConfig config = {};
  config.palette = 1;
  for (int t = 0; t < kTiles; ++t) {
    config.rows[t] = kRows;
    config.bytes_per_row[t] = kBytesPerRow;
  }
  memory_barrier();
  _tile_loadconfig(&config);
}

void amx_release_tiles() { _tile_release(); }

void amx_load_c(const void* c, int64_t row_bytes) {
  const auto* p = static_cast<const char*>(c);
  memory_barrier();  // _tile_loadd does not declare what it reads either
  _tile_loadd(0, p, row_bytes);
  _tile_loadd(1, p + 64, row_bytes);
  _tile_loadd(2, p + 16 * row_bytes, row_bytes);
  _tile_loadd(3, p + 16 * row_bytes + 64, row_bytes);
}

void amx_store_c(void* c, int64_t row_bytes) {
  auto* p = static_cast<char*>(c);
  _tile_stored(0, p, row_bytes);
  _tile_stored(1, p + 64, row_bytes);
  _tile_stored(2, p + 16 * row_bytes, row_bytes);
  _tile_stored(3, p + 16 * row_bytes + 64, row_bytes);
}

}  // namespace weft::detail
