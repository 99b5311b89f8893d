// IDX reader on top of zlib's gz* API, which reads plain and gzip files alike, from a path
// InputFile has checked (a regular file, never a FIFO that would block).
#include "io/idx_file.h"

#include <zlib.h>

#include <cstring>
#include <memory>
#include <vector>

#include "io/input_file.h"
#include "tensor/ops.h"

namespace weft::io {
namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<std::remove_pointer_t<gzFile>, GzCloser>;

// Reads exactly n bytes or fails naming what was being read.
void read_exact(gzFile f, void* dst, size_t n, const std::string& path, const char* what) {
  size_t got = 0;
  while (got < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - got, 1u << 30));
    const int r = gzread(f, static_cast<char*>(dst) + got, chunk);
    WEFT_CHECK(r > 0, "[read_idx] ", path, ": file ends early while reading ", what, " (expected ", n,
               " bytes, got ", got, ")");
    got += static_cast<size_t>(r);
  }
}

struct ElementType {
  uint8_t code;
  DType dtype;
};
constexpr ElementType kElementTypes[] = {{0x08, kUInt8}, {0x09, kInt8},    {0x0C, kInt32},
                                         {0x0D, kFloat32}, {0x0E, kFloat64}};

}  // namespace

Tensor read_idx(const std::string& path) {
  InputFile file(path, "read_idx");
  GzFile f(gzdopen(file.fd(), "rb"));
  WEFT_CHECK(f != nullptr, "[read_idx] '", path, "': cannot start reading (out of memory)");
  file.release();  // gzclose closes it now
  uint8_t magic[4];
  read_exact(f.get(), magic, 4, path, "the magic number");
  WEFT_CHECK(magic[0] == 0 && magic[1] == 0, "[read_idx] ", path, ": not an IDX file (magic starts with ",
             int(magic[0]), ", ", int(magic[1]), "; expected 0, 0)");
  const ElementType* type = nullptr;
  for (const auto& t : kElementTypes)
    if (t.code == magic[2]) type = &t;
  WEFT_CHECK(type != nullptr, "[read_idx] ", path, ": unsupported element type code 0x", std::hex, int(magic[2]),
             "; expected 0x08 (uint8), 0x09 (int8), 0x0C (int32), 0x0D (float32) or 0x0E (float64)");
  const int ndim = magic[3];
  WEFT_CHECK(ndim >= 1, "[read_idx] ", path, ": expected at least one dimension, got 0");

  Shape shape(static_cast<size_t>(ndim));
  int64_t numel = 1;
  constexpr int64_t kMaxElements = int64_t{1} << 34;  // far beyond any IDX dataset; stops absurd sizes
  for (int d = 0; d < ndim; ++d) {
    uint8_t b[4];
    read_exact(f.get(), b, 4, path, "the dimension sizes");
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
  read_exact(f.get(), bytes, static_cast<size_t>(numel) * width, path, "the elements");
  // IDX is big-endian; reverse each multi-byte element in place.
  if (width > 1)
    for (int64_t i = 0; i < numel; ++i) std::reverse(bytes + i * width, bytes + (i + 1) * width);
  char extra;
  WEFT_CHECK(gzread(f.get(), &extra, 1) == 0, "[read_idx] ", path, ": unexpected bytes after the ", numel,
             " elements of shape ", shape);
  return out;
}

}  // namespace weft::io
