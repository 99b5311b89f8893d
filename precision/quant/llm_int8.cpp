// LLM.int8() tensor functions on top of the llm_int8 QuantFormat row and the int8 GEMM.
#include "precision/quant/llm_int8.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "precision/quant/int8_gemm.h"
#include "precision/quant/llm_int8_kernels.h"
#include "precision/quant/quant_format.h"
#include "precision/quant/quant_kernels.h"
#include "tensor/cpu/gemm/gemm.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace weft::precision::quant {
namespace {

// bitsandbytes' dequantization constant, 1/127² as float32 (the CUDA kernel's is 6.200012e-05).
constexpr float kProductScale = 6.200124e-05f;

void check_matrix(const Tensor& t, DType dtype, const char* name, const char* op) {
  WEFT_CHECK(t.defined() && t.dim() == 2 && t.dtype() == dtype, "[", op, "] expected ", name, " as a 2-D ", dtype,
             " tensor, got ", t.defined() ? weft::detail::cat(t.shape(), " ", t.dtype()) : std::string("none"));
}

void check_vector(const Tensor& t, int64_t size, const char* name, const char* op) {
  WEFT_CHECK(t.defined() && t.dtype() == kFloat32 && t.numel() == size, "[", op, "] expected ", name, " as ", size,
             " float32 values, got ", t.defined() ? weft::detail::cat(t.shape(), " ", t.dtype()) : std::string("none"));
}

// The scalar reference of the rows' quantization (kernels::QuantizeInt8RowsArgs): each row copied
// with its outliers set to 0 and quantized by the llm_int8 format's reference.
void quantize_int8_rows_reference(const kernels::QuantizeInt8RowsArgs& p) {
  std::vector<float> row(static_cast<size_t>(p.k));
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int64_t c = 0; c < p.k; ++c) {
      const float v = p.x[r * p.k + c];
      const bool outlier = p.outliers && std::fabs(v) >= p.threshold;
      p.outlier_col[c] |= static_cast<uint8_t>(outlier);
      row[static_cast<size_t>(c)] = outlier ? 0.0f : v;  // left out of the row's absmax and quantized as 0
    }
    quant_format(QuantKind::LlmInt8)
        .quantize(row.data(), p.k, p.k, reinterpret_cast<uint8_t*>(p.codes + r * p.k), p.stats + r);
  }
}

using RowQuantizer = void (*)(const kernels::QuantizeInt8RowsArgs&);

RowQuantizer row_quantizer(CpuIsa isa) {
  return isa >= CpuIsa::Avx2 ? kernels::quantize_int8_rows_avx2 : quantize_int8_rows_reference;
}

// Values per thread's run of rows (~20 µs with AVX2): a 128-row batch of 4096 features splits.
constexpr int64_t kValuesPerPart = int64_t{1} << 16;

}  // namespace

Int8Rows int8_vectorwise_quant(const Tensor& a, double threshold) {
  WEFT_CHECK(a.defined() && a.is_floating_point() && a.dim() >= 1, "[int8_vectorwise_quant] expected a floating ",
             "tensor with at least one dimension, got ", a.defined() ? weft::detail::cat(a.shape(), " ", a.dtype())
                                                                   : std::string("none"));
  WEFT_CHECK(threshold >= 0, "[int8_vectorwise_quant] the outlier threshold must be >= 0 (0 disables it), got ",
             threshold);
  const int64_t k = a.size(-1);
  WEFT_CHECK(k > 0, "[int8_vectorwise_quant] rows must hold at least one value, got shape ", a.shape());
  const int64_t rows = a.numel() / k;
  // Computed on the CPU whatever a's device (the quantization is not part of the device seam:
  // quant_kernels.h), and returned on a's device.
  const Tensor values = a.to(kCPU).to(kFloat32).reshape({rows, k}).contiguous();
  // PyTorch compares |a| >= threshold in a's dtype, so the threshold is rounded to it first.
  const float t = threshold > 0 ? scalar_tensor(threshold, TensorOptions(a.dtype()).device(kCPU)).item<float>() : 0.0f;
  Int8Rows out;
  out.codes = weft::detail::make_tensor({rows, k}, kInt8, kCPU);
  out.stats = weft::detail::make_tensor({rows}, kFloat32, kCPU);
  // Runs of rows on weft's threads, each flagging outlier columns in its own copy of the flags.
  const RowQuantizer quantize = row_quantizer(cpu_isa());
  const int64_t parts = std::clamp<int64_t>(rows * k / kValuesPerPart, 1, std::min<int64_t>(num_threads(), rows));
  std::vector<uint8_t> part_cols(static_cast<size_t>(parts * k), 0);
  parallel_for_if(parts > 1, parts, [&](int64_t part) {
    const int64_t first = rows * part / parts, count = rows * (part + 1) / parts - first;
    quantize({values.data<float>() + first * k, count, k, threshold > 0, t, out.codes.data<int8_t>() + first * k,
              out.stats.data<float>() + first, part_cols.data() + part * k});
  });
  std::vector<uint8_t> outlier_col(part_cols.begin(), part_cols.begin() + k);
  for (int64_t part = 1; part < parts; ++part)
    for (int64_t c = 0; c < k; ++c) outlier_col[static_cast<size_t>(c)] |= part_cols[static_cast<size_t>(part * k + c)];

  std::vector<int64_t> cols;
  for (int64_t c = 0; c < k; ++c)
    if (outlier_col[static_cast<size_t>(c)]) cols.push_back(c);
  if (rows > 1) {
    int8_t* codes = out.codes.data<int8_t>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c : cols) codes[r * k + c] = 0;
  }
  out.outlier_cols = from_vector(cols, {static_cast<int64_t>(cols.size())}, TensorOptions(kInt64).device(kCPU));
  if (!a.device().is_cpu()) {
    out.codes = out.codes.to(a.device());
    out.stats = out.stats.to(a.device());
    out.outlier_cols = out.outlier_cols.to(a.device());
  }
  return out;
}

Tensor int8_vectorwise_dequant(const Tensor& codes, const Tensor& stats) {
  check_matrix(codes, kInt8, "codes", "int8_vectorwise_dequant");
  check_vector(stats, codes.size(0), "stats", "int8_vectorwise_dequant");
  // On the CPU, returned on the codes' device.
  const Tensor c = codes.to(kCPU).contiguous();
  Tensor out = weft::detail::make_tensor(codes.shape(), kFloat32, kCPU);
  int8_dequantize_rows(c.data<int8_t>(), stats.to(kCPU).contiguous().data<float>(), codes.numel(), codes.size(1),
                       out.data<float>());
  return out.to(codes.device());
}

namespace {

// The int8 weight as a GEMM source of B's rows: codes (N, K) and their row statistics, each run
// dequantized as int8_vectorwise_dequant dequantizes.
using Int8RowDequantizer = void (*)(const int8_t* codes, const float* stats, int64_t n, int64_t row, float* out);

void dequantize_int8_rows_reference(const int8_t* codes, const float* stats, int64_t n, int64_t row, float* out) {
  quant_format(QuantKind::LlmInt8).dequantize(reinterpret_cast<const uint8_t*>(codes), stats, n, row, out);
}

Int8RowDequantizer int8_row_dequantizer(CpuIsa isa) {
  WEFT_CHECK(isa <= cpu_isa_supported(), "[int8_dequantize_rows] this CPU supports up to ",
             cpu_isa_name(cpu_isa_supported()), ", not ", cpu_isa_name(isa));
  return isa >= CpuIsa::Avx2 ? kernels::dequantize_int8_rows_avx2 : dequantize_int8_rows_reference;
}

struct Int8RowsSource {
  const int8_t* codes;
  const float* stats;
  int64_t k;
  Int8RowDequantizer dequantize;  // chosen once per product, not per run
};

void fill_int8_rows(const void* context, int64_t r0, int64_t rows, int64_t p0, int64_t kc, void* out) {
  const auto& s = *static_cast<const Int8RowsSource*>(context);
  for (int64_t r = 0; r < rows; ++r)
    s.dequantize(s.codes + (r0 + r) * s.k + p0, s.stats + r0 + r, kc, kc, static_cast<float*>(out) + r * kc);
}

}  // namespace

Tensor int8_dequant_matmul(const Tensor& g, const Tensor& codes, const Tensor& stats) {
  check_matrix(codes, kInt8, "codes", "int8_dequant_matmul");
  check_vector(stats, codes.size(0), "stats", "int8_dequant_matmul");
  check_matrix(g, kFloat32, "g", "int8_dequant_matmul");
  WEFT_CHECK(g.size(1) == codes.size(0), "[int8_dequant_matmul] g (M, N) and the codes (N, K) must share N, got ",
             g.shape(), " and ", codes.shape());
  if (!g.device().is_cpu()) return matmul(g, int8_vectorwise_dequant(codes, stats).to(g.device()));
  // W's rows dequantized a block at a time inside the GEMM: a 4096² weight in float32 is 64 MiB
  // written and read back per call.
  const Tensor gc = g.contiguous(), cc = codes.contiguous(), sc = stats.contiguous();
  const int64_t m = g.size(0), n = codes.size(0), k = codes.size(1);
  Tensor out = weft::detail::make_tensor({m, k}, kFloat32, kCPU);
  const Int8RowsSource rows{cc.data<int8_t>(), sc.data<float>(), k, int8_row_dequantizer(cpu_isa())};
  weft::detail::gemm(m, k, n, {gc.data<float>(), n, 1, false}, {fill_int8_rows, &rows, 1}, false, out.data<float>(), k,
                     false);
  return out;
}

Tensor int8_linear_matmul(const Tensor& a, const Tensor& b) {
  check_matrix(a, kInt8, "A", "int8_linear_matmul");
  check_matrix(b, kInt8, "B", "int8_linear_matmul");
  WEFT_CHECK(a.size(1) == b.size(1), "[int8_linear_matmul] A (M, K) and B (N, K) must share K, got ", a.shape(),
             " and ", b.shape());
  WEFT_CHECK(a.device() == b.device(), "[int8_linear_matmul] expected A and B on one device, got ", a.device(),
             " and ", b.device());
  if (const Int8GemmKernel kernel = int8_gemm_kernel(a.device().type)) return kernel(a, b);
  WEFT_CHECK(a.device().is_cpu(), "[int8_linear_matmul] no int8 kernel for ", a.device(),
             " in this build; the CUDA backend installs one with set_int8_gemm_kernel");
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  Tensor c = weft::detail::make_tensor({a.size(0), b.size(0)}, kInt32, kCPU);
  int8_gemm(ac.data<int8_t>(), bc.data<int8_t>(), c.data<int32_t>(), a.size(0), b.size(0), a.size(1));
  return c;
}

Tensor int8_linear_matmul(const Tensor& a, const PackedInt8Matrix& b) {
  check_matrix(a, kInt8, "A", "int8_linear_matmul");
  WEFT_CHECK(a.size(1) == b.cols(), "[int8_linear_matmul] A (M, K) and the packed B (N, K) must share K, got ",
             a.shape(), " and (", b.rows(), ", ", b.cols(), ")");
  const Tensor ac = a.contiguous();
  Tensor c = weft::detail::make_tensor({a.size(0), b.rows()}, kInt32, kCPU);
  int8_gemm(ac.data<int8_t>(), a.size(0), b, c.data<int32_t>());
  return c;
}

Tensor int8_mm_dequant(const Tensor& c, const Tensor& row_stats, const Tensor& col_stats, DType dtype,
                       const Tensor& bias) {
  check_matrix(c, kInt32, "the int32 product", "int8_mm_dequant");
  const int64_t m = c.size(0), n = c.size(1);
  check_vector(row_stats, m, "row_stats", "int8_mm_dequant");
  check_vector(col_stats, n, "col_stats", "int8_mm_dequant");
  WEFT_CHECK(!bias.defined() || (bias.is_floating_point() && bias.numel() == n), "[int8_mm_dequant] expected a ",
             "floating bias of ", n, " values, got ", bias.defined() ? weft::detail::cat(bias.shape(), " ", bias.dtype())
                                                                     : std::string("none"));
  // On the CPU (a device's int8 kernel returns c on the device), returned on c's device.
  const Tensor cc = c.to(kCPU).contiguous();
  const Tensor rs = row_stats.to(kCPU).contiguous(), cs = col_stats.to(kCPU).contiguous();
  const Tensor b = bias.defined() ? bias.to(kCPU).to(kFloat32).contiguous() : Tensor();
  Tensor out = weft::detail::make_tensor({m, n}, kFloat32, kCPU);
  const int32_t* ci = cc.data<int32_t>();
  const float *r = rs.data<float>(), *s = cs.data<float>();
  const float* bias_values = b.defined() ? b.data<float>() : nullptr;
  float* o = out.data<float>();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float scale = r[i] * s[j];
      const float scaled = static_cast<float>(ci[i * n + j]) * scale;
      o[i * n + j] = scaled * kProductScale;
    }
  if (bias_values != nullptr)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) o[i * n + j] += bias_values[j];
  return out.to(dtype).to(c.device());
}

Tensor int8_mixed_scaled_mm(const Tensor& a, const Int8Rows& q, const Tensor& cb, const Tensor& scb,
                            const Tensor& bias, const PackedInt8Matrix* packed_cb) {
  check_matrix(a, a.defined() ? a.dtype() : kFloat32, "A", "int8_mixed_scaled_mm");
  WEFT_CHECK(a.is_floating_point() && q.codes.defined() && q.codes.shape() == a.shape(), "[int8_mixed_scaled_mm] ",
             "expected A floating and its quantization of the same shape, got ", a.shape(), " ", a.dtype(), " and ",
             q.codes.defined() ? weft::detail::cat(q.codes.shape()) : std::string("none"));
  // The CPU's packed weight serves only its built-in kernel; an installed kernel gets cb itself.
  const bool use_packed = packed_cb != nullptr && !int8_gemm_kernel(a.device().type);
  const Tensor c = use_packed ? int8_linear_matmul(q.codes, *packed_cb) : int8_linear_matmul(q.codes, cb);
  Tensor out = int8_mm_dequant(c, q.stats, scb, a.dtype(), bias);
  const int64_t outliers = q.outlier_cols.numel();
  if (outliers == 0) return out;
  // The outlier columns in floating point: out += a[:, cols] · (cb[:, cols] · scb / 127)ᵀ, each
  // operand rounded to a's dtype first, the dot product accumulated in float32 with fused
  // multiply-adds in column order (as PyTorch's CPU GEMM does), then added to the product, on the
  // CPU. Only those columns are gathered and dequantized: dequantizing the whole weight every
  // forward made a single outlier column cost 6.6 times the int8 layer (512×784, batch 128).
  // On the CPU whatever the device (copies there; none for CPU tensors), returned on a's device.
  const Device device = a.device();
  const int64_t m = a.size(0), n = cb.size(0);
  const Tensor cols = q.outlier_cols.to(kCPU);
  const Tensor x = index_select(a.to(kCPU), 1, cols).to(kFloat32).contiguous();
  const Tensor w_cols = int8_vectorwise_dequant(index_select(cb.to(kCPU), 1, cols), scb.to(kCPU));
  const Tensor wt = w_cols.to(a.dtype()).to(kFloat32).t().contiguous();
  Tensor result = out.to(kFloat32).to(kCPU).contiguous();
  int8_outlier_correction(x.data<float>(), wt.data<float>(), m, n, outliers, result.data<float>());
  return result.to(a.dtype()).to(device);
}

void int8_outlier_correction(const float* x, const float* wt, int64_t m, int64_t n, int64_t outliers, float* out,
                             CpuIsa isa) {
  WEFT_CHECK(isa <= cpu_isa_supported(), "[int8_outlier_correction] this CPU supports up to ",
             cpu_isa_name(cpu_isa_supported()), ", not ", cpu_isa_name(isa));
  if (isa >= CpuIsa::Avx2) return kernels::outlier_correction_avx2(x, wt, m, n, outliers, out);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float dot = 0.0f;
      for (int64_t c = 0; c < outliers; ++c) dot = std::fma(x[i * outliers + c], wt[c * n + j], dot);
      out[i * n + j] += dot;
    }
}

void int8_dequantize_rows(const int8_t* codes, const float* stats, int64_t n, int64_t row, float* out, CpuIsa isa) {
  int8_row_dequantizer(isa)(codes, stats, n, row, out);
}

}  // namespace weft::precision::quant
