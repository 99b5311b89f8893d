// cuBLASLt products with epilogues and FP8 scales (tensor/cuda/cublaslt.h).
//
// One cuBLASLt handle per thread and device with its own 32 MiB workspace (cuda.md §4), and per
// thread a cache of the algorithm the heuristic chose for each problem (shape, layouts, dtypes,
// epilogue, pointer alignment): asking once keeps results bit-stable from call to call and keeps
// the heuristic out of a captured CUDA graph. The alignment preferences are those of the real
// pointers, so an algorithm never assumes more than a view's offset gives.
#include "tensor/cuda/cublaslt.h"

#include <cublasLt.h>

#include <array>
#include <map>
#include <memory>
#include <tuple>

#include "tensor/cuda.h"
#include "tensor/cuda/capture.h"
#include "tensor/cuda/cuda_backend.h"
#include "tensor/cuda/runtime.h"

namespace weft::cuda::detail {
namespace {

using weft::detail::LtEpilogue;
using weft::detail::LtPlan;

static_assert(static_cast<int>(LtEpilogue::Default) == CUBLASLT_EPILOGUE_DEFAULT);
static_assert(static_cast<int>(LtEpilogue::Relu) == CUBLASLT_EPILOGUE_RELU);
static_assert(static_cast<int>(LtEpilogue::Bias) == CUBLASLT_EPILOGUE_BIAS);
static_assert(static_cast<int>(LtEpilogue::ReluBias) == CUBLASLT_EPILOGUE_RELU_BIAS);
static_assert(static_cast<int>(LtEpilogue::Gelu) == CUBLASLT_EPILOGUE_GELU);
static_assert(static_cast<int>(LtEpilogue::GeluBias) == CUBLASLT_EPILOGUE_GELU_BIAS);

constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kMaxDevices = 64;

void check_lt(cublasStatus_t status, const char* what) {
  WEFT_CHECK(status == CUBLAS_STATUS_SUCCESS, "[matmul] ", what, " failed: ", cublasGetStatusName(status), " (",
             static_cast<int>(status), "): ", cublasGetStatusString(status));
}

bool is_fp8(DType d) { return d == kFloat8E4M3FN || d == kFloat8E5M2; }

cudaDataType_t lt_type(DType d) {
  switch (d) {
    case DType::Float32: return CUDA_R_32F;
    case DType::Float16: return CUDA_R_16F;
    case DType::BFloat16: return CUDA_R_16BF;
    case DType::Float8E4M3FN: return CUDA_R_8F_E4M3;
    case DType::Float8E5M2: return CUDA_R_8F_E5M2;
    default: WEFT_FAIL("[matmul] cuBLASLt expected float32, float16, bfloat16 or FP8, got ", d);
  }
}

struct LtHandle {
  cublasLtHandle_t handle = nullptr;
  Tensor workspace;
  ~LtHandle() {
    if (handle != nullptr) cublasLtDestroy(handle);
  }
};

LtHandle& handle_for(int device) {
  thread_local std::array<std::unique_ptr<LtHandle>, kMaxDevices> handles;
  auto& h = handles[static_cast<size_t>(device)];
  if (!h) {
    refuse_during_capture("creating this thread's cuBLASLt handle and workspace",
                          "they must exist before capture; run the step eagerly first (cuda::Graph::warm_up)");
    auto created = std::make_unique<LtHandle>();
    check_lt(cublasLtCreate(&created->handle), "cublasLtCreate");
    created->workspace =
        device_scratch({static_cast<int64_t>(kWorkspaceBytes)}, kUInt8, Device(DeviceType::CUDA, device));
    h = std::move(created);
  }
  return *h;
}

// The largest power of two (up to 256) that divides the address.
uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

template <class T, cublasStatus_t (*Destroy)(T)>
struct Owned {
  T value = nullptr;
  ~Owned() {
    if (value != nullptr) Destroy(value);
  }
};
using Desc = Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using Layout = Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using Preference = Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

template <class V>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const V& value) {
  check_lt(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)), "cublasLtMatmulDescSetAttribute");
}

void layout(Layout& out, DType dtype, int64_t rows, int64_t cols, int64_t ld) {
  check_lt(cublasLtMatrixLayoutCreate(&out.value, lt_type(dtype), static_cast<uint64_t>(rows),
                                      static_cast<uint64_t>(cols), ld),
           "cublasLtMatrixLayoutCreate");
}

using AlgoKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool, int, int, int, int, int,
                           uint32_t, uint32_t, uint32_t>;

}  // namespace

bool cublaslt_matmul(const LtCall& c) {
  const Tensor& a = c.a;
  const Tensor& b = c.b;
  const std::optional<LtPlan> found = weft::detail::lt_plan({a.size(0), a.size(1), a.stride(0), a.stride(1)},
                                                           {b.size(0), b.size(1), b.stride(0), b.stride(1)});
  if (!found) return false;
  const LtPlan& plan = *found;
  const bool fp8 = is_fp8(a.dtype());
  if (fp8) weft::detail::check_fp8_plan(plan);
  const int device = c.out.device().index;
  DeviceGuard guard(device);
  LtHandle& h = handle_for(device);

  const cublasComputeType_t compute =
      c.out.dtype() == kFloat32 && !fp8 && cuda::allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  Desc desc;
  check_lt(cublasLtMatmulDescCreate(&desc.value, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  // cuBLASLt's A is our b and its B our a (tensor/gemm_plan.h).
  set(desc.value, CUBLASLT_MATMUL_DESC_TRANSA, plan.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N);
  set(desc.value, CUBLASLT_MATMUL_DESC_TRANSB, plan.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N);
  const LtEpilogue epilogue = weft::detail::lt_epilogue(c.bias.defined(), c.activation);
  set(desc.value, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<cublasLtEpilogue_t>(epilogue));
  if (c.bias.defined()) {
    set(desc.value, CUBLASLT_MATMUL_DESC_BIAS_POINTER, c.bias.data_ptr());
    set(desc.value, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, lt_type(c.bias.dtype()));
  }
  if (fp8) {
    set(desc.value, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, c.b_scale);
    set(desc.value, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, c.a_scale);
  }
  Layout la, lb, ld;
  layout(la, b.dtype(), plan.a.stored_rows, plan.a.stored_cols, plan.a.ld);
  layout(lb, a.dtype(), plan.b.stored_rows, plan.b.stored_cols, plan.b.ld);
  layout(ld, c.out.dtype(), plan.m, plan.n, plan.ldc);

  const uint32_t align_a = alignment_of(b.data_ptr()), align_b = alignment_of(a.data_ptr()),
                 align_d = alignment_of(c.out.data_ptr());
  thread_local std::map<AlgoKey, cublasLtMatmulAlgo_t> algos;
  const AlgoKey key{device, plan.m, plan.n, plan.k, plan.a.ld, plan.b.ld, plan.a.transposed, plan.b.transposed,
                    static_cast<int>(a.dtype()), static_cast<int>(b.dtype()), static_cast<int>(c.out.dtype()),
                    static_cast<int>(epilogue) * 2 + static_cast<int>(compute == CUBLAS_COMPUTE_32F_FAST_TF32),
                    c.bias.defined() ? static_cast<int>(c.bias.dtype()) : -1, align_a, align_b, align_d};
  auto it = algos.find(key);
  if (it == algos.end()) {
    Preference pref;
    check_lt(cublasLtMatmulPreferenceCreate(&pref.value), "cublasLtMatmulPreferenceCreate");
    const uint64_t workspace = kWorkspaceBytes;
    auto pref_set = [&](cublasLtMatmulPreferenceAttributes_t attribute, const auto& value) {
      check_lt(cublasLtMatmulPreferenceSetAttribute(pref.value, attribute, &value, sizeof(value)),
               "cublasLtMatmulPreferenceSetAttribute");
    };
    pref_set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace);
    pref_set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a);
    pref_set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b);
    pref_set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d);
    pref_set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d);
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(h.handle, desc.value, la.value, lb.value, ld.value,
                                                                 ld.value, pref.value, 1, &result, &returned);
    WEFT_CHECK(status == CUBLAS_STATUS_SUCCESS && returned > 0,
               "[matmul] cuBLASLt has no algorithm for ", a.dtype(), " (", a.size(0), ", ", a.size(1), ") · ",
               b.dtype(), " (", b.size(0), ", ", b.size(1), ") -> ", c.out.dtype(), " with layout ",
               plan.a.transposed ? "T" : "N", plan.b.transposed ? "T" : "N", ", epilogue ", static_cast<int>(epilogue),
               ", alignments ", align_a, "/", align_b, "/", align_d, " bytes (status ", static_cast<int>(status),
               ")");
    it = algos.emplace(key, result.algo).first;
  }
  const float alpha = 1.0f, beta = 0.0f;
  check_lt(cublasLtMatmul(h.handle, desc.value, &alpha, b.data_ptr(), la.value, a.data_ptr(), lb.value, &beta,
                          c.out.data_ptr(), ld.value, c.out.data_ptr(), ld.value, &it->second, h.workspace.data_ptr(),
                          kWorkspaceBytes, stream_for(c.out)),
           "cublasLtMatmul");
  return true;
}

}  // namespace weft::cuda::detail
