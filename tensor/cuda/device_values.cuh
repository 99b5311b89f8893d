// Device-side reads and writes of any dtype, for the CUDA kernels (nvcc only).
//
// A kernel computes in one of four compute types — double (float64), float (float32 and the
// narrow floats), int64_t (every integer type) and bool — and reads and writes storage of any
// dtype through load_as / store_as, which switch on the dtype at run time (the same for every
// thread of a launch, so the branch costs nothing) instead of instantiating every kernel for every
// dtype: nvcc's compile time grows with instantiations. Integer ops computed in int64 and wrapped
// on store give the bits the CPU's per-width arithmetic gives.
//
// Conversions follow Note [Conversion semantics] (tensor/cpu/convert.h) exactly: narrow floats
// through the shared codecs of tensor/narrow_codec.h (float64 -> narrow via float32), floating ->
// integer truncates and saturates at the int64 range (NaN gives 0) then wraps, anything -> bool
// is `value != 0`.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tensor/cuda/launch.h"
#include "tensor/narrow_codec.h"

namespace weft::cuda::detail {

__device__ inline int64_t saturating_trunc(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return static_cast<int64_t>(v);
}

// A value of a compute type as compute type C.
template <class C, class V>
__device__ inline C cast_to(V v) {
  if constexpr (std::is_same_v<C, V>) return v;
  else if constexpr (std::is_same_v<C, bool>) return v != V(0);
  else if constexpr (std::is_integral_v<C> && std::is_floating_point_v<V>) return static_cast<C>(saturating_trunc(v));
  else return static_cast<C>(v);
}

template <class C>
__device__ inline C load_as(const char* p, DType d) {
  using namespace weft::detail;
  switch (d) {
    case DType::Float64: return cast_to<C>(*reinterpret_cast<const double*>(p));
    case DType::Float32: return cast_to<C>(*reinterpret_cast<const float*>(p));
    case DType::Float16: return cast_to<C>(decode_half(*reinterpret_cast<const uint16_t*>(p)));
    case DType::BFloat16: return cast_to<C>(decode_bfloat16(*reinterpret_cast<const uint16_t*>(p)));
    case DType::Float8E4M3FN: return cast_to<C>(decode_e4m3(*reinterpret_cast<const uint8_t*>(p)));
    case DType::Float8E5M2: return cast_to<C>(decode_e5m2(*reinterpret_cast<const uint8_t*>(p)));
    case DType::Int8: return cast_to<C>(static_cast<int64_t>(*reinterpret_cast<const int8_t*>(p)));
    case DType::UInt8: return cast_to<C>(static_cast<int64_t>(*reinterpret_cast<const uint8_t*>(p)));
    case DType::Int32: return cast_to<C>(static_cast<int64_t>(*reinterpret_cast<const int32_t*>(p)));
    case DType::Int64: return cast_to<C>(*reinterpret_cast<const int64_t*>(p));
    case DType::Bool: return cast_to<C>(*reinterpret_cast<const bool*>(p));
  }
  return C{};
}

// Writes a compute-type value as dtype d. Narrow floats round from float32 (a double is first
// rounded to float32, as the CPU does).
template <class V>
__device__ inline void store_as(char* p, DType d, V v) {
  using namespace weft::detail;
  auto as_float = [&] { return cast_to<float>(v); };
  auto as_int = [&] { return cast_to<int64_t>(v); };
  switch (d) {
    case DType::Float64: *reinterpret_cast<double*>(p) = cast_to<double>(v); return;
    case DType::Float32: *reinterpret_cast<float*>(p) = as_float(); return;
    case DType::Float16: *reinterpret_cast<uint16_t*>(p) = encode_half(as_float()); return;
    case DType::BFloat16: *reinterpret_cast<uint16_t*>(p) = encode_bfloat16(as_float()); return;
    case DType::Float8E4M3FN: *reinterpret_cast<uint8_t*>(p) = encode_e4m3(as_float()); return;
    case DType::Float8E5M2: *reinterpret_cast<uint8_t*>(p) = encode_e5m2(as_float()); return;
    case DType::Int8: *reinterpret_cast<int8_t*>(p) = static_cast<int8_t>(as_int()); return;
    case DType::UInt8: *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(as_int()); return;
    case DType::Int32: *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(as_int()); return;
    case DType::Int64: *reinterpret_cast<int64_t*>(p) = as_int(); return;
    case DType::Bool: *reinterpret_cast<bool*>(p) = cast_to<bool>(v); return;
  }
}

__device__ inline int64_t itemsize_of(DType d) {
  switch (d) {
    case DType::Float64: case DType::Int64: return 8;
    case DType::Float32: case DType::Int32: return 4;
    case DType::Float16: case DType::BFloat16: return 2;
    default: return 1;
  }
}

// The address of linear element i (row-major over the shared sizes) of a view.
__device__ inline char* element(const View& v, int64_t i) {
  int64_t offset = 0;
  for (int d = v.dims - 1; d >= 0; --d) {
    const int64_t size = v.sizes[d];
    offset += (i % size) * v.strides[d];
    i /= size;
  }
  return v.data + offset * itemsize_of(v.dtype);
}

// for (i = first thread's index; i < n; i += all threads), with 64-bit indices.
#define WEFT_GRID_LOOP(i, n)                                                                           \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);              \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

}  // namespace weft::cuda::detail
