// Precision inputs: the canonical strings, the aliases and their warnings, the error for invalid
// values, and the cpu fallback (reference fabric-precision.md §1, cases T1–T3, T5).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "precision/all.h"

using namespace weft;
using namespace weft::precision;

namespace {

std::string error_of(const PrecisionInput& p) {
  try {
    parse_precision(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string historical_warning(const std::string& given, const std::string& canonical) {
  return "`precision=" + given + "` is supported for historical reasons but its usage is discouraged. "
         "Please set your precision to " + canonical + " instead!";
}

}  // namespace

TEST_CASE("T1: the 16-bit aliases normalise with a historical-reasons warning") {
  struct Case {
    PrecisionInput input;
    std::string given;
    std::string canonical;
  };
  const std::vector<Case> cases = {{16, "16", "16-mixed"}, {"16", "16", "16-mixed"}, {"bf16", "bf16", "bf16-mixed"}};
  for (const Case& c : cases) {
    CaptureWarnings warnings;
    CHECK(precision_name(parse_precision(c.input)) == c.canonical);
    REQUIRE(warnings.messages().size() == 1);
    CHECK(warnings.messages()[0] == historical_warning(c.given, c.canonical));
  }
}

TEST_CASE("T2: 32 and 64 aliases convert silently and canonical strings are unchanged") {
  CaptureWarnings warnings;
  CHECK(parse_precision(32) == PrecisionMode::Fp32True);
  CHECK(parse_precision("32") == PrecisionMode::Fp32True);
  CHECK(parse_precision(64) == PrecisionMode::Fp64True);
  CHECK(parse_precision("64") == PrecisionMode::Fp64True);
  const std::vector<std::string> canonical = {"transformer-engine", "transformer-engine-float16", "16-true", "16-mixed",
                                              "bf16-true", "bf16-mixed", "32-true", "64-true"};
  for (const std::string& s : canonical) {
    REQUIRE(precision_mode_named(s).has_value());
    CHECK(precision_name(*precision_mode_named(s)) == s);
    CHECK(precision_name(parse_precision(s)) == s);
  }
  CHECK_FALSE(precision_mode_named("bf16").has_value());  // an alias, not a canonical name
  CHECK(warnings.messages().empty());
  CHECK(precision_name(kDefaultPrecision) == "32-true");
}

TEST_CASE("T3: invalid precisions fail with the list of allowed values") {
  const std::string allowed =
      " is invalid. Allowed precision values: ('transformer-engine', 'transformer-engine-float16', '16-true', "
      "'16-mixed', 'bf16-true', 'bf16-mixed', '32-true', '64-true', 64, 32, 16, '64', '32', '16', 'bf16')";
  CHECK(error_of(1) == "[precision] Precision 1" + allowed);
  CHECK(error_of(12) == "[precision] Precision 12" + allowed);
  CHECK(error_of("invalid") == "[precision] Precision 'invalid'" + allowed);
  // Neither an unlisted integer nor a near-miss string is an alias.
  CHECK(error_of(8) == "[precision] Precision 8" + allowed);
  CHECK(error_of("16-bit") == "[precision] Precision '16-bit'" + allowed);
}

TEST_CASE("T5: 16-mixed on the cpu falls back to bf16-mixed with a warning") {
  {
    CaptureWarnings warnings;
    CHECK(precision_for_accelerator(PrecisionMode::Fp16Mixed, "cpu") == PrecisionMode::Bf16Mixed);
    REQUIRE(warnings.messages().size() == 1);
    CHECK(warnings.messages()[0] ==
          "You passed `Fabric(accelerator='cpu', precision='16-mixed')` but AMP with fp16 is not supported on CPU. "
          "Using `precision='bf16-mixed'` instead.");
  }
  CaptureWarnings warnings;
  CHECK(precision_for_accelerator(PrecisionMode::Fp16Mixed, "cuda") == PrecisionMode::Fp16Mixed);
  for (PrecisionMode m : {PrecisionMode::Bf16Mixed, PrecisionMode::Fp16True, PrecisionMode::Fp32True,
                          PrecisionMode::Fp64True})
    CHECK(precision_for_accelerator(m, "cpu") == m);
  CHECK(warnings.messages().empty());
  CHECK_THROWS_WITH_AS(precision_for_accelerator(PrecisionMode::Fp16Mixed, "tpu"),
                       "[precision] expected the accelerator 'cpu' or 'cuda', got 'tpu'", Error);
}

TEST_CASE("each mode's row: the dtypes of weights and compute, autocast, loss scaling and plugin") {
  struct Row {
    const char* name;
    DType params, compute;
    bool autocast, scaling;
    PluginKind plugin;
  };
  // Lightning: *-true casts the model; *-mixed keeps float32 weights and autocasts; only
  // 16-mixed scales the loss; transformer-engine keeps bf16 (or fp16) weights under its own plugin.
  const Row rows[] = {
      {"transformer-engine", kBFloat16, kBFloat16, true, false, PluginKind::TransformerEngine},
      {"transformer-engine-float16", kFloat16, kFloat16, true, false, PluginKind::TransformerEngine},
      {"16-true", kFloat16, kFloat16, false, false, PluginKind::Half},
      {"16-mixed", kFloat32, kFloat16, true, true, PluginKind::Mixed},
      {"bf16-true", kBFloat16, kBFloat16, false, false, PluginKind::Half},
      {"bf16-mixed", kFloat32, kBFloat16, true, false, PluginKind::Mixed},
      {"32-true", kFloat32, kFloat32, false, false, PluginKind::Float32},
      {"64-true", kFloat64, kFloat64, false, false, PluginKind::Double},
  };
  REQUIRE(std::size(rows) == std::size(kPrecisionModes));
  for (size_t i = 0; i < std::size(rows); ++i) {
    const PrecisionTraits& t = kPrecisionModes[i];
    CAPTURE(rows[i].name);
    CHECK(t.name == rows[i].name);  // Lightning's declaration order
    CHECK(precision_traits(t.mode).name == t.name);
    CHECK(t.param_dtype == rows[i].params);
    CHECK(t.compute_dtype == rows[i].compute);
    CHECK(t.autocast == rows[i].autocast);
    CHECK(t.loss_scaling == rows[i].scaling);
    CHECK(t.plugin == rows[i].plugin);
  }
}

TEST_CASE("warnings go to the innermost handler of their own thread and come back on exit") {
  std::vector<std::string> outer_seen;
  WarningHandlerGuard outer([&](const std::string& m) { outer_seen.push_back(m); });
  {
    CaptureWarnings inner;
    warn("inner");
    CHECK(inner.messages() == std::vector<std::string>{"inner"});
  }
  try {
    CaptureWarnings throwing;
    throw Error("boom");
  } catch (const Error&) {
  }
  warn("outer");
  CHECK(outer_seen == std::vector<std::string>{"outer"});
}
