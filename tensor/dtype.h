// Element types: the one table every dtype fact is generated from.
//
// WEFT_DTYPES below is the table, one row per dtype: its enum name, C++ storage type, names, kind,
// promotion rank, and, for narrow floats, the two functions of tensor/float_formats.h that widen its
// bits to float32 and round float32 back. Everything else is generated from it: the DType enum and
// its kFloat32-style constants, the traits array, the storage type <-> dtype maps, visit_dtype (the
// one runtime -> compile-time dispatch, which the kernels' dispatch macros wrap), to_float /
// from_float for narrow storage types, and the explicit instantiations of templates over dtypes.
// Adding a dtype is one row plus, for a new narrow format, its two conversion functions.
//
// Narrow floating types (float16, bfloat16, the two float8s) are storage formats: kernels widen
// them to float32 to compute and round back on store. A sibling table for block-quantized formats
// (QuantFormat: block size, bytes per block, reference quantize/dequantize) lives in precision/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>

#include "tensor/float_formats.h"

// X(enum, storage type, name as PyTorch spells it, as the safetensors header spells it, kind,
//   promotion rank within its kind, narrow float -> float32, float32 -> narrow float)
#define WEFT_DTYPES(X)                                                                                              \
  X(Float64, double, "float64", "F64", Floating, 40, -, -)                                                         \
  X(Float32, float, "float32", "F32", Floating, 30, -, -)                                                          \
  X(Float16, Half, "float16", "F16", NarrowFloating, 20, half_to_float, float_to_half)                            \
  X(BFloat16, BFloat16, "bfloat16", "BF16", NarrowFloating, 20, bfloat16_to_float, float_to_bfloat16)             \
  X(Float8E4M3FN, Float8E4M3FN, "float8_e4m3fn", "F8_E4M3", NarrowFloating, 10, fp8_e4m3fn_to_float,             \
    float_to_fp8_e4m3fn)                                                                                          \
  X(Float8E5M2, Float8E5M2, "float8_e5m2", "F8_E5M2", NarrowFloating, 10, fp8_e5m2_to_float, float_to_fp8_e5m2) \
  X(Int8, int8_t, "int8", "I8", SignedInteger, 10, -, -)                                                           \
  X(UInt8, uint8_t, "uint8", "U8", UnsignedInteger, 10, -, -)                                                      \
  X(Int32, int32_t, "int32", "I32", SignedInteger, 30, -, -)                                                       \
  X(Int64, int64_t, "int64", "I64", SignedInteger, 40, -, -)                                                       \
  X(Bool, bool, "bool", "BOOL", Boolean, 0, -, -)

namespace weft {

enum class DTypeKind : uint8_t { Floating, NarrowFloating, SignedInteger, UnsignedInteger, Boolean };

enum class DType : uint8_t {
#define WEFT_DTYPE_ENUM(E, ...) E,
  WEFT_DTYPES(WEFT_DTYPE_ENUM)
#undef WEFT_DTYPE_ENUM
};

#define WEFT_DTYPE_COUNT(...) +1
inline constexpr int kNumDTypes = 0 WEFT_DTYPES(WEFT_DTYPE_COUNT);
#undef WEFT_DTYPE_COUNT

#define WEFT_DTYPE_CONSTANT(E, ...) inline constexpr DType k##E = DType::E;
WEFT_DTYPES(WEFT_DTYPE_CONSTANT)
#undef WEFT_DTYPE_CONSTANT

struct DTypeTraits {
  DType dtype;
  std::string_view name;              // as PyTorch spells it: "float32", "bfloat16", ...
  std::string_view safetensors_name;  // as the safetensors header spells it: "F32", "BF16", ...
  size_t itemsize;
  DTypeKind kind;
  bool is_floating;      // narrow or not
  bool is_integral;      // integers, not bool
  bool is_signed;
  bool is_narrow_float;  // stored narrow, computed in float32
  int promotion_rank;    // within a kind, the wider type has the higher rank
};

constexpr DTypeTraits make_dtype_traits(DType d, std::string_view name, std::string_view safetensors_name,
                                        size_t itemsize, DTypeKind kind, int rank) {
  const bool floating = kind == DTypeKind::Floating || kind == DTypeKind::NarrowFloating;
  const bool integral = kind == DTypeKind::SignedInteger || kind == DTypeKind::UnsignedInteger;
  return {d,        name,     safetensors_name, itemsize, kind, floating, integral,
          floating || kind == DTypeKind::SignedInteger, kind == DTypeKind::NarrowFloating, rank};
}

inline constexpr DTypeTraits kDTypeTraits[kNumDTypes] = {
#define WEFT_DTYPE_TRAITS(E, T, name, st, kind, rank, ...) \
  make_dtype_traits(DType::E, name, st, sizeof(T), DTypeKind::kind, rank),
    WEFT_DTYPES(WEFT_DTYPE_TRAITS)
#undef WEFT_DTYPE_TRAITS
};

constexpr const DTypeTraits& traits(DType d) { return kDTypeTraits[static_cast<int>(d)]; }
constexpr std::string_view dtype_name(DType d) { return traits(d).name; }
constexpr size_t itemsize(DType d) { return traits(d).itemsize; }
constexpr bool is_floating(DType d) { return traits(d).is_floating; }
constexpr bool is_integral(DType d) { return traits(d).is_integral; }
constexpr bool is_narrow_float(DType d) { return traits(d).is_narrow_float; }

// The dtype a binary op computes in, following PyTorch: bool < integers < floats; within floats
// the wider wins, float16 with bfloat16 meets at float32; int8 with uint8 meets at int16, which
// weft lacks, so at int32. Float8 types do not promote with anything but themselves.
DType promote_types(DType a, DType b);

// Parses "float32", "bf16", "F32", ... Throws weft::Error naming the accepted spellings.
DType dtype_from_name(std::string_view name);

// How a dtype reads in an error message (tensor/error.h) and on a stream: its name.
void append_to(std::string& out, DType d);
std::ostream& operator<<(std::ostream& os, DType d);

// The C++ storage type of each dtype, and the reverse map.
template <DType D> struct StorageTypeOf;
template <class T> struct DTypeOf;
#define WEFT_DTYPE_STORAGE_MAP(E, T, ...)                                    \
  template <> struct StorageTypeOf<DType::E> { using type = T; };           \
  template <> struct DTypeOf<T> { static constexpr DType value = DType::E; };
WEFT_DTYPES(WEFT_DTYPE_STORAGE_MAP)
#undef WEFT_DTYPE_STORAGE_MAP

template <class T>
inline constexpr bool kIsNarrowFloat = traits(DTypeOf<T>::value).is_narrow_float;

// Narrow storage <-> float32, from each narrow row's two functions; other rows define none.
template <class T> T from_float(float value);
#define WEFT_DTYPE_CODEC_NarrowFloating(T, widen, round)              \
  inline float to_float(T v) { return widen(v.bits); }                \
  template <> inline T from_float<T>(float value) { return T{round(value)}; }
#define WEFT_DTYPE_CODEC_Floating(...)
#define WEFT_DTYPE_CODEC_SignedInteger(...)
#define WEFT_DTYPE_CODEC_UnsignedInteger(...)
#define WEFT_DTYPE_CODEC_Boolean(...)
#define WEFT_DTYPE_CODEC(E, T, name, st, kind, rank, widen, round) WEFT_DTYPE_CODEC_##kind(T, widen, round)
WEFT_DTYPES(WEFT_DTYPE_CODEC)
#undef WEFT_DTYPE_CODEC

// Calls fn(T{}) with T the storage type of d and returns what it returns: the one place a runtime
// dtype becomes a compile-time type. Kernels use it through the WEFT_DISPATCH_* macros.
template <class Fn>
decltype(auto) visit_dtype(DType d, Fn&& fn) {
  switch (d) {
#define WEFT_DTYPE_VISIT(E, T, ...) \
  case DType::E: return std::forward<Fn>(fn)(T{});
    WEFT_DTYPES(WEFT_DTYPE_VISIT)
#undef WEFT_DTYPE_VISIT
  }
  __builtin_unreachable();  // every enumerator has a case
}

}  // namespace weft

// Runs `body` with `T` bound to the storage type of dtype `d`, any dtype.
#define WEFT_DISPATCH_ALL(d, T, ...) \
  ::weft::visit_dtype((d), [&](auto weft_dtype_tag_) { using T = decltype(weft_dtype_tag_); __VA_ARGS__; })

// Expands `X(T)` once per storage type: explicit instantiations of templates over dtypes.
#define WEFT_DTYPE_STORAGE_TYPE(E, T, ...) WEFT_INSTANTIATE_FOR(T)
#define WEFT_INSTANTIATE_FOR_EACH_DTYPE() WEFT_DTYPES(WEFT_DTYPE_STORAGE_TYPE)
