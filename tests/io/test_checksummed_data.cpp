// Note [Checksummed data] (io/safetensors.h): a file saved with Checksum::Crc32 records the CRC-32
// of its data region, a byte changed anywhere in that region is refused on load (mapped and from
// memory alike) while the same change in a file without a checksum loads, the record never reaches
// the caller's metadata, and training checkpoints carry it.
#include <doctest/doctest.h>

#include "io/crc32.h"
#include "safetensors_test_helpers.h"

using namespace weft;
using safetensors_test::contains;
using safetensors_test::read_bytes;
using safetensors_test::TempDir;
using safetensors_test::write_bytes;

namespace {

nn::TensorDict two_tensors() {
  nn::TensorDict t;
  t.insert("weight", arange(0, 12, 1, kFloat32).reshape({3, 4}));
  t.insert("step", full({1}, 7.0, kInt64));
  return t;
}

// Where the data region starts in a safetensors file's bytes.
size_t data_start(const std::vector<uint8_t>& file) {
  uint64_t header = 0;
  for (int i = 0; i < 8; ++i) header |= uint64_t{file[static_cast<size_t>(i)]} << (8 * i);
  return 8 + static_cast<size_t>(header);
}

}  // namespace

TEST_CASE("a checksummed file loads with its values, and the record stays out of the metadata") {
  TempDir dir;
  const auto path = dir / "sum.safetensors";
  io::save_safetensors(path, two_tensors(), {{"note", "kept"}}, io::Checksum::Crc32);
  const std::vector<uint8_t> bytes = read_bytes(path);
  // The record: the standard CRC-32 of the data region, as 8 lowercase hex digits.
  const size_t start = data_start(bytes);
  char expected[32];
  std::snprintf(expected, sizeof expected, "\"weft.data_crc32\":\"%08x\"",
                io::crc32_bytewise(bytes.data() + start, bytes.size() - start));
  CHECK(contains(std::string(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(start)), expected));

  const io::SafetensorsFile file = io::load_safetensors(path);
  CHECK(file.metadata == io::SafetensorsMetadata{{"note", "kept"}});
  CHECK(equal(*file.tensors.find("weight"), *two_tensors().find("weight")));
  CHECK(io::save_safetensors_to_memory(two_tensors(), {{"note", "kept"}}, io::Checksum::Crc32) == bytes);
}

TEST_CASE("a byte changed anywhere in a checksummed file's data is refused; without the checksum it loads") {
  TempDir dir;
  const auto path = dir / "sum.safetensors";
  io::save_safetensors(path, two_tensors(), {}, io::Checksum::Crc32);
  const std::vector<uint8_t> good = read_bytes(path);
  const auto plain = io::save_safetensors_to_memory(two_tensors());
  for (size_t at = data_start(good); at < good.size(); at += 7) {
    std::vector<uint8_t> bad = good;
    bad[at] ^= 0x10;
    write_bytes(path, bad);
    INFO("byte ", at);
    const std::string mapped = error_of([&] { io::load_safetensors(path); });
    CHECK(contains(mapped, "[load_safetensors] '" + path.string() + "': the data's CRC-32 is 0x"));
    CHECK(contains(mapped, ": the file is corrupt (a byte of a tensor changed after it was saved)"));
    CHECK(contains(error_of([&] { io::load_safetensors_from_memory(bad.data(), bad.size()); }),
                   "[load_safetensors_from_memory] the data's CRC-32 is 0x"));
    // The format itself has no check: the same change without the record loads, wrong.
    std::vector<uint8_t> unchecked = plain;
    unchecked[data_start(plain) + (at - data_start(good))] ^= 0x10;
    CHECK(error_of([&] { io::load_safetensors_from_memory(unchecked.data(), unchecked.size()); }).empty());
  }
}

TEST_CASE("the checksum's key is the format's: refused in the caller's metadata and when malformed") {
  TempDir dir;
  CHECK(contains(error_of([&] { io::save_safetensors(dir / "x", two_tensors(), {{"weft.data_crc32", "0"}}); }),
                 "[save_safetensors] the metadata key 'weft.data_crc32' is reserved for the checksum of the data"));
  const std::vector<uint8_t> bytes = io::save_safetensors_to_memory(two_tensors(), {}, io::Checksum::Crc32);
  std::string text(bytes.begin(), bytes.end());
  const size_t at = text.find("\"weft.data_crc32\":\"") + 19;
  text.replace(at, 8, "0000000G");
  const auto* edited = reinterpret_cast<const uint8_t*>(text.data());
  CHECK(contains(error_of([&] { io::load_safetensors_from_memory(edited, text.size()); }),
                 "the metadata's 'weft.data_crc32' is '0000000G'; expected 8 lowercase hex digits"));
}

TEST_CASE("training checkpoints are checksummed: a changed weight byte is refused and nothing is loaded") {
  TempDir dir;
  const auto path = dir / "model.ckpt";
  manual_seed(0);
  nn::Linear saved(4, 3);
  io::save_checkpoint(path, *saved, nullptr, {{"step", "5"}});
  CHECK(io::read_checkpoint(path).metadata == io::SafetensorsMetadata{{"step", "5"}});

  std::vector<uint8_t> bytes = read_bytes(path);
  bytes[data_start(bytes) + 5] ^= 0x01;  // a low bit of the first weight's mantissa
  write_bytes(path, bytes);
  nn::Linear model(4, 3);
  const Tensor before = model->weight.clone();
  CHECK(contains(error_of([&] { io::load_checkpoint(path, *model, nullptr); }), "the file is corrupt"));
  CHECK(equal(model->weight, before));
}
