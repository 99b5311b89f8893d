// Tensor conversions between all 121 ordered pairs of the 11 dtypes, checked byte for byte
// against the semantics documented in tensor/cpu/copy.cpp (Note [Conversion semantics]):
//   floating -> floating  round to nearest even; float64 -> narrow goes through float32;
//   floating -> integer   truncate toward zero, saturate at the int64 range, NaN -> 0, then wrap;
//   integer -> integer    wrap (two's complement, low bytes kept);
//   integer -> floating   round to nearest even (narrow formats via float32);
//   anything -> bool      value != 0 (NaN is true).
// The expected bytes come from the model below, which uses narrow_reference.h for the narrow
// formats, so no expectation is computed by weft itself.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "narrow_reference.h"
#include "tensor/all.h"

using namespace weft;

namespace {

constexpr DType kAll[] = {kFloat64, kFloat32, kFloat16, kBFloat16, kFloat8E4M3FN, kFloat8E5M2,
                          kInt8,    kUInt8,   kInt32,   kInt64,    kBool};

// What one source element holds: floating dtypes a double (exact for every floating format),
// integers and bool an int64.
struct Value {
  bool floating;
  double f;
  int64_t i;
};

using Bytes = std::vector<uint8_t>;

const weft_test::NarrowTable& table_for(DType d) {
  static const auto half = weft_test::make_table(weft_test::kHalfSpec);
  static const auto bf16 = weft_test::make_table(weft_test::kBFloat16Spec);
  static const auto e4m3 = weft_test::make_table(weft_test::kE4M3Spec);
  static const auto e5m2 = weft_test::make_table(weft_test::kE5M2Spec);
  switch (d) {
    case kFloat16: return half;
    case kBFloat16: return bf16;
    case kFloat8E4M3FN: return e4m3;
    default: return e5m2;
  }
}

// FP8 conversions saturate (CUDA satfinite); fp16 and bf16 overflow to Inf.
bool saturates(DType d) { return d == kFloat8E4M3FN || d == kFloat8E5M2; }

Bytes little_endian(uint64_t v, size_t n) {
  Bytes b(n);
  for (size_t k = 0; k < n; ++k) b[k] = static_cast<uint8_t>(v >> (8 * k));
  return b;
}

template <class T>
Bytes bytes_of(T v) {
  Bytes b(sizeof(T));
  std::memcpy(b.data(), &v, sizeof(T));
  return b;
}

// Truncation toward zero, saturating at the int64 range, NaN -> 0.
int64_t trunc_saturate(double v) {
  if (std::isnan(v)) return 0;
  const double t = std::trunc(v);
  if (t >= 0x1p63) return std::numeric_limits<int64_t>::max();
  if (t <= -0x1p63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(t);
}

// The float32 a value becomes on its way to float32 or a narrow format.
float to_float32(const Value& v) {
  return v.floating ? static_cast<float>(v.f) : static_cast<float>(v.i);
}

// The bytes `v` converts to in dtype `dst`.
Bytes expected_bytes(DType dst, const Value& v) {
  if (dst == kBool) return {static_cast<uint8_t>(v.floating ? v.f != 0.0 : v.i != 0)};
  if (is_integral(dst)) {
    const int64_t i = v.floating ? trunc_saturate(v.f) : v.i;
    return little_endian(static_cast<uint64_t>(i), itemsize(dst));  // keeping the low bytes is the wrap
  }
  if (dst == kFloat64) return bytes_of(v.floating ? v.f : static_cast<double>(v.i));
  if (dst == kFloat32) return bytes_of(to_float32(v));
  const auto code = weft_test::reference_encode(table_for(dst), to_float32(v), saturates(dst));
  return little_endian(code, itemsize(dst));
}

// The value held by one element of dtype `d` stored in `b`.
Value decode(DType d, const uint8_t* b) {
  uint64_t raw = 0;
  std::memcpy(&raw, b, itemsize(d));
  switch (d) {
    case kFloat64: { double x; std::memcpy(&x, b, 8); return {true, x, 0}; }
    case kFloat32: { float x; std::memcpy(&x, b, 4); return {true, x, 0}; }
    case kFloat16: case kBFloat16: case kFloat8E4M3FN: case kFloat8E5M2:
      return {true, weft_test::reference_decode(table_for(d).spec, static_cast<uint32_t>(raw)), 0};
    case kInt8: return {false, 0, static_cast<int8_t>(raw)};
    case kUInt8: return {false, 0, static_cast<uint8_t>(raw)};
    case kInt32: return {false, 0, static_cast<int32_t>(raw)};
    case kInt64: return {false, 0, static_cast<int64_t>(raw)};
    case kBool: return {false, 0, raw != 0};
  }
  return {};
}

// Tricky values for floating sources: signed zeros, halves (truncation), integer-range edges of
// every width, FP8/fp16 overflow points, float32 over/underflow, a float64 that rounds differently
// to fp16 directly than through float32 (1 + 2^-11 + 2^-40), and the specials.
const std::vector<double> kFloatSeeds = {
    0.0, -0.0, 0.5, -0.5, 0.75, 1.0, -1.0, 1.5, -1.5, 2.5, -2.5, 3.7, -3.7, 127.0, 127.9, 128.0, -128.0,
    -128.5, -129.0, 255.0, 255.5, 256.0, 300.7, -300.7, 448.0, 464.0, 465.0, 500.0, 57344.0, 61440.0, 65504.0,
    65519.0, 65520.0, 1e5, -1e5, 16777217.0, 2147483647.0, 2147483648.0, -2147483649.0, 4294967296.5, 1e18,
    9.3e18, -9.3e18, 1e20, -1e20, 1e-3, 1e-8, 1e-40, 0.1, 1.0 + 0x1p-11 + 0x1p-40, 3.4028235e38, 1e39,
    std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
    std::numeric_limits<double>::quiet_NaN()};

// Tricky values for integer sources (each wrapped into the source width): width edges, fp16 and
// float32 rounding points (65520, 2^24 + 1, 2^24 + 3), 2^53 + 1, the int64 extremes.
const std::vector<int64_t> kIntSeeds = {0,          1,           -1,          2,          127,
                                        128,        -128,        -129,        255,        256,
                                        300,        -300,        32767,       65504,      65520,
                                        70000,      16777217,    16777219,    2147483647, 2147483648LL,
                                        -2147483649LL, (1LL << 40) + 1, 9007199254740993LL,
                                        std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};

// The source bytes for dtype `src`: the seeds converted into it by the model above.
Bytes source_bytes(DType src) {
  Bytes out;
  auto append = [&out](const Bytes& b) { out.insert(out.end(), b.begin(), b.end()); };
  if (is_floating(src)) {
    for (double s : kFloatSeeds) append(expected_bytes(src, {true, s, 0}));
  } else {
    for (int64_t s : kIntSeeds) append(expected_bytes(src, {false, 0, s}));
  }
  return out;
}

bool is_nan_element(DType d, const uint8_t* b) { return is_floating(d) && std::isnan(decode(d, b).f); }

// Compares a converted tensor with the model, element by element; `stride` picks every
// stride-th source element (a non-contiguous source).
void check_conversion(DType src, DType dst, const Bytes& source, int64_t n, int64_t stride, const Tensor& got) {
  REQUIRE(got.dtype() == dst);
  REQUIRE(got.numel() == (n + stride - 1) / stride);
  const Tensor dense = got.contiguous();
  const auto* g = static_cast<const uint8_t*>(dense.data_ptr());
  const size_t out_size = itemsize(dst), in_size = itemsize(src);
  int failures = 0;
  for (int64_t k = 0; k < dense.numel(); ++k) {
    const Value v = decode(src, source.data() + static_cast<size_t>(k * stride) * in_size);
    const Bytes want = expected_bytes(dst, v);
    const uint8_t* have = g + static_cast<size_t>(k) * out_size;
    const bool ok = is_nan_element(dst, want.data()) ? is_nan_element(dst, have)
                                                     : std::memcmp(want.data(), have, out_size) == 0;
    if (!ok && failures++ < 3) {
      FAIL_CHECK(src << " -> " << dst << " of " << (v.floating ? v.f : static_cast<double>(v.i)) << " gave "
                     << decode(dst, have).f << "/" << decode(dst, have).i << ", expected " << decode(dst, want.data()).f
                     << "/" << decode(dst, want.data()).i);
    }
  }
  CHECK(failures == 0);
}

}  // namespace

TEST_CASE("to(dtype) between all pairs of dtypes follows Note [Conversion semantics]") {
  for (DType src : kAll) {
    const Bytes source = source_bytes(src);
    const auto n = static_cast<int64_t>(source.size() / itemsize(src));
    const Tensor t = from_buffer(source.data(), {n}, src);
    for (DType dst : kAll) {
      CAPTURE(src);
      CAPTURE(dst);
      check_conversion(src, dst, source, n, 1, t.to(dst));
      check_conversion(src, dst, source, n, 3, t.slice(0, 0, n, 3).to(dst));  // strided source
    }
  }
}

TEST_CASE("conversion corner cases, pinned by hand") {
  auto f32 = [](const Tensor& t) { return t.to(kFloat32).to_vector<float>(); };
  SUBCASE("integer -> float rounds to nearest even") {
    const Tensor i = from_vector<int64_t>({16777217, 16777219, 9007199254740993LL, 9007199254740995LL}, {4});
    CHECK(f32(i.narrow(0, 0, 2)) == std::vector<float>{16777216.0f, 16777220.0f});
    CHECK(i.narrow(0, 2, 2).to(kFloat64).to_vector<double>() == std::vector<double>{9007199254740992.0, 9007199254740996.0});
    CHECK(from_vector<int64_t>({std::numeric_limits<int64_t>::max()}, {1}).to(kFloat64).item() == 0x1p63);
  }
  SUBCASE("float -> int truncates toward zero, wraps, and sends NaN to 0") {
    const Tensor x = tensor({2.9, -2.9, 300.7, -1.5, NAN, 1e20, -1e20}, kFloat64);
    CHECK(x.to(kInt64).to_vector<int64_t>() ==
          std::vector<int64_t>{2, -2, 300, -1, 0, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()});
    CHECK(x.to(kUInt8).to_vector<int64_t>() == std::vector<int64_t>{2, 254, 44, 255, 0, 255, 0});
    CHECK(x.to(kInt8).to_vector<int64_t>() == std::vector<int64_t>{2, -2, 44, -1, 0, -1, 0});
    CHECK(x.to(kInt32).to_vector<int64_t>() == std::vector<int64_t>{2, -2, 300, -1, 0, -1, 0});
  }
  SUBCASE("-> bool is != 0, NaN included, -0 excluded") {
    const Tensor x = tensor({0.0, -0.0, 1e-30, NAN, -3.0}, kFloat64);
    CHECK(x.to(kBool).to_vector<bool>() == std::vector<bool>{false, false, true, true, true});
  }
  SUBCASE("float64 -> float16 goes through float32 (double rounding)") {
    const double v = 1.0 + 0x1p-11 + 0x1p-40;  // directly: rounds up to 1 + 2^-10; via float32: a tie, to 1.0
    CHECK(tensor({v}, kFloat64).to(kFloat16).item() == 1.0);
    CHECK(tensor({v}, kFloat64).to(kFloat32).to(kFloat16).item() == 1.0);
  }
  SUBCASE("narrow -> narrow: fp16 max saturates in E4M3FN and rounds up in bf16") {
    const Tensor h = tensor({65504.0, -1e5}, kFloat16);
    CHECK(h.to(kFloat8E4M3FN).to_vector<double>() == std::vector<double>{448.0, -448.0});
    CHECK(h.to(kBFloat16).to_vector<double>() == std::vector<double>{65536.0, -std::numeric_limits<double>::infinity()});
  }
  SUBCASE("to() of the same dtype is the same tensor; clone is not") {
    const Tensor x = tensor({1.0, 2.0});
    CHECK(x.to(kFloat32).is_same(x));
    CHECK_FALSE(x.clone().is_same(x));
    CHECK(x.clone().storage() != x.storage());
  }
}

TEST_CASE("float32 <-> float16 tensor conversion: every code, and values around every boundary, at odd lengths") {
  // The conversion kernel has a vectorised float16 path where the CPU offers one; it must agree
  // with the independent reference on every code and every rounding case, tails included.
  const weft_test::NarrowTable table = weft_test::make_table(weft_test::kHalfSpec);
  std::vector<uint16_t> codes(65536);
  for (uint32_t c = 0; c < 65536; ++c) codes[c] = static_cast<uint16_t>(c);
  const Tensor halves = from_buffer(codes.data(), {65536}, kFloat16);
  const auto decoded = halves.to(kFloat32).to_vector<float>();
  for (uint32_t c = 0; c < 65536; ++c) {
    const double want = weft_test::reference_decode(weft_test::kHalfSpec, c);
    if (std::isnan(want)) CHECK(std::isnan(decoded[c]));
    else if (decoded[c] != static_cast<float>(want)) FAIL_CHECK("decode of code " << c);
  }

  // Each finite code's value, the midpoints to its neighbours (ties) and a hair either side.
  std::vector<float> inputs;
  for (uint32_t c = 0; c + 1 < table.value.size(); ++c) {
    const double lo = table.value[c], hi = table.value[c + 1], mid = (lo + hi) / 2;
    for (const double v : {lo, mid, std::nextafter(mid, lo), std::nextafter(mid, hi)})
      for (const double sign : {1.0, -1.0}) inputs.push_back(static_cast<float>(sign * v));
  }
  for (const float special : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(), 65520.0f, 1e9f})
    inputs.push_back(special);
  while (inputs.size() % 8 != 5) inputs.push_back(0.0f);  // a tail after the last group of 8
  const auto encoded = from_vector(inputs, {static_cast<int64_t>(inputs.size())}, kFloat32).to(kFloat16);
  const auto* bits = static_cast<const uint16_t*>(encoded.data_ptr());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const uint32_t want = weft_test::reference_encode(table, inputs[i], /*saturate=*/false);
    const bool both_nan = std::isnan(inputs[i]) && (bits[i] & 0x7C00) == 0x7C00 && (bits[i] & 0x3FF) != 0;
    if (!both_nan && bits[i] != want) FAIL_CHECK("encode of " << inputs[i] << " gave " << bits[i] << ", want " << want);
  }
}
