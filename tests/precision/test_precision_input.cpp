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
    normalize_precision(p);
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
    CHECK(normalize_precision(c.input) == c.canonical);
    REQUIRE(warnings.messages().size() == 1);
    CHECK(warnings.messages()[0] == historical_warning(c.given, c.canonical));
  }
}

TEST_CASE("T2: 32 and 64 aliases convert silently and canonical strings are unchanged") {
  CaptureWarnings warnings;
  CHECK(normalize_precision(32) == "32-true");
  CHECK(normalize_precision("32") == "32-true");
  CHECK(normalize_precision(64) == "64-true");
  CHECK(normalize_precision("64") == "64-true");
  const std::vector<std::string> canonical = {"transformer-engine", "transformer-engine-float16", "16-true", "16-mixed",
                                              "bf16-true", "bf16-mixed", "32-true", "64-true"};
  for (const std::string& s : canonical) {
    CHECK(is_canonical_precision(s));
    CHECK(normalize_precision(s) == s);
  }
  CHECK(warnings.messages().empty());
  CHECK(kDefaultPrecision == "32-true");
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
    CHECK(precision_for_accelerator("16-mixed", "cpu") == "bf16-mixed");
    REQUIRE(warnings.messages().size() == 1);
    CHECK(warnings.messages()[0] ==
          "You passed `Fabric(accelerator='cpu', precision='16-mixed')` but AMP with fp16 is not supported on CPU. "
          "Using `precision='bf16-mixed'` instead.");
  }
  CaptureWarnings warnings;
  CHECK(precision_for_accelerator("16-mixed", "cuda") == "16-mixed");
  for (const char* p : {"bf16-mixed", "16-true", "32-true", "64-true"}) CHECK(precision_for_accelerator(p, "cpu") == p);
  CHECK(warnings.messages().empty());
  CHECK_THROWS_WITH_AS(precision_for_accelerator("16-mixed", "tpu"),
                       "[precision] expected the accelerator 'cpu' or 'cuda', got 'tpu'", Error);
  CHECK_THROWS_WITH_AS(precision_for_accelerator("16", "cpu"),
                       doctest::Contains("expected a canonical precision"), Error);
}

TEST_CASE("precision_dtype names each canonical precision's floating dtype") {
  CHECK(precision_dtype("64-true") == kFloat64);
  CHECK(precision_dtype("32-true") == kFloat32);
  CHECK(precision_dtype("16-true") == kFloat16);
  CHECK(precision_dtype("16-mixed") == kFloat16);
  CHECK(precision_dtype("bf16-true") == kBFloat16);
  CHECK(precision_dtype("bf16-mixed") == kBFloat16);
  CHECK(precision_dtype("transformer-engine") == kBFloat16);
  CHECK(precision_dtype("transformer-engine-float16") == kFloat16);
  CHECK_THROWS_AS(precision_dtype("bf16"), Error);
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
