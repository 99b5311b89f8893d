// Helpers shared by the quantization tests: the bitsandbytes golden files (written by
// scripts/golden_bnb.py), exact comparisons that name the first differing element, and
// random inputs.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "precision/all.h"

namespace quant_test {

// tests/precision/data: from CTest's WEFT_SOURCE_DIR, else next to this file.
inline std::filesystem::path data_dir() {
  if (const char* root = std::getenv("WEFT_SOURCE_DIR")) return std::filesystem::path(root) / "tests/precision/data";
  return std::filesystem::path(__FILE__).parent_path() / "data";
}

// One golden file, loaded once per test binary.
inline const weft::nn::TensorDict& golden(const std::string& name) {
  static std::map<std::string, weft::nn::TensorDict> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, weft::io::load_safetensors(data_dir() / (name + ".safetensors")).tensors).first;
  return it->second;
}

inline const weft::Tensor& get(const std::string& file, const std::string& key) {
  const weft::Tensor* t = golden(file).find(key);
  REQUIRE_MESSAGE(t != nullptr, "no tensor '", key, "' in ", file);
  return *t;
}

// Same dtype, same number of elements and the same bytes; on a difference, reports the first
// differing element of both as float64.
inline void check_bitwise(const weft::Tensor& got, const weft::Tensor& expected, const std::string& what) {
  INFO(what);
  REQUIRE(got.dtype() == expected.dtype());
  REQUIRE(got.numel() == expected.numel());
  const weft::Tensor a = got.contiguous(), b = expected.contiguous();
  if (a.nbytes() == 0 || std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0) return;
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  const size_t size = weft::itemsize(a.dtype());
  for (size_t i = 0; i < av.size(); ++i) {
    if (std::memcmp(static_cast<const char*>(a.data_ptr()) + i * size, static_cast<const char*>(b.data_ptr()) + i * size,
                    size) != 0) {
      FAIL("element ", i, " differs: got ", av[i], ", bitsandbytes has ", bv[i]);
    }
  }
}

inline double max_abs_diff(const weft::Tensor& a, const weft::Tensor& b) {
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  REQUIRE(av.size() == bv.size());
  double m = 0;
  for (size_t i = 0; i < av.size(); ++i) m = std::max(m, std::abs(av[i] - bv[i]));
  return m;
}

inline double max_abs(const weft::Tensor& a) {
  double m = 0;
  for (double v : a.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

}  // namespace quant_test
