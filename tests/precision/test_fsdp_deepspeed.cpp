// FSDPPrecision and DeepSpeedPrecision: their dtype tables written out in full, their warnings
// and their errors (reference fabric-precision.md §3.5–3.6, cases T17–T20).
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "precision/all.h"

using namespace weft;
using namespace weft::precision;

namespace {

struct FSDPRow {
  const char* precision;
  FSDPMixedPrecision config;
  bool warns;
  DType input_and_init;
  std::optional<DType> convert_module;
  std::optional<DType> forward_autocast;
  std::optional<DType> forward_default;
  bool has_scaler;
};

// Lightning ≥ 2.6.4 (mixed_precision_config since 2.6.0, module_init_context since 2.6.4).
const std::vector<FSDPRow> kFSDPTable = {
    {"32-true", {kFloat32, kFloat32, kFloat32}, false, kFloat32, kFloat32, std::nullopt, kFloat32, false},
    {"16-true", {kFloat16, kFloat16, kFloat16}, true, kFloat16, kFloat16, std::nullopt, kFloat16, false},
    {"bf16-true", {kBFloat16, kBFloat16, kBFloat16}, true, kBFloat16, kBFloat16, std::nullopt, kBFloat16, false},
    {"16-mixed", {kFloat16, kFloat16, kFloat16}, false, kFloat32, std::nullopt, kFloat16, std::nullopt, true},
    {"bf16-mixed", {kBFloat16, kBFloat16, kBFloat16}, false, kFloat32, std::nullopt, kBFloat16, std::nullopt, false},
};

}  // namespace

TEST_CASE("T17: FSDP mixed_precision_config for the five precisions, warning for the true modes") {
  for (const FSDPRow& row : kFSDPTable) {
    CAPTURE(row.precision);
    const FSDPPrecision plugin(row.precision);
    CaptureWarnings warnings;
    CHECK(plugin.mixed_precision_config() == row.config);
    plugin.mixed_precision_config();  // warns at every access, not once
    if (row.warns) {
      const std::string expected = std::string("FSDP with `") + row.precision +
                                   "` enables computation in lower precision. FSDP will always retain a "
                                   "full-precision copy of the model parameters for sharding.";
      CHECK(warnings.messages() == std::vector<std::string>{expected, expected});
    } else {
      CHECK(warnings.messages().empty());
    }
  }
}

TEST_CASE("T18: FSDP input, init-context, convert_module and forward dtypes") {
  for (const FSDPRow& row : kFSDPTable) {
    CAPTURE(row.precision);
    const FSDPPrecision plugin(row.precision);
    CHECK(plugin.precision() == row.precision);
    CHECK(plugin.desired_input_dtype() == row.input_and_init);
    CHECK(plugin.tensor_init_dtype() == row.input_and_init);
    CHECK(plugin.module_init_dtype() == row.input_and_init);
    CHECK(plugin.convert_module_dtype() == row.convert_module);
    CHECK(plugin.forward_autocast_dtype() == row.forward_autocast);
    CHECK(plugin.forward_default_dtype() == row.forward_default);
    CHECK((plugin.scaler() != nullptr) == row.has_scaler);
  }
}

TEST_CASE("T19: FSDP and DeepSpeed refuse precisions outside their set") {
  CHECK_THROWS_WITH_AS(FSDPPrecision("64-true"),
                       "[FSDPPrecision] `precision='64-true'` is not supported in FSDP. `precision` must be one of: "
                       "('32-true', '16-true', 'bf16-true', '16-mixed', 'bf16-mixed').",
                       Error);
  CHECK_THROWS_WITH_AS(DeepSpeedPrecision("64-true"),
                       "[DeepSpeedPrecision] `precision='64-true'` is not supported in DeepSpeed. `precision` must be "
                       "one of: ('32-true', '16-true', 'bf16-true', '16-mixed', 'bf16-mixed').",
                       Error);
  for (const char* p : {"transformer-engine", "16", "bf16", "32"}) {
    CHECK_THROWS_AS(FSDPPrecision{p}, Error);
    CHECK_THROWS_AS(DeepSpeedPrecision{p}, Error);
  }
}

TEST_CASE("FSDP takes a user scaler for 16-mixed only") {
  auto scaler = std::make_shared<GradScaler>(GradScalerOptions{.init_scale = 128.0});
  const FSDPPrecision with_scaler("16-mixed", scaler);
  CHECK(with_scaler.scaler() == scaler);
  CHECK(FSDPPrecision("16-mixed").scaler()->get_scale() == 65536.0);
  for (const char* p : {"bf16-mixed", "32-true", "16-true", "bf16-true"}) {
    CAPTURE(p);
    const std::string expected = std::string("`precision='") + p + "'` does not use a scaler";
    CHECK_THROWS_WITH_AS(FSDPPrecision(p, scaler), doctest::Contains(expected.c_str()), Error);
  }
}

TEST_CASE("T20: DeepSpeed desired dtypes and init contexts") {
  struct Row {
    const char* precision;
    DType desired;
    std::optional<DType> module_and_init;
  };
  const std::vector<Row> table = {
      {"32-true", kFloat32, kFloat32},      {"16-true", kFloat16, kFloat16},
      {"bf16-true", kBFloat16, kBFloat16}, {"16-mixed", kFloat16, std::nullopt},
      {"bf16-mixed", kBFloat16, std::nullopt},
  };
  for (const Row& row : table) {
    CAPTURE(row.precision);
    const DeepSpeedPrecision plugin(row.precision);
    CHECK(plugin.precision() == row.precision);
    CHECK(plugin.desired_dtype() == row.desired);
    CHECK(plugin.convert_module_dtype() == row.module_and_init);
    CHECK(plugin.tensor_init_dtype() == row.module_and_init);
    CHECK(plugin.module_init_dtype() == row.module_and_init);
  }
}
