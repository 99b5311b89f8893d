// load_safetensors's zero-copy path (Note [Zero-copy loading] in io/safetensors.cpp): aligned
// tensors are views of the mapped file, so loading allocates no tensor memory; a write through
// the Tensor API stays in this process and never reaches the file; the views stay valid after
// the rest of the load is gone and after the file itself is deleted; and a tensor at an unaligned
// place in a file another writer made is copied, with the right values. (That hostile files are
// refused on this path exactly as from memory is checked by every test of
// test_safetensors_rejects.cpp, through safetensors_test::load_error.)
#include <doctest/doctest.h>

#include <cstdlib>

#include "io/safetensors_test_helpers.h"
#include "io/all.h"

using namespace weft;

namespace {

// Counts the bytes new CPU storages ask for.
class CountingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    bytes += nbytes;
    return nbytes ? std::aligned_alloc(64, (nbytes + 63) / 64 * 64) : nullptr;
  }
  void deallocate(void* ptr, size_t) override { std::free(ptr); }
  size_t bytes = 0;
};

nn::TensorDict sample() {
  nn::TensorDict d;
  d.insert("w", arange(0.0, 65536.0, 1.0, TensorOptions(kFloat32)).view({256, 256}));
  d.insert("b", full({1000}, 0.5, TensorOptions(kBFloat16)));
  d.insert("steps", tensor({1.0, 2.0, 3.0}, TensorOptions(kInt64)));
  return d;
}

}  // namespace

TEST_CASE("load_safetensors: aligned tensors are views of the file, with no tensor memory allocated") {
  safetensors_test::TempDir dir;
  const auto path = dir / "model.safetensors";
  const nn::TensorDict saved = sample();
  io::save_safetensors(path, saved);
  CountingAllocator counting;
  set_allocator(kCPU, &counting);
  io::SafetensorsFile loaded = io::load_safetensors(path);
  set_allocator(kCPU, nullptr);
  CHECK(counting.bytes == 0);
  for (const auto& item : saved.items()) {
    const std::string& name = item.first;  // named: clang 14 lets CAPTURE take no structured binding
    CAPTURE(name);
    CHECK(loaded.tensors.at(name).dtype() == item.second.dtype());
    CHECK(loaded.tensors.at(name).to_vector<double>() == item.second.to_vector<double>());
  }
}

TEST_CASE("load_safetensors: a write to a loaded tensor stays in this process, never in the file") {
  safetensors_test::TempDir dir;
  const auto path = dir / "model.safetensors";
  io::save_safetensors(path, sample());
  const std::vector<uint8_t> before = safetensors_test::read_bytes(path);
  {
    io::SafetensorsFile loaded = io::load_safetensors(path);
    Tensor w = loaded.tensors.at("w");
    w.fill_(7.0);
    w.add_(tensor({1.0f}));
    CHECK(amax(w).item() == 8.0);
    CHECK(amin(w).item() == 8.0);
    // A second load sees the file, not this process's copy of the written pages.
    CHECK(io::load_safetensors(path).tensors.at("w").to_vector<double>() == sample().at("w").to_vector<double>());
  }
  CHECK(safetensors_test::read_bytes(path) == before);
}

TEST_CASE("load_safetensors: a view outlives the rest of the load, and the file") {
  safetensors_test::TempDir dir;
  const auto path = dir / "model.safetensors";
  io::save_safetensors(path, sample());
  Tensor b;
  {
    io::SafetensorsFile loaded = io::load_safetensors(path);
    b = loaded.tensors.at("b");
  }
  std::filesystem::remove(path);
  CHECK(b.to_vector<double>() == std::vector<double>(1000, 0.5));
}

TEST_CASE("load_safetensors: a tensor at an unaligned place is copied, with its values") {
  safetensors_test::TempDir dir;
  const auto path = dir / "unaligned.safetensors";
  // A one-byte U8 tensor first puts the F32 tensor at offset 1 of the data region; the header,
  // padded to a multiple of 8 bytes, keeps the region itself aligned, so only "f" is unaligned.
  std::string header = R"({"u":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"f":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}})";
  header.resize((header.size() + 7) / 8 * 8, ' ');
  const float values[2] = {1.5f, -2.25f};
  std::vector<uint8_t> data{42};
  data.insert(data.end(), reinterpret_cast<const uint8_t*>(values), reinterpret_cast<const uint8_t*>(values) + 8);
  safetensors_test::write_bytes(path, safetensors_test::file_bytes(header, data));
  CountingAllocator counting;
  set_allocator(kCPU, &counting);
  io::SafetensorsFile loaded = io::load_safetensors(path);
  set_allocator(kCPU, nullptr);
  CHECK(counting.bytes == 8);  // "f" alone; "u" (one byte, always aligned) is a view
  CHECK(loaded.tensors.at("f").to_vector<double>() == std::vector<double>{1.5, -2.25});
  CHECK(loaded.tensors.at("u").item() == 42);
}
