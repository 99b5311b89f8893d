// Matrix products on CUDA through cuBLAS, and the linear kernel (tensor/fused_kernels.h) on them.
//
// cuBLAS is column-major; a row-major (R, C) matrix is its column-major transpose, so
// out = a·b is computed as outᵀ = bᵀ·aᵀ: b is passed first, m = N, n = M (cuda.md §4). An operand
// whose last dim is contiguous goes in as it is ("N"), one whose second-to-last dim is contiguous
// (a transposed view) as "T"; anything else is first packed by the copy kernel. float32 uses
// exact FP32 products unless cuda::set_allow_tf32(true); float16 and bfloat16 accumulate in
// float32. One handle per thread and device, bound to the current stream before each call with its
// own 32 MiB workspace (cublasSetStream resets the workspace, so it is set after). With a
// workspace of its own cuBLAS allocates nothing during a call, so a call can be captured in a CUDA
// graph; creating the handle cannot, and is refused during a capture.
#include <cublas_v2.h>

#include <algorithm>
#include <array>
#include <memory>

#include "tensor/cuda.h"
#include "tensor/cuda/capture.h"
#include "tensor/cuda/cublaslt.h"
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/runtime.h"
#include "tensor/fused_kernels.h"
#include "tensor/op_helpers.h"

namespace weft {
namespace cuda::detail {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kMaxHandleDevices = 64;

void check_cublas(cublasStatus_t status, const char* what) {
  WEFT_CHECK(status == CUBLAS_STATUS_SUCCESS, "[matmul] ", what, " failed: ", cublasGetStatusName(status), " (",
             static_cast<int>(status), "): ", cublasGetStatusString(status));
}

struct Handle {
  cublasHandle_t handle = nullptr;
  Tensor workspace;
  ~Handle() {
    if (handle != nullptr) cublasDestroy(handle);
  }
};

cublasHandle_t handle_for(int device, cudaStream_t stream) {
  thread_local std::array<std::unique_ptr<Handle>, kMaxHandleDevices> handles;
  auto& h = handles[static_cast<size_t>(device)];
  if (!h) {
    refuse_during_capture("creating this thread's cuBLAS handle and workspace",
                          "they must exist before capture; run the step eagerly first (cuda::Graph::warm_up)");
    auto created = std::make_unique<Handle>();
    check_cublas(cublasCreate(&created->handle), "cublasCreate");
    created->workspace = device_scratch({static_cast<int64_t>(kWorkspaceBytes)}, kUInt8, Device(DeviceType::CUDA, device));
    h = std::move(created);
  }
  check_cublas(cublasSetStream(h->handle, stream), "cublasSetStream");
  check_cublas(cublasSetWorkspace(h->handle, h->workspace.data_ptr(), kWorkspaceBytes), "cublasSetWorkspace");
  return h->handle;
}

// How a (B, R, C) operand is handed to cuBLAS: as a column-major (C, R) matrix ("N") or, for a
// transposed view, a column-major (R, C) matrix used transposed ("T").
struct Operand {
  const void* data;
  cublasOperation_t op;
  int64_t ld;
  int64_t batch_stride;
  Tensor keep_alive;  // a packed copy, when one was needed
};

Operand operand(const Tensor& t) {
  const int64_t rows = t.size(1), cols = t.size(2);
  const int64_t batch_stride = t.size(0) == 1 ? 0 : t.stride(0);
  if (t.stride(2) == 1 && (rows == 1 || t.stride(1) >= cols)) {
    return {t.data_ptr(), CUBLAS_OP_N, rows == 1 ? std::max<int64_t>(cols, 1) : t.stride(1), batch_stride, {}};
  }
  if (t.stride(1) == 1 && (cols == 1 || t.stride(2) >= rows)) {
    return {t.data_ptr(), CUBLAS_OP_T, cols == 1 ? std::max<int64_t>(rows, 1) : t.stride(2), batch_stride, {}};
  }
  Tensor packed = device_scratch(t.shape(), t.dtype(), t.device());
  weft::detail::cuda_backend().copy(t, packed);
  return {packed.data_ptr(), CUBLAS_OP_N, std::max<int64_t>(cols, 1), t.size(0) == 1 ? 0 : rows * cols, packed};
}

cudaDataType_t data_type(DType d) {
  switch (d) {
    case DType::Float64: return CUDA_R_64F;
    case DType::Float32: return CUDA_R_32F;
    case DType::Float16: return CUDA_R_16F;
    case DType::BFloat16: return CUDA_R_16BF;
    default: WEFT_FAIL("[matmul] on CUDA expected float64, float32, float16 or bfloat16, got ", d);
  }
}

}  // namespace

void cublas_matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  if (out.numel() == 0) return;
  const cudaDataType_t type = data_type(out.dtype());
  if (k == 0) {
    if (!accumulate) weft::detail::cuda_backend().fill(out, 0.0);
    return;
  }
  const Operand A = operand(a), B = operand(b);
  cublasHandle_t handle = handle_for(out.device().index, stream_for(out));
  const bool is_double = out.dtype() == kFloat64;
  const double alpha_d = 1.0, beta_d = accumulate ? 1.0 : 0.0;
  const float alpha_f = 1.0f, beta_f = accumulate ? 1.0f : 0.0f;
  const cublasComputeType_t compute = is_double                                     ? CUBLAS_COMPUTE_64F
                                      : out.dtype() == kFloat32 && cuda::allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                                      : CUBLAS_COMPUTE_32F;
  check_cublas(cublasGemmStridedBatchedEx(
                   handle, B.op, A.op, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                   is_double ? static_cast<const void*>(&alpha_d) : &alpha_f, B.data, type, static_cast<int>(B.ld),
                   B.batch_stride, A.data, type, static_cast<int>(A.ld), A.batch_stride,
                   is_double ? static_cast<const void*>(&beta_d) : &beta_f, out.data_ptr(), type, static_cast<int>(n),
                   m * n, static_cast<int>(batch), compute, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
}

}  // namespace cuda::detail

namespace detail {
namespace {

// x: (R, in) · weight: (out, in)ᵀ + bias -> out: (R, out). float32, float16 and bfloat16 go
// through cuBLASLt with the bias in its epilogue (one launch, the TN layout the forward has);
// float64, and views cuBLASLt cannot take, broadcast the bias into out and accumulate the cuBLAS
// product onto it (as the CPU kernel, tensor/cpu/fused.cpp).
void linear_on_cuda(const LinearLaunch& a) {
  const int64_t rows = a.x.size(0), in = a.x.size(1), out_features = a.weight.size(0);
  const bool bias_ok = !a.bias.defined() || a.bias.stride(0) == 1 || out_features == 1;
  if (a.out.dtype() != kFloat64 && a.out.is_contiguous() && bias_ok && rows > 0 && in > 0 && out_features > 0) {
    const Tensor weight_t = make_view(a.weight, {in, out_features}, {a.weight.stride(1), a.weight.stride(0)},
                                      a.weight.offset());
    if (cuda::detail::cublaslt_matmul({a.x, weight_t, a.bias, a.out})) return;
  }
  Backend& cuda = cuda_backend();
  const Tensor out3 = make_view(a.out, {1, rows, out_features}, {rows * out_features, out_features, 1}, a.out.offset());
  if (a.bias.defined())
    cuda.copy(make_view(a.bias, {1, rows, out_features}, {0, 0, a.bias.stride(0)}, a.bias.offset()), out3);
  const Tensor x3 = make_view(a.x, {1, rows, in}, {0, a.x.stride(0), a.x.stride(1)}, a.x.offset());
  const Tensor w3 = make_view(a.weight, {1, in, out_features}, {0, a.weight.stride(1), a.weight.stride(0)}, a.weight.offset());
  cuda.matmul(x3, w3, out3, /*accumulate=*/a.bias.defined());
}

}  // namespace

LinearKernel* const cuda_linear = &linear_on_cuda;

}  // namespace detail
}  // namespace weft
