// Index kernels on CUDA over 3-D views (outer, n, inner): index_select, index_add, gather and
// scatter_add, one thread per element of the index-shaped side. An index outside [0, n) is
// recorded in the device's error record and its element skipped (Note [Deferred device errors]).
// The adds are atomic, so where indices repeat the order of the additions (and a float result's
// last bits) can differ between runs; 1- and 2-byte dtypes are added with a compare-and-swap on
// the aligned 32-bit word that holds them.
#include <cuda_runtime.h>

#include "tensor/cuda/device_values.cuh"
#include "tensor/cuda/runtime.h"

namespace weft::cuda::detail {
namespace {

__device__ void report(DeviceError* error, DeviceErrorCode code, int64_t value, int64_t bound) {
  if (atomicCAS(&error->code, 0, static_cast<int32_t>(code)) == 0) {
    error->value = value;
    error->bound = bound;
  }
}

// Element (o, j, i) of a 3-D view.
__device__ char* at3(const View& v, int64_t o, int64_t j, int64_t i) {
  return v.data + (o * v.strides[0] + j * v.strides[1] + i * v.strides[2]) * itemsize_of(v.dtype);
}

// *p += *src for an element of dtype d (src of src_dtype), atomically, in the CPU's compute type:
// double for float64, float for float32 and the narrow floats, int64 for integers.
__device__ void atomic_add(char* p, DType d, const char* src, DType src_dtype) {
  switch (d) {
    case DType::Float64: atomicAdd(reinterpret_cast<double*>(p), load_as<double>(src, src_dtype)); return;
    case DType::Float32: atomicAdd(reinterpret_cast<float*>(p), load_as<float>(src, src_dtype)); return;
    case DType::Int32: atomicAdd(reinterpret_cast<int*>(p), static_cast<int>(load_as<int64_t>(src, src_dtype))); return;
    case DType::Int64:
      atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(load_as<int64_t>(src, src_dtype)));
      return;
    default: break;
  }
  // A 1- or 2-byte dtype: swap the whole aligned word, changing only this element's bytes.
  const auto address = reinterpret_cast<uintptr_t>(p);
  auto* word = reinterpret_cast<unsigned int*>(address & ~uintptr_t{3});
  const unsigned shift = static_cast<unsigned>(address & 3u) * 8u;
  const unsigned mask = itemsize_of(d) == 2 ? 0xFFFFu : 0xFFu;
  unsigned old = *word, assumed;
  do {
    assumed = old;
    unsigned bits = (assumed >> shift) & mask;
    char* bytes = reinterpret_cast<char*>(&bits);
    if (is_floating(d)) store_as(bytes, d, load_as<float>(bytes, d) + load_as<float>(src, src_dtype));
    else store_as(bytes, d, load_as<int64_t>(bytes, d) + load_as<int64_t>(src, src_dtype));
    old = atomicCAS(word, assumed, (assumed & ~(mask << shift)) | ((bits & mask) << shift));
  } while (old != assumed);
}

// out: (outer, k, inner) ← x[o, index[j], i]
__global__ void index_select_kernel(View x, const int64_t* index, int64_t k, View out, DeviceError* error) {
  const int64_t outer = out.sizes[0], inner = out.sizes[2], n = x.sizes[1];
  const int64_t size = itemsize_of(out.dtype);
  WEFT_GRID_LOOP(e, outer * k * inner) {
    const int64_t i = e % inner, j = (e / inner) % k, o = e / (inner * k);
    const int64_t row = index[j];
    if (row < 0 || row >= n) {
      report(error, DeviceErrorCode::IndexSelect, row, n);
      continue;
    }
    const char* from = at3(x, o, row, i);
    char* to = at3(out, o, j, i);
    for (int64_t b = 0; b < size; ++b) to[b] = from[b];
  }
}

// out[o, index[j], i] += src[o, j, i]
__global__ void index_add_kernel(View out, const int64_t* index, int64_t k, View src, DeviceError* error) {
  const int64_t outer = src.sizes[0], inner = src.sizes[2], n = out.sizes[1];
  WEFT_GRID_LOOP(e, outer * k * inner) {
    const int64_t i = e % inner, j = (e / inner) % k, o = e / (inner * k);
    const int64_t row = index[j];
    if (row < 0 || row >= n) {
      report(error, DeviceErrorCode::IndexAdd, row, n);
      continue;
    }
    atomic_add(at3(out, o, row, i), out.dtype, at3(src, o, j, i), src.dtype);
  }
}

// out[o, j, i] = x[o, index[o, j, i], i]
__global__ void gather_kernel(View x, View index, View out, DeviceError* error) {
  const int64_t outer = out.sizes[0], k = out.sizes[1], inner = out.sizes[2], n = x.sizes[1];
  const int64_t size = itemsize_of(out.dtype);
  WEFT_GRID_LOOP(e, outer * k * inner) {
    const int64_t i = e % inner, j = (e / inner) % k, o = e / (inner * k);
    const int64_t row = *reinterpret_cast<const int64_t*>(at3(index, o, j, i));
    if (row < 0 || row >= n) {
      report(error, DeviceErrorCode::Gather, row, n);
      continue;
    }
    const char* from = at3(x, o, row, i);
    char* to = at3(out, o, j, i);
    for (int64_t b = 0; b < size; ++b) to[b] = from[b];
  }
}

// out[o, index[o, j, i], i] += src[o, j, i]
__global__ void scatter_add_kernel(View out, View index, View src, DeviceError* error) {
  const int64_t outer = src.sizes[0], k = src.sizes[1], inner = src.sizes[2], n = out.sizes[1];
  WEFT_GRID_LOOP(e, outer * k * inner) {
    const int64_t i = e % inner, j = (e / inner) % k, o = e / (inner * k);
    const int64_t row = *reinterpret_cast<const int64_t*>(at3(index, o, j, i));
    if (row < 0 || row >= n) {
      report(error, DeviceErrorCode::ScatterAdd, row, n);
      continue;
    }
    atomic_add(at3(out, o, row, i), out.dtype, at3(src, o, j, i), src.dtype);
  }
}

}  // namespace

void launch_index_select(const View& x, const int64_t* index, int64_t k, const View& out, DeviceError* error,
                         StreamHandle stream) {
  const int64_t n = out.sizes[0] * k * out.sizes[2];
  if (n == 0) return;
  index_select_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, index, k, out, error);
  check_launch("index_select");
}

void launch_index_add(const View& out, const int64_t* index, int64_t k, const View& src, DeviceError* error,
                      StreamHandle stream) {
  const int64_t n = src.sizes[0] * k * src.sizes[2];
  if (n == 0) return;
  index_add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, index, k, src, error);
  check_launch("index_add");
}

void launch_gather(const View& x, const View& index, const View& out, DeviceError* error, StreamHandle stream) {
  const int64_t n = out.sizes[0] * out.sizes[1] * out.sizes[2];
  if (n == 0) return;
  gather_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, index, out, error);
  check_launch("gather");
}

void launch_scatter_add(const View& out, const View& index, const View& src, DeviceError* error, StreamHandle stream) {
  const int64_t n = src.sizes[0] * src.sizes[1] * src.sizes[2];
  if (n == 0) return;
  scatter_add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, index, src, error);
  check_launch("scatter_add");
}

}  // namespace weft::cuda::detail
