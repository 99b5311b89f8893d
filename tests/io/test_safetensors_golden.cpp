// Loading files weft did not write: golden files made by scripts/safetensors_interop.py with
// Python's struct + json (checked there against the safetensors package and torch), compared
// value by value with the literals below, and inputs the fuzzer found, which must each end in a
// clean weft::Error.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "io/safetensors_test_helpers.h"
#include "io/all.h"

using namespace weft;
using safetensors_test::data_dir;

namespace {

template <class T>
std::vector<T> values(const Tensor& t) {
  const T* p = t.data<T>();
  return {p, p + t.numel()};
}

template <class T>
std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<uint32_t> out;
  for (const T& v : values<T>(t)) out.push_back(v.bits);
  return out;
}

std::vector<std::string> names(const nn::TensorDict& d) {
  std::vector<std::string> out;
  for (const auto& [name, t] : d) out.push_back(name);
  return out;
}

}  // namespace

TEST_CASE("safetensors golden: every dtype, written by Python, loads with exact values") {
  const io::SafetensorsFile f = io::load_safetensors(data_dir() / "golden_dtypes.safetensors");
  CHECK(f.metadata == io::SafetensorsMetadata{{"format", "pt"}});
  CHECK(names(f.tensors) == std::vector<std::string>{"f64", "f32", "f16", "bf16", "i64", "i32", "i8", "u8",
                                                     "bool", "f8_e4m3", "f8_e5m2"});

  const Tensor& f64 = f.tensors.at("f64");
  CHECK(f64.dtype() == kFloat64);
  CHECK(f64.shape() == Shape{3});
  const auto d = values<double>(f64);
  CHECK(d[0] == 1.0 / 3.0);
  CHECK((d[1] == 0.0 && std::signbit(d[1])));
  CHECK(d[2] == 1e300);

  const Tensor& f32 = f.tensors.at("f32");
  CHECK(f32.shape() == Shape{2, 2});
  CHECK(values<float>(f32) == std::vector<float>{1.5f, -2.25f, std::numeric_limits<float>::max(),
                                                 std::numeric_limits<float>::denorm_min()});

  const Tensor& f16 = f.tensors.at("f16");
  CHECK(f16.dtype() == kFloat16);
  CHECK(bits<Half>(f16) == std::vector<uint32_t>{0x3C00, 0xC100, 0x7BFF, 0x0400, 0x0001});
  CHECK(f16.to_vector<double>() == std::vector<double>{1.0, -2.5, 65504.0, 6.103515625e-05, 5.960464477539063e-08});

  const Tensor& bf16 = f.tensors.at("bf16");
  CHECK(bf16.dtype() == kBFloat16);
  CHECK(bf16.shape() == Shape{2, 2});
  CHECK(bits<BFloat16>(bf16) == std::vector<uint32_t>{0x3F80, 0xC049, 0x7F7F, 0x0001});
  CHECK(bf16.to_vector<double>() ==
        std::vector<double>{1.0, -3.140625, 3.3895313892515355e38, 9.183549615799121e-41});

  CHECK(f.tensors.at("i64").dtype() == kInt64);
  CHECK(values<int64_t>(f.tensors.at("i64")) ==
        std::vector<int64_t>{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 42});
  CHECK(values<int32_t>(f.tensors.at("i32")) == std::vector<int32_t>{std::numeric_limits<int32_t>::min(), 7});
  CHECK(values<int8_t>(f.tensors.at("i8")) == std::vector<int8_t>{-128, 127, 0});
  CHECK(values<uint8_t>(f.tensors.at("u8")) == std::vector<uint8_t>{0, 255, 17});
  CHECK(f.tensors.at("bool").dtype() == kBool);
  CHECK(f.tensors.at("bool").to_vector<double>() == std::vector<double>{1, 0, 0, 1});

  const Tensor& e4m3 = f.tensors.at("f8_e4m3");
  CHECK(e4m3.dtype() == kFloat8E4M3FN);
  CHECK(bits<Float8E4M3FN>(e4m3) == std::vector<uint32_t>{0x38, 0xC0, 0x7E});
  CHECK(e4m3.to_vector<double>() == std::vector<double>{1.0, -2.0, 448.0});
  const Tensor& e5m2 = f.tensors.at("f8_e5m2");
  CHECK(e5m2.dtype() == kFloat8E5M2);
  CHECK(bits<Float8E5M2>(e5m2) == std::vector<uint32_t>{0x3C, 0xC0, 0x7B});
  CHECK(e5m2.to_vector<double>() == std::vector<double>{1.0, -2.0, 57344.0});
}

TEST_CASE("safetensors golden: Python's default JSON layout, escapes, odd order and an unaligned region") {
  const io::SafetensorsFile f = io::load_safetensors(data_dir() / "golden_layout.safetensors");
  // Header order is z.weight.ü, scalar, a.bias, empty; tensors come back in data-offset order.
  CHECK(names(f.tensors) == std::vector<std::string>{"a.bias", "empty", "scalar", "z.weight.\xC3\xBC"});
  CHECK(f.metadata == io::SafetensorsMetadata{
                          {"format", "pt"},
                          {"note", "na\xC3\xAFve \xE2\x98\x83 \xF0\x9F\xA6\x80 \"quoted\"\n"}});

  CHECK(values<int64_t>(f.tensors.at("a.bias")) == std::vector<int64_t>{-1, int64_t{1} << 40});
  CHECK(f.tensors.at("empty").dtype() == kFloat16);
  CHECK(f.tensors.at("empty").shape() == Shape{0, 3});
  CHECK(f.tensors.at("scalar").dim() == 0);
  CHECK(f.tensors.at("scalar").item<double>() == 2.5);
  const Tensor& w = f.tensors.at("z.weight.\xC3\xBC");
  CHECK(w.dtype() == kBFloat16);
  CHECK(w.shape() == Shape{2, 3});
  CHECK(w.to_vector<double>() == std::vector<double>{0.5, -1.0, 2.0, 256.0, -0.0078125, 12884901888.0});
}

TEST_CASE("safetensors golden: a saved and reloaded golden file is byte-identical to a fresh save") {
  // Loading then saving is a fixed point: the second save reproduces the first exactly.
  const io::SafetensorsFile f = io::load_safetensors(data_dir() / "golden_layout.safetensors");
  const auto once = io::save_safetensors_to_memory(f.tensors, f.metadata);
  const auto reloaded = io::load_safetensors_from_memory(once.data(), once.size());
  CHECK(io::save_safetensors_to_memory(reloaded.tensors, reloaded.metadata) == once);
}

// tests/io/data/fuzz_regressions holds inputs from fuzz/fuzz_safetensors.cpp's corpus that sit at
// the loader's edges (a string, escape or UTF-8 sequence cut off by the end of the header, sizes
// past the input, ...) and any input that ever crashed it. Each must be refused cleanly.
TEST_CASE("safetensors golden: fuzzer-found edge inputs end in a clean weft::Error") {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(data_dir() / "fuzz_regressions")) {
    CAPTURE(entry.path().string());
    CHECK_THROWS_AS(io::load_safetensors(entry.path()), Error);
    ++count;
  }
  CHECK(count > 0);
}
