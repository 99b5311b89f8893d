// IDX reader: the whole file is read from a path InputFile has checked (a regular file, never a
// FIFO that would block), gunzipped when it starts with the gzip magic (io/gzip.h, our own
// inflate: no zlib), and parsed from memory.
#include "io/idx_file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "io/gzip.h"
#include "io/input_file.h"
#include "tensor/ops.h"

namespace weft::io {
namespace {

// Far beyond any IDX dataset (Fashion-MNIST's largest file is 47 MB): a file that expands beyond
// this is refused while it decompresses, before it can exhaust memory.
constexpr size_t kMaxDecompressed = size_t{1} << 32;

// The file's bytes, decompressed when it is gzip.
std::vector<uint8_t> read_contents(const std::string& path) {
  InputFile file(path, "read_idx");
  std::vector<uint8_t> bytes(file.size());
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t r = ::read(file.fd(), bytes.data() + got, bytes.size() - got);
    if (r < 0 && errno == EINTR) continue;
    WEFT_CHECK(r > 0, "[read_idx] '", path, "': read failed after ", got, " of ", bytes.size(), " bytes",
               r < 0 ? std::string(": ") + std::strerror(errno) : std::string(" (the file shrank)"));
    got += static_cast<size_t>(r);
  }
  if (!is_gzip(bytes.data(), bytes.size())) return bytes;
  try {
    return gunzip(bytes.data(), bytes.size(), kMaxDecompressed);
  } catch (const Error& e) {
    std::string reason = e.what();
    if (reason.rfind("[gunzip] ", 0) == 0) reason.erase(0, 9);
    WEFT_FAIL("[read_idx] ", path, ": ", reason);
  }
}

// Reads the next n bytes of the contents or fails naming what was being read.
struct Reader {
  const std::vector<uint8_t>& bytes;
  const std::string& path;
  size_t at = 0;

  void read_exact(void* dst, size_t n, const char* what) {
    const size_t got = std::min(n, bytes.size() - at);
    WEFT_CHECK(got == n, "[read_idx] ", path, ": file ends early while reading ", what, " (expected ", n,
               " bytes, got ", got, ")");
    std::memcpy(dst, bytes.data() + at, n);
    at += n;
  }
};

struct ElementType {
  uint8_t code;
  DType dtype;
};
constexpr ElementType kElementTypes[] = {{0x08, kUInt8}, {0x09, kInt8},    {0x0C, kInt32},
                                         {0x0D, kFloat32}, {0x0E, kFloat64}};

}  // namespace

Tensor read_idx(const std::string& path) {
  const std::vector<uint8_t> contents = read_contents(path);
  Reader f{contents, path};
  uint8_t magic[4];
  f.read_exact(magic, 4, "the magic number");
  WEFT_CHECK(magic[0] == 0 && magic[1] == 0, "[read_idx] ", path, ": not an IDX file (magic starts with ",
             int(magic[0]), ", ", int(magic[1]), "; expected 0, 0)");
  const ElementType* type = nullptr;
  for (const auto& t : kElementTypes)
    if (t.code == magic[2]) type = &t;
  WEFT_CHECK(type != nullptr, "[read_idx] ", path, ": unsupported element type code 0x", weft::detail::Hex{magic[2]},
             "; expected 0x08 (uint8), 0x09 (int8), 0x0C (int32), 0x0D (float32) or 0x0E (float64)");
  const int ndim = magic[3];
  WEFT_CHECK(ndim >= 1, "[read_idx] ", path, ": expected at least one dimension, got 0");

  Shape shape(static_cast<size_t>(ndim));
  int64_t numel = 1;
  constexpr int64_t kMaxElements = int64_t{1} << 34;  // far beyond any IDX dataset; stops absurd sizes
  for (int d = 0; d < ndim; ++d) {
    uint8_t b[4];
    f.read_exact(b, 4, "the dimension sizes");
    const int64_t size = (int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
    shape[static_cast<size_t>(d)] = size;
    // Checked before multiplying, so the running product can never overflow.
    WEFT_CHECK(size <= kMaxElements / numel, "[read_idx] ", path, ": implausible shape with dimension ", d,
               " of size ", size);
    numel *= std::max<int64_t>(size, 1);
  }
  numel = detail::shape_numel(shape);

  Tensor out = empty(shape, TensorOptions(type->dtype).device(kCPU));
  const size_t width = itemsize(type->dtype);
  auto* bytes = static_cast<uint8_t*>(out.data_ptr());
  f.read_exact(bytes, static_cast<size_t>(numel) * width, "the elements");
  // IDX is big-endian; reverse each multi-byte element in place.
  if (width > 1)
    for (int64_t i = 0; i < numel; ++i) std::reverse(bytes + i * width, bytes + (i + 1) * width);
  WEFT_CHECK(f.at == contents.size(), "[read_idx] ", path, ": unexpected bytes after the ", numel,
             " elements of shape ", shape);
  return out;
}

}  // namespace weft::io
