// Enum values outside their enumerators at the tensor floor's public entry points: each is refused
// with an error naming the op, the enum and the value (tensor/enum_check.h), never a crash or a
// table read out of bounds. set_cpu_isa(CpuIsa(42)) used to segfault building its own message.
#include <doctest/doctest.h>

#include <sstream>
#include <string>

#include "error_message.h"
#include "tensor/all.h"

using namespace weft;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("set_cpu_isa and cpu_isa_name refuse a value outside CpuIsa, and the level stays") {
  const CpuIsa before = cpu_isa();
  CHECK(error_of([] { set_cpu_isa(static_cast<CpuIsa>(42)); }) ==
        "[set_cpu_isa] expected a valid CpuIsa (0 to 5), got the value 42");
  CHECK(error_of([] { cpu_isa_name(static_cast<CpuIsa>(6)); }) ==
        "[cpu_isa_name] expected a valid CpuIsa (0 to 5), got the value 6");
  CHECK(error_of([] { CpuIsaGuard guard(static_cast<CpuIsa>(255)); }) ==
        "[set_cpu_isa] expected a valid CpuIsa (0 to 5), got the value 255");
  CHECK(cpu_isa() == before);
}

TEST_CASE("tensor factories, to() and promote_types refuse a value outside DType") {
  const DType bad = static_cast<DType>(kNumDTypes + 3);
  const std::string expected = "expected a valid DType (0 to " + std::to_string(kNumDTypes - 1) +
                               "), got the value " + std::to_string(kNumDTypes + 3);
  CHECK(error_of([&] { zeros({2}, bad); }) == "[tensor factory] " + expected);
  CHECK(error_of([&] { empty({2}, TensorOptions().dtype(bad)); }) == "[tensor factory] " + expected);
  CHECK(error_of([&] { ones({2}).to(bad); }) == "[Tensor.to] " + expected);
  CHECK(error_of([&] { promote_types(kFloat32, bad); }) == "[promote_types] " + expected);
  // Printing one (as an error message about it does) names it instead of reading past the table.
  std::ostringstream os;
  os << bad;
  CHECK(os.str() == "DType(" + std::to_string(kNumDTypes + 3) + ")");
}

TEST_CASE("a Device whose type is outside DeviceType is refused where a tensor is made or moved") {
  const Device bad(static_cast<DeviceType>(7), 0);
  CHECK(error_of([&] { zeros({2}, bad); }) == "[tensor factory] expected a valid DeviceType (0 to 1), got the value 7");
  CHECK(error_of([&] { ones({2}).to(bad); }) == "[Tensor.to] expected a valid DeviceType (0 to 1), got the value 7");
  std::ostringstream os;
  os << bad;
  CHECK(os.str() == "DeviceType(7)");
}

TEST_CASE("the losses refuse a value outside Reduction") {
  const Tensor logits = zeros({2, 3});
  const Tensor target = zeros({2}, kInt64);
  const auto bad = static_cast<Reduction>(3);
  CHECK(error_of([&] { cross_entropy(logits, target, bad); }) ==
        "[cross_entropy] expected a valid Reduction (0 to 2), got the value 3");
  CHECK(error_of([&] { nll_loss(logits, target, bad); }) ==
        "[nll_loss] expected a valid Reduction (0 to 2), got the value 3");
  CHECK(error_of([&] { mse_loss(logits, logits, static_cast<Reduction>(-1)); }) ==
        "[mse_loss] expected a valid Reduction (0 to 2), got the value -1");
}

TEST_CASE("the CPU GEMM library switch refuses a value outside GemmLibrary") {
  const GemmLibrary before = cpu_gemm_library();
  CHECK(contains(error_of([] { set_cpu_gemm_library(static_cast<GemmLibrary>(9)); }),
                 "[set_cpu_gemm_library] expected a valid GemmLibrary (0 to 2), got the value 9"));
  CHECK(contains(error_of([] { cpu_gemm_library_available(static_cast<GemmLibrary>(9)); }),
                 "[cpu_gemm_library_available] expected a valid GemmLibrary (0 to 2)"));
  CHECK(cpu_gemm_library() == before);
}
