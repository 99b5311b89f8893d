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
  for (int t = 0; t < kTiles && ours; ++t)
    ours = current.rows[t] == kRows && current.bytes_per_row[t] == kBytesPerRow;
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

namespace {

constexpr int64_t kBlock = 32;  // rows and 4-byte columns of the four C tiles together

void load_block(const char* p, int64_t row_bytes) {
  memory_barrier();  // _tile_loadd does not declare what it reads either
  _tile_loadd(0, p, row_bytes);
  _tile_loadd(1, p + 64, row_bytes);
  _tile_loadd(2, p + 16 * row_bytes, row_bytes);
  _tile_loadd(3, p + 16 * row_bytes + 64, row_bytes);
}

void store_block(char* p, int64_t row_bytes) {
  _tile_stored(0, p, row_bytes);
  _tile_stored(1, p + 64, row_bytes);
  _tile_stored(2, p + 16 * row_bytes, row_bytes);
  _tile_stored(3, p + 16 * row_bytes + 64, row_bytes);
}

}  // namespace

void amx_load_c(const void* c, int64_t row_bytes, int64_t rows, int64_t cols) {
  const auto* p = static_cast<const char*>(c);
  if (rows == kBlock && cols == kBlock) return load_block(p, row_bytes);
  alignas(64) char padded[kBlock * kBlock * 4] = {};
  for (int64_t r = 0; r < rows; ++r)
    __builtin_memcpy(padded + r * kBlock * 4, p + r * row_bytes, static_cast<size_t>(cols) * 4);
  load_block(padded, kBlock * 4);
}

void amx_store_c(void* c, int64_t row_bytes, int64_t rows, int64_t cols) {
  auto* p = static_cast<char*>(c);
  if (rows == kBlock && cols == kBlock) return store_block(p, row_bytes);
  alignas(64) char padded[kBlock * kBlock * 4];
  store_block(padded, kBlock * 4);
  for (int64_t r = 0; r < rows; ++r)
    __builtin_memcpy(p + r * row_bytes, padded + r * kBlock * 4, static_cast<size_t>(cols) * 4);
}

}  // namespace weft::detail
