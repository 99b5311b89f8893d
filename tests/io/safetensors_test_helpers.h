// Helpers shared by the safetensors tests: hand-built files, the error a load ends in, the
// scratch directory, and where the committed test data lives.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "io/all.h"
#include "error_message.h"
#include "temp_dir.h"

namespace safetensors_test {

// A file with the given header text (taken as is: no padding added) and data region.
inline std::vector<uint8_t> file_bytes(std::string_view header, const std::vector<uint8_t>& data = {}) {
  std::vector<uint8_t> out(8 + header.size() + data.size());
  for (size_t i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>((uint64_t{header.size()} >> (8 * i)) & 0xFF);
  std::copy(header.begin(), header.end(), out.begin() + 8);
  std::copy(data.begin(), data.end(), out.begin() + 8 + static_cast<std::ptrdiff_t>(header.size()));
  return out;
}

inline bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// tests/io/data: from CTest's WEFT_SOURCE_DIR, else next to this file.
inline std::filesystem::path data_dir() {
  if (const char* root = std::getenv("WEFT_SOURCE_DIR")) return std::filesystem::path(root) / "tests/io/data";
  return std::filesystem::path(__FILE__).parent_path() / "data";
}

using weft::test::TempDir;  // the scratch directory (temp_dir.h)

// The message of the weft::Error that loading `bytes` from memory throws; fails the test if it
// loads. The same bytes written to a file go through load_safetensors's mapped path too (Note
// [Zero-copy loading] in io/safetensors.cpp), which must refuse them with the same message after
// its prefix (the path instead of "[load_safetensors_from_memory] ").
inline std::string load_error(const std::vector<uint8_t>& bytes) {
  std::string memory_error, file_error;
  try {
    weft::io::load_safetensors_from_memory(bytes.data(), bytes.size());
  } catch (const weft::Error& e) {
    memory_error = e.what();
  }
  if (memory_error.empty()) FAIL_CHECK("expected the load to throw weft::Error");
  TempDir dir;
  const std::filesystem::path path = dir / "input.safetensors";
  write_bytes(path, bytes);
  try {
    weft::io::load_safetensors(path);
  } catch (const weft::Error& e) {
    file_error = e.what();
  }
  const std::string memory_prefix = "[load_safetensors_from_memory] ";
  CHECK(file_error == "[load_safetensors] '" + path.string() + "': " + memory_error.substr(memory_prefix.size()));
  return memory_error;
}

}  // namespace safetensors_test
