// dtype traits and promotion. The 11×11 promotion table is written out in full, as PyTorch's
// torch.result_type gives it for two tensors, with two deliberate differences: int8 with uint8
// meets at int32 (PyTorch: int16, which weft lacks), and float8 types only promote with
// themselves (mixing them with anything else is an error that says how to convert).
#include <doctest/doctest.h>

#include <sstream>
#include <string>

#include "tensor/all.h"

using namespace weft;

namespace {

constexpr DType kAll[kNumDTypes] = {kFloat64, kFloat32, kFloat16, kBFloat16, kFloat8E4M3FN, kFloat8E5M2,
                                    kInt8,    kUInt8,   kInt32,   kInt64,    kBool};

// X marks a pair that must be rejected.
constexpr DType X = static_cast<DType>(255);
constexpr DType F64 = kFloat64, F32 = kFloat32, F16 = kFloat16, BF = kBFloat16, E4 = kFloat8E4M3FN,
                E5 = kFloat8E5M2, I8 = kInt8, U8 = kUInt8, I32 = kInt32, I64 = kInt64, B = kBool;

// Rows and columns in the order of kAll.
constexpr DType kPromotion[kNumDTypes][kNumDTypes] = {
    //        f64  f32  f16  bf16 e4m3 e5m2 i8   u8   i32  i64  bool
    /*f64 */ {F64, F64, F64, F64, X,   X,   F64, F64, F64, F64, F64},
    /*f32 */ {F64, F32, F32, F32, X,   X,   F32, F32, F32, F32, F32},
    /*f16 */ {F64, F32, F16, F32, X,   X,   F16, F16, F16, F16, F16},
    /*bf16*/ {F64, F32, F32, BF,  X,   X,   BF,  BF,  BF,  BF,  BF},
    /*e4m3*/ {X,   X,   X,   X,   E4,  X,   X,   X,   X,   X,   X},
    /*e5m2*/ {X,   X,   X,   X,   X,   E5,  X,   X,   X,   X,   X},
    /*i8  */ {F64, F32, F16, BF,  X,   X,   I8,  I32, I32, I64, I8},
    /*u8  */ {F64, F32, F16, BF,  X,   X,   I32, U8,  I32, I64, U8},
    /*i32 */ {F64, F32, F16, BF,  X,   X,   I32, I32, I32, I64, I32},
    /*i64 */ {F64, F32, F16, BF,  X,   X,   I64, I64, I64, I64, I64},
    /*bool*/ {F64, F32, F16, BF,  X,   X,   I8,  U8,  I32, I64, B},
};

}  // namespace

TEST_CASE("promote_types matches the explicit 11x11 table") {
  for (int i = 0; i < kNumDTypes; ++i) {
    for (int j = 0; j < kNumDTypes; ++j) {
      const DType a = kAll[i], b = kAll[j], expected = kPromotion[i][j];
      CAPTURE(a);
      CAPTURE(b);
      if (expected == X) {
        CHECK_THROWS_AS(promote_types(a, b), Error);
      } else {
        CHECK(promote_types(a, b) == expected);
      }
    }
  }
}

TEST_CASE("float8 mixing is rejected with a message that names both types and the way out") {
  CHECK_THROWS_WITH_AS(promote_types(kFloat8E4M3FN, kFloat32),
                       "[promote_types] float8 types do not promote: float8_e4m3fn with float32; "
                       "convert explicitly with .to(dtype)",
                       Error);
  CHECK_THROWS_WITH_AS(promote_types(kFloat8E4M3FN, kFloat8E5M2),
                       "[promote_types] float8 types do not promote: float8_e4m3fn with float8_e5m2; "
                       "convert explicitly with .to(dtype)",
                       Error);
  // The front-ends inherit it.
  const Tensor a = ones({2}, kFloat8E5M2);
  CHECK_THROWS_AS(add(a, ones({2})), Error);
  CHECK(add(a, a).dtype() == kFloat8E5M2);
}

TEST_CASE("dtype traits: names, sizes, categories") {
  struct Row {
    DType d;
    const char* name;
    const char* st;
    size_t size;
    bool floating, integral, is_signed, narrow;
  };
  const Row rows[] = {
      {kFloat64, "float64", "F64", 8, true, false, true, false},
      {kFloat32, "float32", "F32", 4, true, false, true, false},
      {kFloat16, "float16", "F16", 2, true, false, true, true},
      {kBFloat16, "bfloat16", "BF16", 2, true, false, true, true},
      {kFloat8E4M3FN, "float8_e4m3fn", "F8_E4M3", 1, true, false, true, true},
      {kFloat8E5M2, "float8_e5m2", "F8_E5M2", 1, true, false, true, true},
      {kInt8, "int8", "I8", 1, false, true, true, false},
      {kUInt8, "uint8", "U8", 1, false, true, false, false},
      {kInt32, "int32", "I32", 4, false, true, true, false},
      {kInt64, "int64", "I64", 8, false, true, true, false},
      {kBool, "bool", "BOOL", 1, false, false, false, false},
  };
  for (const Row& r : rows) {
    CAPTURE(r.name);
    CHECK(traits(r.d).dtype == r.d);
    CHECK(dtype_name(r.d) == r.name);
    CHECK(traits(r.d).safetensors_name == r.st);
    CHECK(itemsize(r.d) == r.size);
    CHECK(is_floating(r.d) == r.floating);
    CHECK(is_integral(r.d) == r.integral);
    CHECK(traits(r.d).is_signed == r.is_signed);
    CHECK(is_narrow_float(r.d) == r.narrow);
    CHECK(dtype_from_name(r.name) == r.d);
    CHECK(dtype_from_name(r.st) == r.d);
    std::ostringstream os;
    os << r.d;
    CHECK(os.str() == r.name);
  }
  CHECK(sizeof(StorageTypeOf<kBFloat16>::type) == 2);
  CHECK(sizeof(StorageTypeOf<kFloat8E4M3FN>::type) == 1);
  CHECK(DTypeOf<int64_t>::value == kInt64);
  CHECK(DTypeOf<Half>::value == kFloat16);
}

TEST_CASE("the table's generated maps agree: visit_dtype, storage types, narrow codecs, from_vector") {
  REQUIRE(kNumDTypes == 11);
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType d = static_cast<DType>(i);
    CAPTURE(dtype_name(d));
    visit_dtype(d, [&](auto tag) {
      using T = decltype(tag);
      CHECK(DTypeOf<T>::value == d);
      CHECK(sizeof(T) == itemsize(d));
      CHECK(kIsNarrowFloat<T> == is_narrow_float(d));
    });
  }
  // Each narrow row's codec, on values with known codes: 1.5 and -2 are exact in every format.
  CHECK(from_float<Half>(1.5f).bits == 0x3E00);
  CHECK(from_float<BFloat16>(1.5f).bits == 0x3FC0);
  CHECK(from_float<Float8E4M3FN>(1.5f).bits == 0x3C);
  CHECK(from_float<Float8E5M2>(1.5f).bits == 0x3E);
  CHECK(to_float(Half{0xC000}) == -2.0f);
  CHECK(to_float(BFloat16{0xC000}) == -2.0f);
  CHECK(to_float(Float8E4M3FN{0xC0}) == -2.0f);
  CHECK(to_float(Float8E5M2{0xC0}) == -2.0f);
  // from_vector is instantiated for every row, bool and narrow storage types included.
  CHECK(from_vector<bool>({true, false, true}, {3}).to_vector<bool>() == std::vector<bool>{true, false, true});
  const Tensor h = from_vector<Half>({Half{0x3E00}, Half{0xC000}}, {2});
  CHECK(h.dtype() == kFloat16);
  CHECK(h.to_vector<float>() == std::vector<float>{1.5f, -2.0f});
}

TEST_CASE("dtype_from_name accepts the common aliases and rejects the rest") {
  CHECK(dtype_from_name("double") == kFloat64);
  CHECK(dtype_from_name("float") == kFloat32);
  CHECK(dtype_from_name("half") == kFloat16);
  CHECK(dtype_from_name("bf16") == kBFloat16);
  CHECK(dtype_from_name("fp16") == kFloat16);
  CHECK(dtype_from_name("long") == kInt64);
  CHECK(dtype_from_name("int") == kInt32);
  CHECK_THROWS_WITH_AS(dtype_from_name("float128"),
                       "[dtype] unknown dtype 'float128'; expected one of: float64, float32, float16, bfloat16, "
                       "float8_e4m3fn, float8_e5m2, int8, uint8, int32, int64, bool",
                       Error);
}
