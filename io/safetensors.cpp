// Safetensors reading and writing (see safetensors.h for the format and the guarantees).
//
// Loading runs in three steps, and nothing is allocated from a file's numbers before step 2 has
// checked them against the bytes present: (1) the length prefix against the input size, (2) the
// header, parsed and checked entry by entry and then as a whole (exact cover of the data
// region), (3) each tensor: a view of the mapped file when it is aligned there (Note [Zero-copy
// loading]), else its bytes copied into fresh CPU memory.
#include "io/safetensors.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>

#include "io/atomic_file.h"
#include "io/crc32.h"
#include "io/input_file.h"
#include "io/safetensors_json.h"
#include "io/utf8.h"
#include "tensor/ops.h"
#include "tensor/storage.h"

namespace weft::io {

// The data region is copied byte for byte, which matches the format only on a little-endian host.
static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; weft's loader and saver assume a little-endian host");

namespace {

constexpr size_t kLengthPrefixBytes = 8;

// ---- saving ----

std::string offsets_text(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// The 8-byte length prefix and the padded JSON header describing `tensors` laid out in order.
std::string header_bytes(const nn::TensorDict& tensors, const SafetensorsMetadata& metadata) {
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      WEFT_CHECK(is_valid_utf8(key), "[save_safetensors] metadata key '", key, "' is not valid UTF-8");
      WEFT_CHECK(is_valid_utf8(value), "[save_safetensors] the value of metadata key '", key,
                 "' is not valid UTF-8");
      if (!first) json += ',';
      first = false;
      detail::append_json_string(json, key);
      json += ':';
      detail::append_json_string(json, value);
    }
    json += "},";
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    WEFT_CHECK(name != "__metadata__",
               "[save_safetensors] a tensor cannot be named '__metadata__': the header reserves that key");
    WEFT_CHECK(is_valid_utf8(name), "[save_safetensors] tensor name '", name, "' is not valid UTF-8");
    WEFT_CHECK(t.defined(), "[save_safetensors] tensor '", name, "' is undefined");
    WEFT_CHECK(!t.is_uninitialized(), "[save_safetensors] tensor '", name,
               "' is uninitialized (a lazy parameter before its first forward); run a forward pass first");
    detail::append_json_string(json, name);
    json += ":{\"dtype\":\"";
    json += traits(t.dtype()).safetensors_name;
    json += "\",\"shape\":[";
    for (int64_t d = 0; d < t.dim(); ++d) {
      if (d > 0) json += ',';
      json += std::to_string(t.size(d));
    }
    const uint64_t end = offset + t.nbytes();
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]},";
    offset = end;
  }
  if (json.back() == ',') json.pop_back();
  json += '}';
  // Padding keeps the data region 8-byte aligned in the file, as the reference writer does.
  json.append((8 - json.size() % 8) % 8, ' ');

  std::string out(kLengthPrefixBytes, '\0');
  for (size_t i = 0; i < kLengthPrefixBytes; ++i)
    out[i] = static_cast<char>((static_cast<uint64_t>(json.size()) >> (8 * i)) & 0xFF);
  return out + json;
}

// The bytes of `t` as the format stores them: contiguous, on the CPU, no autograd history.
Tensor cpu_contiguous(const Tensor& t) { return t.detach().to(kCPU).contiguous(); }

std::string hex8(uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", value);
  return text;
}

// Note [Checksummed data] on saving: the header goes out with kChecksumPlaceholder as the record,
// which is put in place once the data has gone out and its CRC-32 is known, so that each tensor is
// made contiguous (copied off a GPU) once, its bytes going to the CRC and the file together.
constexpr const char* kChecksumPlaceholder = "00000000";

// The caller's metadata, with the checksum's placeholder record when asked for.
SafetensorsMetadata metadata_to_write(const SafetensorsMetadata& metadata, Checksum checksum) {
  WEFT_CHECK(!metadata.count(kChecksumKey), "[save_safetensors] the metadata key '", kChecksumKey,
             "' is reserved for the checksum of the data, which Checksum::Crc32 writes");
  if (checksum == Checksum::None) return metadata;
  SafetensorsMetadata out = metadata;
  out[kChecksumKey] = kChecksumPlaceholder;
  return out;
}

// Where the record's 8 digits sit in a header written with the placeholder. Keys and values are
// JSON-escaped, so the key in quotes followed by :" occurs nowhere else.
size_t checksum_record_at(const std::string& header) {
  const std::string key = std::string("\"") + kChecksumKey + "\":\"";
  return header.find(key) + key.size();
}

// Each tensor's bytes as the format stores them, in order, to `sink(data, nbytes)`; their CRC-32.
template <class Sink>
uint32_t write_data(const nn::TensorDict& tensors, Checksum checksum, const Sink& sink) {
  uint32_t crc = 0;
  for (const auto& [name, t] : tensors) {
    const Tensor bytes = cpu_contiguous(t);
    const auto* p = static_cast<const uint8_t*>(bytes.data_ptr());
    if (bytes.nbytes() == 0) continue;
    sink(p, bytes.nbytes());
    if (checksum == Checksum::Crc32) crc = crc32(p, bytes.nbytes(), crc);
  }
  return crc;
}

// A recorded checksum checked against the data region, then taken out of the metadata.
void check_recorded_checksum(SafetensorsMetadata& metadata, const uint8_t* region, uint64_t size,
                             const std::string& prefix) {
  const auto it = metadata.find(kChecksumKey);
  if (it == metadata.end()) return;
  const std::string& text = it->second;
  const bool hex = text.size() == 8 && std::all_of(text.begin(), text.end(), [](char c) {
                     return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                   });
  WEFT_CHECK(hex, prefix, "the metadata's '", kChecksumKey, "' is '", text, "'; expected 8 lowercase hex digits");
  const uint32_t recorded = static_cast<uint32_t>(std::stoul(text, nullptr, 16));
  const uint32_t actual = crc32(region, size);
  WEFT_CHECK(actual == recorded, prefix, "the data's CRC-32 is 0x", hex8(actual), " but the header records 0x", text,
             ": the file is corrupt (a byte of a tensor changed after it was saved)");
  metadata.erase(it);
}

// ---- loading ----

struct Entry {
  std::string name;
  DType dtype = kFloat32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

struct Header {
  std::vector<Entry> entries;  // in data-offset order once check_cover has run
  SafetensorsMetadata metadata;
};

std::string safetensors_dtype_names() {
  std::string names;
  for (const auto& t : kDTypeTraits) names += (names.empty() ? "" : ", ") + std::string(t.safetensors_name);
  return names;
}

// The dtype, shape and data_offsets of one tensor, with each checked on its own.
Entry read_entry(detail::JsonReader& reader, const std::string& name, uint64_t data_size,
                 const std::string& prefix) {
  const std::string tensor = "tensor '" + name + "'";
  reader.begin_object("the entry of " + tensor);
  std::optional<DType> dtype;
  std::optional<Shape> shape;
  std::optional<std::vector<int64_t>> offsets;
  std::string key;
  while (reader.next_member(key)) {
    if (key == "dtype") {
      WEFT_CHECK(!dtype, prefix, tensor, " has 'dtype' twice");
      const std::string s = reader.read_string("the dtype of " + tensor);
      for (const auto& t : kDTypeTraits)
        if (s == t.safetensors_name) dtype = t.dtype;
      WEFT_CHECK(dtype, prefix, tensor, " has unknown dtype '", s, "'; expected one of ", safetensors_dtype_names());
    } else if (key == "shape") {
      WEFT_CHECK(!shape, prefix, tensor, " has 'shape' twice");
      shape = reader.read_integer_array("the shape of " + tensor);
    } else if (key == "data_offsets") {
      WEFT_CHECK(!offsets, prefix, tensor, " has 'data_offsets' twice");
      offsets = reader.read_integer_array("the data_offsets of " + tensor);
    } else {
      WEFT_FAIL(prefix, tensor, " has unknown key '", key, "'; expected only dtype, shape and data_offsets");
    }
  }
  WEFT_CHECK(dtype, prefix, tensor, " has no 'dtype'");
  WEFT_CHECK(shape, prefix, tensor, " has no 'shape'");
  WEFT_CHECK(offsets, prefix, tensor, " has no 'data_offsets'");

  for (int64_t d : *shape) WEFT_CHECK(d >= 0, prefix, tensor, " has a negative dimension in shape ", *shape);
  // Strides are products of the dimensions with zeros counted as ones (contiguous_strides), so
  // that product must fit in int64 even when a zero makes the tensor empty.
  const bool empty = std::find(shape->begin(), shape->end(), 0) != shape->end();
  int64_t extent = 1;
  for (int64_t d : *shape)
    WEFT_CHECK(!__builtin_mul_overflow(extent, std::max<int64_t>(d, 1), &extent), prefix, tensor, " has shape ",
               *shape, empty ? " whose non-zero dimensions multiply past int64 (strides would overflow)"
                             : " whose element count overflows int64");
  const int64_t numel = empty ? 0 : extent;
  int64_t nbytes = 0;
  WEFT_CHECK(!__builtin_mul_overflow(numel, static_cast<int64_t>(itemsize(*dtype)), &nbytes), prefix, tensor,
             " has shape ", *shape, " whose size in bytes overflows int64 (", numel, " elements of ",
             traits(*dtype).safetensors_name, ")");

  const std::vector<int64_t>& o = *offsets;
  WEFT_CHECK(o.size() == 2, prefix, tensor, " has ", o.size(),
             " data_offsets; expected 2, [begin, end]");
  WEFT_CHECK(o[0] >= 0 && o[1] >= 0, prefix, tensor, " has negative data_offsets [", o[0], ", ", o[1], "]");
  WEFT_CHECK(o[0] <= o[1], prefix, tensor, " has data_offsets [", o[0], ", ", o[1], "] that end before they begin");
  WEFT_CHECK(o[1] - o[0] == nbytes, prefix, tensor, " has data_offsets [", o[0], ", ", o[1], "] spanning ",
             o[1] - o[0], " bytes; expected ", nbytes, " (", numel, " elements of ",
             traits(*dtype).safetensors_name, " at ", itemsize(*dtype), " bytes each, shape ", *shape, ")");
  const auto begin = static_cast<uint64_t>(o[0]), end = static_cast<uint64_t>(o[1]);
  WEFT_CHECK(end <= data_size, prefix, tensor, " has data_offsets ", offsets_text(begin, end),
             " reaching past the end of the ", data_size, "-byte data region");
  return Entry{name, *dtype, std::move(*shape), begin, end};
}

Header read_header(std::string_view json, uint64_t data_size, const std::string& prefix) {
  WEFT_CHECK(!json.empty(), prefix, "the header is empty; expected a JSON object");
  WEFT_CHECK(json[0] == '{', prefix, "the header must begin with '{', got byte ",
             static_cast<int>(static_cast<unsigned char>(json[0])));
  detail::JsonReader reader(json, prefix);
  Header header;
  std::set<std::string> names;
  bool seen_metadata = false;
  std::string key;
  reader.begin_object("the header");
  while (reader.next_member(key)) {
    if (key == "__metadata__") {
      WEFT_CHECK(!seen_metadata, prefix, "'__metadata__' appears twice in the header");
      seen_metadata = true;
      reader.begin_object("__metadata__");
      std::string meta_key;
      while (reader.next_member(meta_key)) {
        std::string value = reader.read_string("the value of metadata key '" + meta_key + "'");
        WEFT_CHECK(header.metadata.emplace(meta_key, std::move(value)).second, prefix, "metadata key '",
                   meta_key, "' appears twice");
      }
      continue;
    }
    WEFT_CHECK(names.insert(key).second, prefix, "tensor '", key, "' appears twice in the header");
    header.entries.push_back(read_entry(reader, key, data_size, prefix));
  }
  reader.expect_end();
  return header;
}

// Sorts the entries by offset and checks they tile [0, data_size) exactly, as the format requires.
void check_cover(std::vector<Entry>& entries, uint64_t data_size, const std::string& prefix) {
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    // cursor > 0 here, so there is a previous tensor.
    WEFT_CHECK(e.begin >= cursor, prefix, "tensor '", e.name, "' (data_offsets ", offsets_text(e.begin, e.end),
               ") overlaps tensor '", previous->name, "' (data_offsets ",
               offsets_text(previous->begin, previous->end), ")");
    WEFT_CHECK(e.begin == cursor, prefix, "the data region has a gap: bytes ", cursor, " to ", e.begin,
               previous ? " between tensor '" + previous->name + "' and" : std::string(" before"), " tensor '",
               e.name, "' belong to no tensor");
    cursor = e.end;
    previous = &e;
  }
  if (cursor == data_size) return;
  if (previous == nullptr)
    WEFT_FAIL(prefix, "the header lists no tensors but a ", data_size, "-byte data region follows it");
  WEFT_FAIL(prefix, "the data region has ", data_size - cursor, " trailing bytes after the last tensor '",
            previous->name, "', which ends at ", cursor, " of ", data_size);
}

// A bool holding any byte but 0 or 1 is undefined behaviour in C++, so such files are refused.
void check_bools(const Entry& e, const uint8_t* data, const std::string& prefix) {
  for (uint64_t i = e.begin; i < e.end; ++i)
    WEFT_CHECK(data[i] <= 1, prefix, "tensor '", e.name, "' has BOOL element ", i - e.begin, " = ",
               static_cast<int>(data[i]), "; expected 0 or 1");
}

// A mapped file, unmapped when the loader and every tensor viewing it are done with it.
struct Mapping {
  void* address = MAP_FAILED;
  size_t size = 0;
  Mapping(void* a, size_t n) : address(a), size(n) {}
  ~Mapping() {
    if (address != MAP_FAILED) ::munmap(address, size);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
};

// Note [Zero-copy loading]: load_safetensors maps the file MAP_PRIVATE with write permission, and
// a tensor whose bytes in the mapping are aligned for its dtype becomes a view of them: a Storage
// borrowing those bytes that holds the mapping alive. Nothing is copied or allocated, a model's
// resident memory is the file's pages in the page cache, shared with every process that maps the
// same file, and a page is copied only when a tensor first writes to it (copy-on-write: MAP_PRIVATE
// never carries a write to the file). Tensors in an unaligned place (possible in files other
// writers made) and empty ones are copied as before. The checks all run on the mapped bytes before
// any tensor exists, so a hostile file is refused exactly as a copied one is. The one thing a
// mapping adds: a file truncated by another program while mapped faults on access; weft's own
// writers replace a file by rename (io/atomic_file.h), which leaves mapped pages intact.
Tensor mapped_view(const std::shared_ptr<Mapping>& mapping, const uint8_t* bytes, const Shape& shape, DType dtype) {
  auto impl = std::make_shared<weft::detail::TensorImpl>();
  const size_t nbytes = static_cast<size_t>(weft::detail::shape_numel(shape)) * itemsize(dtype);
  // The release does nothing itself: holding `mapping` keeps the file mapped while the storage lives.
  impl->storage = Storage::borrow(const_cast<uint8_t*>(bytes), nbytes, kCPU, [mapping] {});
  impl->shape = shape;
  impl->strides = weft::detail::contiguous_strides(shape);
  impl->dtype = dtype;
  impl->device = kCPU;
  return Tensor(std::move(impl));
}

// `mapping`: the mapping data lies in, whose aligned tensors become views of it; null: every
// tensor is copied (data belongs to the caller).
SafetensorsFile load_buffer(const uint8_t* data, size_t size, const std::string& prefix,
                            const std::shared_ptr<Mapping>& mapping = nullptr) {
  WEFT_CHECK(size >= kLengthPrefixBytes, prefix, "the input is ", size,
             " bytes, shorter than the 8-byte header length every safetensors file starts with");
  WEFT_CHECK(data != nullptr, prefix, "null data pointer for ", size, " bytes");
  uint64_t header_size = 0;
  for (size_t i = 0; i < kLengthPrefixBytes; ++i) header_size |= static_cast<uint64_t>(data[i]) << (8 * i);
  WEFT_CHECK(header_size <= kSafetensorsMaxHeaderBytes, prefix, "the header length is ", header_size,
             " bytes, more than the ", kSafetensorsMaxHeaderBytes, "-byte limit (is this a safetensors file?)");
  const uint64_t available = size - kLengthPrefixBytes;
  WEFT_CHECK(header_size <= available, prefix, "the header length is ", header_size, " bytes but only ",
             available, " bytes follow the length prefix");

  const auto* json_begin = reinterpret_cast<const char*>(data + kLengthPrefixBytes);
  const uint8_t* region = data + kLengthPrefixBytes + header_size;
  const uint64_t data_size = available - header_size;
  Header header = read_header(std::string_view(json_begin, header_size), data_size, prefix);
  check_cover(header.entries, data_size, prefix);
  check_recorded_checksum(header.metadata, region, data_size, prefix);
  for (const Entry& e : header.entries)
    if (e.dtype == kBool) check_bools(e, region, prefix);

  SafetensorsFile file;
  file.metadata = std::move(header.metadata);
  for (Entry& e : header.entries) {
    const uint8_t* bytes = region + e.begin;
    const bool view = mapping != nullptr && e.end > e.begin && reinterpret_cast<uintptr_t>(bytes) % itemsize(e.dtype) == 0;
    file.tensors.insert(std::move(e.name), view ? mapped_view(mapping, bytes, e.shape, e.dtype)
                                                : from_buffer(bytes, e.shape, e.dtype));
  }
  return file;
}

std::string os_reason(int err) { return std::system_category().message(err); }

}  // namespace

void save_safetensors(const std::filesystem::path& path, const nn::TensorDict& tensors,
                      const SafetensorsMetadata& metadata, Checksum checksum) {
  // Everything that can be checked is checked before the temporary file exists.
  const std::string header = header_bytes(tensors, metadata_to_write(metadata, checksum));
  AtomicFileWriter file(path, "save_safetensors");
  file.write(header.data(), header.size());
  const uint32_t crc =
      write_data(tensors, checksum, [&](const uint8_t* p, size_t n) { file.write(p, n); });
  if (checksum == Checksum::Crc32) file.overwrite(checksum_record_at(header), hex8(crc).data(), 8);
  file.commit();
}

std::vector<uint8_t> save_safetensors_to_memory(const nn::TensorDict& tensors, const SafetensorsMetadata& metadata,
                                                Checksum checksum) {
  const std::string header = header_bytes(tensors, metadata_to_write(metadata, checksum));
  size_t total = header.size();
  for (const auto& [name, t] : tensors) total += t.nbytes();
  std::vector<uint8_t> out(header.begin(), header.end());
  out.reserve(total);
  const uint32_t crc =
      write_data(tensors, checksum, [&](const uint8_t* p, size_t n) { out.insert(out.end(), p, p + n); });
  if (checksum == Checksum::Crc32) {
    const std::string record = hex8(crc);
    std::copy(record.begin(), record.end(), out.begin() + static_cast<std::ptrdiff_t>(checksum_record_at(header)));
  }
  return out;
}

SafetensorsFile load_safetensors_from_memory(const uint8_t* data, size_t size) {
  return load_buffer(data, size, "[load_safetensors_from_memory] ");
}

SafetensorsFile load_safetensors(const std::filesystem::path& path) {
  const std::string prefix = "[load_safetensors] '" + path.string() + "': ";
  const InputFile file(path, "load_safetensors");
  const size_t size = file.size();
  if (size == 0) return load_buffer(nullptr, 0, prefix);  // mmap refuses empty mappings
  // Note [Zero-copy loading]. The descriptor may close once the file is mapped.
  auto mapping = std::make_shared<Mapping>(::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd(), 0), size);
  if (mapping->address == MAP_FAILED) {
    const int err = errno;
    WEFT_FAIL(prefix, "cannot map the file into memory: ", os_reason(err));
  }
  return load_buffer(static_cast<const uint8_t*>(mapping->address), size, prefix, mapping);
}

}  // namespace weft::io
