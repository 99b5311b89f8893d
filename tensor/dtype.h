// Element types and the one table of their traits.
//
// Every question about a dtype (its name, size, whether it is floating, how two dtypes promote)
// is answered from kDTypeTraits, so adding a dtype means adding one row. Narrow floating types
// (float16, bfloat16, the two float8s) are storage formats: kernels widen them to float32 to
// compute and round back on store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string_view>

#include "tensor/float_formats.h"

namespace weft {

enum class DType : uint8_t {
  Float64,
  Float32,
  Float16,
  BFloat16,
  Float8E4M3FN,
  Float8E5M2,
  Int8,
  UInt8,
  Int32,
  Int64,
  Bool,
};
inline constexpr int kNumDTypes = 11;

inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat16 = DType::Float16;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat8E4M3FN = DType::Float8E4M3FN;
inline constexpr DType kFloat8E5M2 = DType::Float8E5M2;
inline constexpr DType kInt8 = DType::Int8;
inline constexpr DType kUInt8 = DType::UInt8;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kBool = DType::Bool;

struct DTypeTraits {
  DType dtype;
  std::string_view name;              // as PyTorch spells it: "float32", "bfloat16", ...
  std::string_view safetensors_name;  // as the safetensors header spells it: "F32", "BF16", ...
  size_t itemsize;
  bool is_floating;
  bool is_integral;  // integers, not bool
  bool is_signed;
  bool is_narrow_float;  // stored narrow, computed in float32
  int promotion_rank;    // within a category, the wider type has the higher rank
};

inline constexpr DTypeTraits kDTypeTraits[kNumDTypes] = {
    {DType::Float64, "float64", "F64", 8, true, false, true, false, 40},
    {DType::Float32, "float32", "F32", 4, true, false, true, false, 30},
    {DType::Float16, "float16", "F16", 2, true, false, true, true, 20},
    {DType::BFloat16, "bfloat16", "BF16", 2, true, false, true, true, 20},
    {DType::Float8E4M3FN, "float8_e4m3fn", "F8_E4M3", 1, true, false, true, true, 10},
    {DType::Float8E5M2, "float8_e5m2", "F8_E5M2", 1, true, false, true, true, 10},
    {DType::Int8, "int8", "I8", 1, false, true, true, false, 10},
    {DType::UInt8, "uint8", "U8", 1, false, true, false, false, 10},
    {DType::Int32, "int32", "I32", 4, false, true, true, false, 30},
    {DType::Int64, "int64", "I64", 8, false, true, true, false, 40},
    {DType::Bool, "bool", "BOOL", 1, false, false, false, false, 0},
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

std::ostream& operator<<(std::ostream& os, DType d);

// The C++ storage type of each dtype, and the reverse map. Used by kernels to dispatch.
template <DType D> struct StorageTypeOf;
template <> struct StorageTypeOf<DType::Float64> { using type = double; };
template <> struct StorageTypeOf<DType::Float32> { using type = float; };
template <> struct StorageTypeOf<DType::Float16> { using type = Half; };
template <> struct StorageTypeOf<DType::BFloat16> { using type = BFloat16; };
template <> struct StorageTypeOf<DType::Float8E4M3FN> { using type = Float8E4M3FN; };
template <> struct StorageTypeOf<DType::Float8E5M2> { using type = Float8E5M2; };
template <> struct StorageTypeOf<DType::Int8> { using type = int8_t; };
template <> struct StorageTypeOf<DType::UInt8> { using type = uint8_t; };
template <> struct StorageTypeOf<DType::Int32> { using type = int32_t; };
template <> struct StorageTypeOf<DType::Int64> { using type = int64_t; };
template <> struct StorageTypeOf<DType::Bool> { using type = bool; };

template <class T> struct DTypeOf;
template <> struct DTypeOf<double> { static constexpr DType value = DType::Float64; };
template <> struct DTypeOf<float> { static constexpr DType value = DType::Float32; };
template <> struct DTypeOf<Half> { static constexpr DType value = DType::Float16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct DTypeOf<Float8E4M3FN> { static constexpr DType value = DType::Float8E4M3FN; };
template <> struct DTypeOf<Float8E5M2> { static constexpr DType value = DType::Float8E5M2; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::Int8; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::Bool; };

}  // namespace weft
