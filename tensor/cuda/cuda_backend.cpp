// The host side of the CUDA backend's core ops (tensor/cuda/cuda_backend.h): views, device and
// stream selection, copies between the host and devices, and the launches of the .cu kernels.
#include "tensor/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include "tensor/cuda.h"
#include "tensor/cuda/capture.h"
#include "tensor/cuda/runtime.h"
#include "tensor/op_helpers.h"

namespace weft {
namespace cuda::detail {
namespace {

const char* byte_ptr(const Tensor& t) { return static_cast<const char*>(t.data_ptr()); }

}  // namespace

template <size_t N>
std::array<View, N> views_of(const std::array<const Tensor*, N>& tensors, const Shape& shape) {
  // Dims of size 1 carry nothing; a dim merges into the next inner one when every operand steps
  // over it as over one longer dim.
  std::vector<int64_t> sizes;
  std::array<std::vector<int64_t>, N> strides;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    const bool merge = !sizes.empty() && [&] {
      for (size_t k = 0; k < N; ++k)
        if (tensors[k]->stride(static_cast<int64_t>(d)) * shape[d] != strides[k].back()) return false;
      return true;
    }();
    if (merge) {
      sizes.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) strides[k].back() = tensors[k]->stride(static_cast<int64_t>(d));
    } else {
      sizes.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) strides[k].push_back(tensors[k]->stride(static_cast<int64_t>(d)));
    }
  }
  WEFT_CHECK(static_cast<int>(sizes.size()) <= kMaxDims, "[cuda] elementwise kernels take views of at most ", kMaxDims,
             " dims that cannot be merged; got shape ", shape, " with strides ", tensors[0]->strides());
  std::array<View, N> views;
  for (size_t k = 0; k < N; ++k) {
    View& v = views[k];
    v.data = const_cast<char*>(byte_ptr(*tensors[k]));
    v.dtype = tensors[k]->dtype();
    v.dims = static_cast<int32_t>(sizes.size());
    for (size_t d = 0; d < sizes.size(); ++d) {
      v.sizes[d] = sizes[d];
      v.strides[d] = strides[k][d];
    }
  }
  return views;
}

template std::array<View, 1> views_of<1>(const std::array<const Tensor*, 1>&, const Shape&);
template std::array<View, 2> views_of<2>(const std::array<const Tensor*, 2>&, const Shape&);
template std::array<View, 3> views_of<3>(const std::array<const Tensor*, 3>&, const Shape&);
template std::array<View, 4> views_of<4>(const std::array<const Tensor*, 4>&, const Shape&);

View view_of(const Tensor& t) {
  WEFT_CHECK(t.dim() <= kMaxDims, "[cuda] internal: a view of ", t.dim(), " dims");
  View v;
  v.data = const_cast<char*>(byte_ptr(t));
  v.dtype = t.dtype();
  v.dims = static_cast<int32_t>(t.dim());
  for (int64_t d = 0; d < t.dim(); ++d) {
    v.sizes[d] = t.size(d);
    v.strides[d] = t.stride(d);
  }
  return v;
}

StreamHandle stream_for(const Tensor& t) { return stream_of(t.device().index); }

Tensor device_scratch(const Shape& shape, DType dtype, Device device) {
  return weft::detail::make_tensor(shape, dtype, device);
}

int CudaBackend::device_count() { return cuda::device_count(); }
Allocator& CudaBackend::allocator(int index) { return device_allocator(index); }
void CudaBackend::synchronize(int index) { cuda::synchronize(index); }

void CudaBackend::copy(const Tensor& src, const Tensor& dst) {
  WEFT_CHECK(src.shape() == dst.shape(), "[copy] internal: shapes differ: ", src.shape(), " vs ", dst.shape());
  if (dst.numel() == 0) return;
  if (src.device() == dst.device()) {
    DeviceGuard guard(dst.device().index);
    cudaStream_t stream = stream_for(dst);
    if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
      WEFT_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream));
      return;
    }
    const auto [d, s] = views_of<2>({&dst, &src}, dst.shape());
    launch_copy(d, s, dst.numel(), stream);
    return;
  }
  // Across devices the front end hands over contiguous tensors of one dtype (tensor/tensor.cpp).
  WEFT_CHECK(src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous(),
             "[copy] internal: a copy between ", src.device(), " and ", dst.device(),
             " needs contiguous tensors of one dtype");
  if (src.device().is_cpu()) {
    refuse_during_capture("a copy from the CPU to a CUDA device",
                          "every replay would read host memory the step has already released; copy inputs into "
                          "static device tensors (copy_ on the device) before replay()");
    DeviceGuard guard(dst.device().index);
    cudaStream_t stream = stream_for(dst);
    // From pageable memory the call returns once the source has been read (staged).
    WEFT_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyHostToDevice, stream));
    if (cuda::is_pinned(src)) WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));  // src may die right after
  } else if (dst.device().is_cpu()) {
    refuse_during_capture("a copy from a CUDA device to the CPU (item(), to_vector(), to(kCPU))",
                          "the host would wait for work that is only being recorded; read results after replay()");
    DeviceGuard guard(src.device().index);
    cudaStream_t stream = stream_for(src);
    WEFT_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToHost, stream));
    raise_deferred_errors(src.device().index, stream);  // waits for the stream
  } else {
    refuse_during_capture("a copy between two CUDA devices", "it waits on the host for the source device");
    DeviceGuard guard(dst.device().index);
    cudaStream_t stream = stream_for(dst);
    // The source device's queued work must finish before the peer copy reads it.
    WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_for(src)));
    WEFT_CUDA_CHECK(cudaMemcpyPeerAsync(dst.data_ptr(), dst.device().index, src.data_ptr(), src.device().index,
                                        dst.nbytes(), stream));
  }
}

void CudaBackend::fill(const Tensor& dst, double value) {
  DeviceGuard guard(dst.device().index);
  const auto [d] = views_of<1>({&dst}, dst.shape());
  launch_fill(d, value, dst.numel(), stream_for(dst));
}

void CudaBackend::unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) {
  DeviceGuard guard(out.device().index);
  const auto [o, xv] = views_of<2>({&out, &x}, out.shape());
  launch_unary(op, xv, o, p0, p1, out.numel(), stream_for(out));
}

void CudaBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  DeviceGuard guard(out.device().index);
  const auto [o, av, bv] = views_of<3>({&out, &a, &b}, out.shape());
  launch_binary(op, av, bv, o, out.numel(), stream_for(out));
}

void CudaBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  DeviceGuard guard(out.device().index);
  const auto [o, cv, av, bv] = views_of<4>({&out, &cond, &a, &b}, out.shape());
  launch_where(cv, av, bv, o, out.numel(), stream_for(out));
}

void CudaBackend::reduce(ReduceOp op, const Tensor& x, const Tensor& out) {
  const int64_t n = x.dim() == 0 ? 1 : x.size(-1);
  WEFT_CHECK(n > 0 || op == ReduceOp::Sum, "[reduce] cannot take max/min/argmax of an empty dimension");
  DeviceGuard guard(out.device().index);
  launch_reduce(op, x.data_ptr(), x.dtype(), out.data_ptr(), out.dtype(), out.numel(), n, stream_for(out));
}

void CudaBackend::sum_columns(const Tensor& x, const Tensor& out) {
  DeviceGuard guard(out.device().index);
  launch_sum_columns(x.data_ptr(), x.dtype(), out.data_ptr(), out.dtype(), x.size(0), x.size(1), stream_for(out));
}

void CudaBackend::matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  DeviceGuard guard(out.device().index);
  cublas_matmul(a, b, out, accumulate);
}

void CudaBackend::index_select(const Tensor& x, const Tensor& index, const Tensor& out) {
  DeviceGuard guard(out.device().index);
  launch_index_select(view_of(x), static_cast<const int64_t*>(index.data_ptr()), index.numel(), view_of(out),
                      device_error(out.device().index), stream_for(out));
}

void CudaBackend::index_add(const Tensor& out, const Tensor& index, const Tensor& src) {
  DeviceGuard guard(out.device().index);
  launch_index_add(view_of(out), static_cast<const int64_t*>(index.data_ptr()), index.numel(), view_of(src),
                   device_error(out.device().index), stream_for(out));
}

void CudaBackend::gather(const Tensor& x, const Tensor& index, const Tensor& out) {
  DeviceGuard guard(out.device().index);
  launch_gather(view_of(x), view_of(index), view_of(out), device_error(out.device().index), stream_for(out));
}

void CudaBackend::scatter_add(const Tensor& out, const Tensor& index, const Tensor& src) {
  DeviceGuard guard(out.device().index);
  launch_scatter_add(view_of(out), view_of(index), view_of(src), device_error(out.device().index), stream_for(out));
}

void CudaBackend::softmax(const Tensor& x, const Tensor& out, bool log) {
  const int64_t n = x.size(-1), rows = n == 0 ? 0 : x.numel() / n;
  DeviceGuard guard(out.device().index);
  launch_softmax(x.data_ptr(), out.data_ptr(), x.dtype(), rows, n, log, stream_for(out));
}

void CudaBackend::softmax_backward(const Tensor& grad, const Tensor& y, const Tensor& grad_in, bool log) {
  const int64_t n = y.size(-1), rows = n == 0 ? 0 : y.numel() / n;
  DeviceGuard guard(grad_in.device().index);
  launch_softmax_backward(grad.data_ptr(), y.data_ptr(), grad_in.data_ptr(), y.dtype(), rows, n, log,
                          stream_for(grad_in));
}

}  // namespace cuda::detail

namespace detail {

Backend& cuda_backend() {
  static cuda::detail::CudaBackend backend;
  return backend;
}

}  // namespace detail
}  // namespace weft
