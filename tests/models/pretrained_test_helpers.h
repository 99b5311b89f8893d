// Helpers of the model-folder tests (test_pretrained*.cpp): where the committed folders and goldens
// are, and reading and writing the small text files the tests edit (config.json and friends).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "models/all.h"
#include "test_data_dir.h"

namespace pretrained_test {

inline std::filesystem::path data_dir() { return models_test_data_dir(); }

inline std::vector<int64_t> ints(const weft::io::JsonValue& v) {
  std::vector<int64_t> out;
  for (const auto& e : v.as_array()) out.push_back(e.as_integer());
  return out;
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void write_text(const std::filesystem::path& p, const std::string& text) { std::ofstream(p) << text; }

}  // namespace pretrained_test
