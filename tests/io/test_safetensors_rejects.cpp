// Every way a safetensors file can be malformed, each refused with its own message that names
// the tensor and what was expected versus found. The files are hand-built byte by byte.
#include <doctest/doctest.h>

#include "io/safetensors_test_helpers.h"
#include "io/all.h"

using namespace weft;
using safetensors_test::contains;
using safetensors_test::file_bytes;
using safetensors_test::load_error;

namespace {

std::vector<uint8_t> zeros_bytes(size_t n) { return std::vector<uint8_t>(n, 0); }

// Counts CPU allocations, to show a refused file allocates no tensor memory.
class CountingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    ++count;
    return nbytes ? std::aligned_alloc(64, (nbytes + 63) / 64 * 64) : nullptr;
  }
  void deallocate(void* ptr, size_t) override { std::free(ptr); }
  int count = 0;
};

}  // namespace

TEST_CASE("safetensors: a file shorter than the length prefix") {
  const std::string e = load_error({1, 2, 3, 4, 5});
  CHECK(contains(e, "[load_safetensors_from_memory]"));
  CHECK(contains(e, "the input is 5 bytes, shorter than the 8-byte header length"));
  CHECK(contains(load_error({}), "the input is 0 bytes"));
}

TEST_CASE("safetensors: a header length past the end of the file") {
  std::vector<uint8_t> bytes = file_bytes("{}");
  bytes[0] = 0xE8;  // claims 1000 bytes of header; 2 follow
  bytes[1] = 0x03;
  CHECK(contains(load_error(bytes), "the header length is 1000 bytes but only 2 bytes follow the length prefix"));
}

TEST_CASE("safetensors: an absurd header length is refused before anything is read") {
  std::vector<uint8_t> bytes = file_bytes("{}");
  for (size_t i = 0; i < 8; ++i) bytes[i] = 0xFF;
  CHECK(contains(load_error(bytes),
                 "the header length is 18446744073709551615 bytes, more than the 100000000-byte limit"));
  // Just past the limit (100000001 = 0x05F5E101) is refused too, though the file is tiny.
  bytes = file_bytes("{}");
  bytes[0] = 0x01, bytes[1] = 0xE1, bytes[2] = 0xF5, bytes[3] = 0x05, bytes[4] = bytes[5] = bytes[6] = bytes[7] = 0;
  CHECK(contains(load_error(bytes), "100000001 bytes, more than the 100000000-byte limit"));
}

TEST_CASE("safetensors: invalid header JSON names the byte and the problem") {
  struct Case {
    std::string header;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"", "the header is empty; expected a JSON object"},
      {" {}", "the header must begin with '{', got byte 32"},
      {R"({"a":)", "invalid header JSON at byte 5: expected '{' to open the entry of tensor 'a', got end of header"},
      {R"({"a" {})", "at byte 5: expected ':' after an object key, got '{'"},
      {R"({"__metadata__":{},})", "at byte 19: expected a string key, got '}'"},
      {R"({"__metadata__":{} "a":{}})", "at byte 19: expected ',' or '}' after an object member, got '\"'"},
      {R"({"a":{"dtype":F32}})", "at byte 14: expected a string for the dtype of tensor 'a', got 'F'"},
      {R"({"a":{"dtype":null}})", "expected a string for the dtype of tensor 'a', got 'n'"},
      {R"({"a":{"shape":3}})", "at byte 14: expected '[' to open the shape of tensor 'a', got '3'"},
      {R"({"a":{"shape":[1.5]}})", "expected an integer in the shape of tensor 'a', got a number with a fraction or exponent"},
      {R"({"a":{"shape":[1e3]}})", "got a number with a fraction or exponent"},
      {R"({"a":{"shape":[01]}})", "integer with a leading zero in the shape of tensor 'a'"},
      {R"({"a":{"shape":[1 2]}})", "expected ',' or ']' in the shape of tensor 'a', got '2'"},
      {R"({"a":{"shape":[1,]}})", "expected an integer in the shape of tensor 'a', got ']'"},
      {R"({"a":{"shape":[99999999999999999999]}})",
       "integer 99999999999999999999 in the shape of tensor 'a' does not fit in a signed 64-bit integer"},
      {R"({"a":{"data_offsets":[0,9223372036854775808]}})", "does not fit in a signed 64-bit integer"},
      {R"({"__metadata__":{"k":1}})", "expected a string for the value of metadata key 'k', got '1'"},
      {R"({"__metadata__":{"k":"abc)", "at byte 21: unterminated string"},
      {R"({"__metadata__":{"k":"\q"}})", "invalid escape: '\\' followed by 'q'"},
      {R"({"__metadata__":{"k":"\u12"}})", "expected 4 hex digits after \\u, got '\"'"},
      {R"({"__metadata__":{"k":"\ud800"}})", "high surrogate not followed by a \\u low surrogate"},
      {R"({"__metadata__":{"k":"\ud800\u0041"}})", "high surrogate not followed by a low surrogate"},
      {R"({"__metadata__":{"k":"\udc00"}})", "lone low surrogate in a \\u escape"},
      {"{\"__metadata__\":{\"k\":\"a\x01\"}}", "unescaped control character 0x01 in a string"},
      {"{\"__metadata__\":{\"k\":\"\xC0\x80\"}}", "invalid UTF-8 sequence starting with byte 0xc0"},
      {"{\"__metadata__\":{\"k\":\"\xED\xA0\x80\"}}", "invalid UTF-8 sequence starting with byte 0xed"},
      {"{\"__metadata__\":{\"k\":\"\xF0\x9F\x98\"}}", "invalid UTF-8 sequence starting with byte 0xf0"},
      {R"({} x)", "at byte 3: unexpected 'x' after the closing '}'"},
      {R"({}})", "unexpected '}' after the closing '}'"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.header);
    const std::string e = load_error(file_bytes(c.header));
    CAPTURE(e);
    CHECK(contains(e, c.expected));
  }
}

TEST_CASE("safetensors: an unknown dtype") {
  const std::string e = load_error(file_bytes(R"({"w":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})", zeros_bytes(16)));
  CHECK(contains(e, "tensor 'w' has unknown dtype 'F128'; expected one of F64, F32, F16, BF16, F8_E4M3, "
                    "F8_E5M2, I8, U8, I32, I64, BOOL"));
}

TEST_CASE("safetensors: a negative dimension") {
  const std::string e = load_error(file_bytes(R"({"w":{"dtype":"F32","shape":[2,-3],"data_offsets":[0,0]}})"));
  CHECK(contains(e, "tensor 'w' has a negative dimension in shape (2, -3)"));
}

TEST_CASE("safetensors: a shape whose element count or byte size overflows") {
  std::string e =
      load_error(file_bytes(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})"));
  CHECK(contains(e, "tensor 'w' has shape (4294967296, 4294967296) whose element count overflows int64"));
  // 2^62 elements fit in int64, but 2^62 float32s are 2^64 bytes.
  e = load_error(file_bytes(R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})"));
  CHECK(contains(e, "tensor 'w' has shape (4611686018427387904,) whose size in bytes overflows int64 "
                    "(4611686018427387904 elements of F32)"));
  // An empty tensor still has strides, the products of its non-zero dimensions: those must fit.
  for (const char* shape : {"[0,4294967296,4294967296]", "[4294967296,4294967296,0]"}) {
    CAPTURE(shape);
    e = load_error(file_bytes(std::string(R"({"w":{"dtype":"F32","shape":)") + shape + R"(,"data_offsets":[0,0]}})"));
    CHECK(contains(e, "tensor 'w' has shape ("));
    CHECK(contains(e, ") whose non-zero dimensions multiply past int64 (strides would overflow)"));
  }
  const auto bytes = file_bytes(R"({"w":{"dtype":"F32","shape":[2147483648,0,2147483648],"data_offsets":[0,0]}})");
  const Tensor w = io::load_safetensors_from_memory(bytes.data(), bytes.size()).tensors.at("w");
  CHECK(w.numel() == 0);
  CHECK(w.shape() == Shape{2147483648, 0, 2147483648});
}

TEST_CASE("safetensors: data_offsets that disagree with dtype and shape") {
  std::string e = load_error(file_bytes(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", zeros_bytes(20)));
  CHECK(contains(e, "tensor 'w' has data_offsets [0, 20] spanning 20 bytes; expected 24 (6 elements of F32 at 4 "
                    "bytes each, shape (2, 3))"));
  e = load_error(file_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", zeros_bytes(4)));
  CHECK(contains(e, "tensor 'w' has 1 data_offsets; expected 2, [begin, end]"));
  e = load_error(file_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", zeros_bytes(4)));
  CHECK(contains(e, "tensor 'w' has 3 data_offsets; expected 2"));
  e = load_error(file_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", zeros_bytes(4)));
  CHECK(contains(e, "tensor 'w' has negative data_offsets [-4, 0]"));
  e = load_error(file_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", zeros_bytes(8)));
  CHECK(contains(e, "tensor 'w' has data_offsets [8, 4] that end before they begin"));
}

TEST_CASE("safetensors: data_offsets outside the data region") {
  const std::string e =
      load_error(file_bytes(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})", zeros_bytes(16)));
  CHECK(contains(e, "tensor 'w' has data_offsets [0, 24] reaching past the end of the 16-byte data region"));
}

TEST_CASE("safetensors: overlapping tensors") {
  const std::string e = load_error(file_bytes(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      zeros_bytes(12)));
  CHECK(contains(e, "tensor 'b' (data_offsets [4, 12]) overlaps tensor 'a' (data_offsets [0, 8])"));
  // An empty tensor inside another's bytes overlaps it too (as the reference loader decides).
  const std::string inside = load_error(file_bytes(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
      zeros_bytes(8)));
  CHECK(contains(inside, "tensor 'e' (data_offsets [4, 4]) overlaps tensor 'a' (data_offsets [0, 8])"));
}

TEST_CASE("safetensors: gaps in the data region") {
  std::string e = load_error(file_bytes(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
      zeros_bytes(20)));
  CHECK(contains(e, "the data region has a gap: bytes 8 to 12 between tensor 'a' and tensor 'b' belong to no tensor"));
  e = load_error(file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", zeros_bytes(12)));
  CHECK(contains(e, "the data region has a gap: bytes 0 to 4 before tensor 'a' belong to no tensor"));
}

TEST_CASE("safetensors: trailing bytes after the last tensor") {
  std::string e = load_error(file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", zeros_bytes(12)));
  CHECK(contains(e, "the data region has 4 trailing bytes after the last tensor 'a', which ends at 8 of 12"));
  e = load_error(file_bytes(R"({"__metadata__":{}})", zeros_bytes(3)));
  CHECK(contains(e, "the header lists no tensors but a 3-byte data region follows it"));
}

TEST_CASE("safetensors: duplicate names and keys") {
  std::string e = load_error(file_bytes(
      R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
      zeros_bytes(2)));
  CHECK(contains(e, "tensor 'w' appears twice in the header"));
  e = load_error(file_bytes(R"({"__metadata__":{},"__metadata__":{}})"));
  CHECK(contains(e, "'__metadata__' appears twice in the header"));
  e = load_error(file_bytes(R"({"__metadata__":{"k":"1","k":"2"}})"));
  CHECK(contains(e, "metadata key 'k' appears twice"));
  e = load_error(file_bytes(R"({"w":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", zeros_bytes(1)));
  CHECK(contains(e, "tensor 'w' has 'dtype' twice"));
  e = load_error(file_bytes(R"({"w":{"shape":[1],"shape":[1]}})"));
  CHECK(contains(e, "tensor 'w' has 'shape' twice"));
  e = load_error(file_bytes(R"({"w":{"data_offsets":[0,1],"data_offsets":[0,1]}})"));
  CHECK(contains(e, "tensor 'w' has 'data_offsets' twice"));
}

TEST_CASE("safetensors: missing and unknown entry keys") {
  CHECK(contains(load_error(file_bytes(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", zeros_bytes(1))),
                 "tensor 'w' has no 'dtype'"));
  CHECK(contains(load_error(file_bytes(R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", zeros_bytes(1))),
                 "tensor 'w' has no 'shape'"));
  CHECK(contains(load_error(file_bytes(R"({"w":{"dtype":"U8","shape":[1]}})", zeros_bytes(1))),
                 "tensor 'w' has no 'data_offsets'"));
  CHECK(contains(load_error(file_bytes(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"offset":0}})",
                                       zeros_bytes(1))),
                 "tensor 'w' has unknown key 'offset'; expected only dtype, shape and data_offsets"));
}

TEST_CASE("safetensors: BOOL bytes other than 0 and 1") {
  const std::string e =
      load_error(file_bytes(R"({"m":{"dtype":"BOOL","shape":[4],"data_offsets":[0,4]}})", {1, 0, 1, 2}));
  CHECK(contains(e, "tensor 'm' has BOOL element 3 = 2; expected 0 or 1"));
}

TEST_CASE("safetensors: a refused file allocates no tensor memory, even when only its last entry is bad") {
  CountingAllocator counting;
  set_allocator(kCPU, &counting);
  const std::string e = load_error(file_bytes(
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[16,24]}})",
      zeros_bytes(24)));
  set_allocator(kCPU, nullptr);
  CHECK(contains(e, "tensor 'b' has data_offsets [16, 24] spanning 8 bytes; expected 16"));
  CHECK(counting.count == 0);
}

TEST_CASE("safetensors: file-level errors name the path") {
  safetensors_test::TempDir dir;
  std::string e;
  try {
    io::load_safetensors(dir / "missing.safetensors");
  } catch (const Error& err) {
    e = err.what();
  }
  CHECK(contains(e, "[load_safetensors] '" + (dir / "missing.safetensors").string() + "': cannot open: No such file"));
  try {
    io::load_safetensors(dir.path());
  } catch (const Error& err) {
    e = err.what();
  }
  CHECK(contains(e, "[load_safetensors] '" + dir.path().string() + "' is a directory; expected a regular file"));
  safetensors_test::write_bytes(dir / "empty.safetensors", {});
  try {
    io::load_safetensors(dir / "empty.safetensors");
  } catch (const Error& err) {
    e = err.what();
  }
  CHECK(contains(e, "empty.safetensors': the input is 0 bytes, shorter than the 8-byte header length"));
  safetensors_test::write_bytes(dir / "bad.safetensors",
                                file_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", {1, 2}));
  try {
    io::load_safetensors(dir / "bad.safetensors");
  } catch (const Error& err) {
    e = err.what();
  }
  CHECK(contains(e, "bad.safetensors': the data region has 1 trailing bytes after the last tensor 'a'"));
}
