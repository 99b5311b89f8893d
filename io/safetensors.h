// Safetensors checkpoints: the file format of Hugging Face's `safetensors`, read and written
// byte for byte, so weft checkpoints load in PyTorch / JAX / Rust and theirs load in weft.
//
// Layout: an 8-byte little-endian header length N; N bytes of JSON
//   {"__metadata__": {"key": "value", ...},
//    "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
// padded with spaces to a multiple of 8; then the data region, where each tensor's raw
// little-endian row-major bytes lie at [begin, end) (offsets relative to the region's start).
// Dtype strings are kDTypeTraits' safetensors_name (tensor/dtype.h).
//
// Saving writes the tensors contiguously in the TensorDict's order, omits "__metadata__" when
// the metadata is empty (as the reference implementation does), and is atomic (see
// io/atomic_file.h): the old file survives any failure. Non-contiguous or non-CPU tensors are
// copied to contiguous CPU memory one at a time while writing.
//
// Loading trusts nothing in the file: every size is checked against the bytes actually present
// before anything is allocated, the data region must be covered exactly (no overlaps, gaps or
// trailing bytes), and BOOL bytes must be 0 or 1. Each problem is a weft::Error naming the tensor
// and what was expected versus found. Tensors come back on the CPU in data-offset order (empty
// tensors sharing an offset keep header order), which for a file weft wrote is the saved order.
// load_safetensors maps the file and hands back aligned tensors as copy-on-write views of the
// mapping, without copying them (Note [Zero-copy loading] in safetensors.cpp): writing to such a
// tensor never reaches the file. load_safetensors_from_memory copies every tensor.
// Note [Checksummed data]: the format has no checksum, so a flipped bit in a tensor's bytes loads as
// a wrong value. A file saved with Checksum::Crc32 (training checkpoints: io/checkpoint.h, FSDP's
// full and sharded ones) records the CRC-32 of its data region in the metadata under
// kChecksumKey, and loading any file that records one checks it before handing back a tensor
// (a pass over the data: ~1.5 GB/s, io/crc32.h). The key is the format's own: saving refuses it in
// the caller's metadata and loading takes it out. Other tools ignore it; their files, and model
// folders (which load on every start and would pay for the pass each time), carry none.
// Stricter than the reference loader in three ways, each for safety: a tensor entry may hold only
// dtype, shape and data_offsets; BOOL bytes must be 0 or 1; and the product of the non-zero
// dimensions must fit in int64 (an empty tensor's strides are built from it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "nn/tensor_dict.h"

namespace weft::io {

using SafetensorsMetadata = std::map<std::string, std::string>;

// Note [Checksummed data].
enum class Checksum { None, Crc32 };
inline constexpr const char* kChecksumKey = "weft.data_crc32";  // its value: 8 lowercase hex digits

struct SafetensorsFile {
  nn::TensorDict tensors;
  SafetensorsMetadata metadata;
};

// Headers longer than this are refused before being read (the reference implementation's limit).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

void save_safetensors(const std::filesystem::path& path, const nn::TensorDict& tensors,
                      const SafetensorsMetadata& metadata = {}, Checksum checksum = Checksum::None);
// The bytes save_safetensors would write.
std::vector<uint8_t> save_safetensors_to_memory(const nn::TensorDict& tensors,
                                                const SafetensorsMetadata& metadata = {},
                                                Checksum checksum = Checksum::None);

SafetensorsFile load_safetensors(const std::filesystem::path& path);
// The same checks on bytes the caller owns; every tensor is copied out of them.
SafetensorsFile load_safetensors_from_memory(const uint8_t* data, size_t size);

}  // namespace weft::io
