// Where the models floor's test data lives (tests/models/data): under CTest's WEFT_SOURCE_DIR, or
// next to this file when a test binary is run by hand.
#pragma once

#include <cstdlib>
#include <filesystem>

inline std::filesystem::path models_test_data_dir() {
  if (const char* root = std::getenv("WEFT_SOURCE_DIR")) return std::filesystem::path(root) / "tests/models/data";
  return std::filesystem::path(__FILE__).parent_path() / "data";
}
