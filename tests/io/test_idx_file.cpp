// read_idx: values, dtypes and shapes from small files written here (plain and gzip, the gzip
// ones by hand: tests/io/deflate_writer.h), the rejection of malformed files, compressed or not,
// and the real Fashion-MNIST files when the package is installed.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "deflate_writer.h"
#include "io/all.h"

using namespace weft;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("weft_idx_" + name)).string();
}

void write_plain(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
}

void write_gzip(const std::string& path, const std::vector<uint8_t>& bytes) {
  write_plain(path, testing::gzip_stored(bytes));
}

std::string error_of(const std::string& path) {
  try {
    io::read_idx(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A (2, 3) uint8 image file: magic 00 00 08 02, dims 2 and 3 big-endian, six bytes.
const std::vector<uint8_t> kUint8File = {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 250, 251, 255};

}  // namespace

TEST_CASE("read_idx reads uint8 files, plain and gzip, with their shape") {
  for (bool gz : {false, true}) {
    const std::string path = temp_path(gz ? "u8.gz" : "u8");
    gz ? write_gzip(path, kUint8File) : write_plain(path, kUint8File);
    const Tensor t = io::read_idx(path);
    CHECK(t.dtype() == kUInt8);
    CHECK(t.shape() == Shape{2, 3});
    CHECK(t.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 250, 251, 255});
  }
}

TEST_CASE("read_idx converts big-endian int32 and float32 elements") {
  // int32 1-D of 2: 0x00000102 = 258 and 0xFFFFFFFF = -1.
  const std::string ints = temp_path("i32");
  write_plain(ints, {0, 0, 0x0C, 1, 0, 0, 0, 2, 0, 0, 1, 2, 0xFF, 0xFF, 0xFF, 0xFF});
  CHECK(io::read_idx(ints).to_vector<int64_t>() == std::vector<int64_t>{258, -1});
  // float32 1-D of 1: 0x3FC00000 = 1.5.
  const std::string floats = temp_path("f32");
  write_plain(floats, {0, 0, 0x0D, 1, 0, 0, 0, 1, 0x3F, 0xC0, 0, 0});
  CHECK(io::read_idx(floats).item() == 1.5);
}

TEST_CASE("read_idx rejects malformed files with the reason") {
  const std::string path = temp_path("bad");
  write_plain(path, {1, 0, 8, 1, 0, 0, 0, 1, 7});
  CHECK(error_of(path).find("not an IDX file") != std::string::npos);
  write_plain(path, {0, 0, 0x42, 1, 0, 0, 0, 1, 7});
  CHECK(error_of(path).find("unsupported element type code 0x42") != std::string::npos);
  write_plain(path, {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3});  // 3 of 6 elements
  CHECK(error_of(path).find("file ends early while reading the elements") != std::string::npos);
  write_plain(path, {0, 0, 8, 1, 0, 0, 0, 1, 7, 9});  // one byte too many
  CHECK(error_of(path).find("unexpected bytes after the 1 elements") != std::string::npos);
  write_plain(path, {0, 0, 8, 3, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF});
  CHECK(error_of(path).find("implausible shape") != std::string::npos);
  CHECK(error_of(temp_path("does_not_exist")).find("cannot open") != std::string::npos);
}

TEST_CASE("read_idx checks a gzip file's contents as a plain one's, and refuses a corrupt gzip file") {
  const std::string path = temp_path("bad.gz");
  write_gzip(path, {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3});  // 3 of 6 elements
  CHECK(error_of(path).find("file ends early while reading the elements (expected 6 bytes, got 3)") != std::string::npos);
  std::vector<uint8_t> file = testing::gzip_stored(kUint8File);
  file[file.size() - 8] ^= 1;  // the CRC-32
  write_plain(path, file);
  CHECK(error_of(path).rfind("[read_idx] " + path + ": corrupt data: CRC-32 mismatch (the data decodes to 0x", 0) == 0);
  file.resize(file.size() - 3);
  write_plain(path, file);
  CHECK(error_of(path) == "[read_idx] " + path + ": truncated: the input ends inside a member's trailer (CRC-32 and size)");
}

TEST_CASE("the Fashion-MNIST files from Debian's package read as 60000 + 10000 images") {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dir + "/t10k-labels-idx1-ubyte.gz")) {
    MESSAGE("dataset-fashion-mnist is not installed; skipping");
    return;
  }
  const Tensor images = io::read_idx(dir + "/t10k-images-idx3-ubyte.gz");
  const Tensor labels = io::read_idx(dir + "/t10k-labels-idx1-ubyte.gz");
  CHECK(images.shape() == Shape{10000, 28, 28});
  CHECK(labels.shape() == Shape{10000});
  CHECK(amax(labels).item() == 9);
  CHECK(amin(labels).item() == 0);
}
