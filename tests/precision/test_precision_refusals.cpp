// What the precision floor refuses up front: enum values outside their enumerators (Fp8Format,
// AmaxComputeAlgo, Fp8Role, QuantKind), float8 inputs and compute dtypes under the one dtype rule
// of every linear layer (Note [Linear dtype rule] in nn/linear.h), and Fp8Linear arguments that
// used to surface as fp8_gemm stride errors or a bare std::bad_alloc.
#include <doctest/doctest.h>

#include <string>

#include "error_message.h"
#include "precision/all.h"

using namespace weft;
using namespace weft::precision;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const std::string kRule = "linear layers compute in float64, float32, float16 or bfloat16; got ";

}  // namespace

TEST_CASE("FP8 recipes and helpers refuse enum values outside their enumerators") {
  const auto bad_format = static_cast<Fp8Format>(9);
  CHECK(error_of([&] { validate(DelayedScaling{.fp8_format = bad_format}); }) ==
        "[fp8 recipe] expected a valid Fp8Format (0 to 2), got the value 9");
  CHECK(error_of([&] { validate(Float8CurrentScaling{.fp8_format = bad_format}); }) ==
        "[fp8 recipe] expected a valid Fp8Format (0 to 2), got the value 9");
  CHECK(error_of([&] { Fp8AutocastGuard guard(true, DelayedScaling{.fp8_format = bad_format}); }) ==
        "[fp8 recipe] expected a valid Fp8Format (0 to 2), got the value 9");
  CHECK(error_of([] { validate(DelayedScaling{.amax_compute_algo = static_cast<AmaxComputeAlgo>(5)}); }) ==
        "[DelayedScaling] expected a valid AmaxComputeAlgo (0 to 1), got the value 5");
  CHECK(error_of([&] { fp8_dtype_for(bad_format, Fp8Role::Input); }) ==
        "[fp8_dtype_for] expected a valid Fp8Format (0 to 2), got the value 9");
  CHECK(error_of([] { fp8_dtype_for(Fp8Format::HYBRID, static_cast<Fp8Role>(3)); }) ==
        "[fp8_dtype_for] expected a valid Fp8Role (0 to 2), got the value 3");
  CHECK(error_of([] { to_string(static_cast<AmaxComputeAlgo>(2)); }) ==
        "[to_string] expected a valid AmaxComputeAlgo (0 to 1), got the value 2");
  CHECK_FALSE(fp8_autocast_state().enabled);  // the refused guard left no scope behind
}

TEST_CASE("precision_for_accelerator refuses a PrecisionMode outside its enumerators") {
  CHECK(error_of([] { precision_for_accelerator(static_cast<PrecisionMode>(8), "cpu"); }) ==
        "[precision] expected a valid PrecisionMode (0 to 7), got the value 8");
}

TEST_CASE("quantized layers and formats refuse a QuantKind outside its enumerators") {
  const auto bad = static_cast<quant::QuantKind>(9);
  CHECK(error_of([&] { quant::quant_format(bad); }) ==
        "[quant_format] expected a valid QuantKind (0 to 3), got the value 9");
  quant::Linear4bitOptions options;
  options.quant_type = bad;
  CHECK(contains(error_of([&] { quant::Linear4bit(8, 4, true, options); }),
                 "expected a valid QuantKind (0 to 3), got the value 9"));
}

TEST_CASE("every linear layer refuses a float8 input with the same rule, naming itself") {
  manual_seed(0);
  const Tensor x = ones({2, 16});
  for (DType fp8 : {kFloat8E4M3FN, kFloat8E5M2}) {
    CAPTURE(fp8);
    const Tensor x8 = x.to(fp8);
    nn::Linear linear(16, 16);
    CHECK(contains(error_of([&] { linear(x8); }), "[Linear] " + kRule + "an input in " +
                                                       std::string(dtype_name(fp8)) + " (float8 is a storage format"));
    quant::Linear4bit four(16, 16);
    CHECK(contains(error_of([&] { four(x8); }), "[Linear4bit] " + kRule + "an input in"));
    quant::Linear8bitLt eight(16, 16);
    CHECK(contains(error_of([&] { eight(x8); }), "[Linear8bitLt] " + kRule + "an input in"));
    Fp8Linear fp8_linear(16, 16);
    CHECK(contains(error_of([&] { fp8_linear(x8); }), "[Fp8Linear] " + kRule + "an input in"));
    {
      Fp8AutocastGuard on(true);
      CHECK(contains(error_of([&] { fp8_linear(x8); }), "[Fp8Linear] " + kRule + "an input in"));
    }
    // Linear4bit's compute dtype follows the same rule (it used to compute at bfloat16 silently).
    CHECK(contains(error_of([&] { quant::Linear4bit(16, 16, true, quant::Linear4bitOptions{.compute_dtype = fp8}); }),
                   "[Linear4bit] " + kRule + "the compute dtype float8"));
    CHECK(contains(error_of([&] { four->set_compute_dtype(fp8); }), "[Linear4bit] " + kRule + "the compute dtype"));
    CHECK_FALSE(four->options().compute_dtype.has_value());
  }
  // Inputs in the four compute dtypes still run through every layer.
  for (DType dtype : {kFloat32, kBFloat16}) {
    CAPTURE(dtype);
    CHECK(nn::Linear(16, 16)(x.to(dtype)).shape() == Shape{2, 16});
    CHECK(quant::Linear4bit(16, 16)(x.to(dtype)).dtype() == dtype);
    CHECK(quant::Linear8bitLt(16, 16)(x.to(dtype)).dtype() == dtype);
  }
}

TEST_CASE("Fp8Linear checks its own arguments before anything else") {
  CHECK(error_of([] { Fp8Linear(0, 16); }) ==
        "[Fp8Linear] expected positive feature counts, got in_features=0 and out_features=16");
  CHECK(error_of([] { Fp8Linear(16, -16); }) ==
        "[Fp8Linear] expected positive feature counts, got in_features=16 and out_features=-16");
  CHECK(contains(error_of([] { Fp8Linear(24, 16); }), "in_features=24 is not divisible by 16"));
  const int64_t huge = int64_t{1} << 40;
  CHECK(error_of([&] { Fp8Linear(16, 16, true, huge); }) ==
        "[Fp8Linear] amax_history_len must lie in [1, 1048576], got 1099511627776");
  CHECK(error_of([] { Fp8Linear(16, 16, true, 0); }) ==
        "[Fp8Linear] amax_history_len must lie in [1, 1048576], got 0");
  CHECK(error_of([&] { validate(DelayedScaling{.amax_history_len = huge}); }) ==
        "[DelayedScaling] amax_history_len must lie in [1, 1048576], got 1099511627776");
  CHECK(error_of([&] { Fp8Metadata meta(huge); }) ==
        "[Fp8Metadata] amax_history_len must lie in [1, 1048576], got 1099511627776");
  Fp8Metadata meta(4);
  CHECK(error_of([&] { meta.resize_amax_history(huge); }) ==
        "[Fp8Metadata] amax_history_len must lie in [1, 1048576], got 1099511627776");
  CHECK(meta.amax_history_len() == 4);
}
