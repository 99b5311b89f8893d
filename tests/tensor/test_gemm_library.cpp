// Every CPU GEMM choice (tensor/cpu/gemm_library.h: weft's own; Eigen and OpenBLAS when built in)
// on every operand layout the kernel hands over without a copy — row-major, transposed views,
// rows padded by slicing, rows repeated by expand (stride 0), batched and broadcast — and on the
// fused bias of linear, each against a naive product in double of the same values made
// contiguous, in float32 and float64. The library switch itself, its names, and its errors in a
// build without Eigen or OpenBLAS (the default build) are checked too.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "tensor_test_helpers.h"
#include "tensor/all.h"

using namespace weft;
using testing::check_close;
using testing::random;

namespace {

// Sets the process-wide GEMM library for a scope.
class GemmLibraryGuard {
 public:
  explicit GemmLibraryGuard(GemmLibrary library) : previous_(cpu_gemm_library()) { set_cpu_gemm_library(library); }
  ~GemmLibraryGuard() { set_cpu_gemm_library(previous_); }
  GemmLibraryGuard(const GemmLibraryGuard&) = delete;
  GemmLibraryGuard& operator=(const GemmLibraryGuard&) = delete;

 private:
  GemmLibrary previous_;
};

std::vector<GemmLibrary> available_libraries() {
  std::vector<GemmLibrary> out{GemmLibrary::Weft};
  for (GemmLibrary library : {GemmLibrary::Eigen, GemmLibrary::OpenBLAS})
    if (cpu_gemm_library_available(library)) out.push_back(library);
  return out;
}

// (M, K) · (K, N) in double from the values alone (both made contiguous first).
std::vector<double> naive_mm(const Tensor& a, const Tensor& b) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const auto av = a.contiguous().to_vector<double>(), bv = b.contiguous().to_vector<double>();
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p)
        c[static_cast<size_t>(i * n + j)] += av[static_cast<size_t>(i * k + p)] * bv[static_cast<size_t>(p * n + j)];
  return c;
}

}  // namespace

TEST_CASE("every GEMM library computes every operand layout like the naive product") {
  for (const GemmLibrary library : available_libraries()) {
    for (const DType dtype : {kFloat32, kFloat64}) {
      CAPTURE(to_string(library));
      CAPTURE(dtype);
      GemmLibraryGuard guard(library);
      const double tol = dtype == kFloat32 ? 1e-5 : 1e-12;
      const Tensor a = random({37, 53}, 1, dtype), b = random({53, 29}, 2, dtype);
      // Row-major · row-major, and each side as a transposed view of a row-major matrix.
      check_close(matmul(a, b), naive_mm(a, b), tol);
      const Tensor at = random({53, 37}, 3, dtype), bt = random({29, 53}, 4, dtype);
      check_close(matmul(at.t(), b), naive_mm(at.t(), b), tol);
      check_close(matmul(a, bt.t()), naive_mm(a, bt.t()), tol);
      check_close(matmul(at.t(), bt.t()), naive_mm(at.t(), bt.t()), tol);
      // Rows padded: a column slice keeps the parent's row stride (leading dimension > cols).
      const Tensor wide = random({37, 80}, 5, dtype);
      check_close(matmul(wide.slice(1, 10, 63), b), naive_mm(wide.slice(1, 10, 63), b), tol);
      // Rows repeated by expand (row stride 0): must not be read as distinct rows.
      const Tensor row = random({1, 53}, 6, dtype).expand({37, 53});
      check_close(matmul(row, b), naive_mm(row, b), tol);
      const Tensor column = random({53, 1}, 7, dtype).expand({53, 29});
      check_close(matmul(a, column), naive_mm(a, column), tol);
      // Strided in both dims: copied first.
      const Tensor both = random({74, 106}, 8, dtype).slice(0, 0, 74, 2).slice(1, 0, 106, 2);
      check_close(matmul(both, b), naive_mm(both, b), tol);
      // Vector shapes: a single row and a single column.
      check_close(matmul(a.slice(0, 4, 5), b), naive_mm(a.slice(0, 4, 5), b), tol);
      check_close(matmul(a, b.slice(1, 3, 4)), naive_mm(a, b.slice(1, 3, 4)), tol);
      // A batch broadcast against one matrix: each product of the batch checked alone.
      const Tensor batch = random({3, 37, 53}, 9, dtype);
      const Tensor product = matmul(batch, b);
      for (int64_t i = 0; i < 3; ++i) check_close(product.select(0, i), naive_mm(batch.select(0, i), b), tol);
    }
  }
}

TEST_CASE("every GEMM library fuses linear's bias into the product, in float32, float64 and bfloat16") {
  for (const GemmLibrary library : available_libraries()) {
    CAPTURE(to_string(library));
    GemmLibraryGuard guard(library);
    for (const DType dtype : {kFloat32, kFloat64}) {
      const Tensor x = random({2, 5, 24}, 10, dtype), w = random({7, 24}, 11, dtype), b = random({7}, 12, dtype);
      const Tensor y = linear(x, w, b);
      CHECK(y.shape() == Shape{2, 5, 7});
      auto want = naive_mm(x.reshape({10, 24}), w.t());
      const auto bias = b.to_vector<double>();
      for (size_t i = 0; i < want.size(); ++i) want[i] += bias[i % 7];
      check_close(y.reshape({10, 7}), want, dtype == kFloat32 ? 1e-5 : 1e-12);
    }
    // Narrow dtypes compute in float32 and round once: bias included before the rounding.
    const Tensor x = random({3, 16}, 13, kBFloat16), w = random({4, 16}, 14, kBFloat16), b = random({4}, 15, kBFloat16);
    auto want = naive_mm(x, w.t());
    const auto bias = b.to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i) want[i] += bias[i % 4];
    const Tensor y = linear(x, w, b);
    CHECK(y.dtype() == kBFloat16);
    CHECK(y.to_vector<double>() == from_vector(want, {3, 4}, kFloat64).to(kBFloat16).to_vector<double>());
  }
}

TEST_CASE("the GEMM library switch: weft's own by default and always there, Eigen and OpenBLAS only when built in") {
  CHECK(cpu_gemm_library() == GemmLibrary::Weft);
  CHECK(cpu_gemm_library_available(GemmLibrary::Weft));
  for (GemmLibrary library : {GemmLibrary::Weft, GemmLibrary::Eigen, GemmLibrary::OpenBLAS})
    CHECK(gemm_library_from_name(to_string(library)) == library);
  CHECK(std::string(to_string(GemmLibrary::OpenBLAS)) == "openblas");
  CHECK_THROWS_WITH_AS(gemm_library_from_name("mkl"), "[gemm_library] expected one of weft, eigen, openblas, got 'mkl'",
                       Error);
  const std::pair<GemmLibrary, const char*> optional[] = {
      {GemmLibrary::Eigen, "[set_cpu_gemm_library] built without Eigen: configure with -DWEFT_EIGEN=ON"},
      {GemmLibrary::OpenBLAS, "[set_cpu_gemm_library] built without OpenBLAS: install libopenblas-openmp-dev and "
                              "configure with -DWEFT_OPENBLAS=ON"}};
  for (const auto& choice : optional) {
    const GemmLibrary library = choice.first;  // named: clang 14 lets CAPTURE take no structured binding
    const char* refusal = choice.second;
    CAPTURE(to_string(library));
    if (cpu_gemm_library_available(library)) {
      GemmLibraryGuard guard(library);
      CHECK(cpu_gemm_library() == library);
      CHECK(cpu_gemm_kernel(kFloat32) == to_string(library));
    } else {
      CHECK_THROWS_WITH_AS(set_cpu_gemm_library(library), refusal, Error);
      CHECK(cpu_gemm_library() == GemmLibrary::Weft);  // a refused choice changes nothing
    }
  }
}
