// The QuantFormat table's reference kernels against bitsandbytes 0.50's CPU output
// (tests/precision/data/bnb_4bit and bnb_8bit, from scripts/golden_bnb.py): packed codes, absmax,
// nested statistics and dequantized values must be bit-identical. Plus the table's own contract
// (sizes, errors) and the accuracy band bitsandbytes' tests accept.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "precision/quant/blockwise.h"
#include "precision/quant/codebooks.h"
#include "precision/quant/pytorch_sum.h"
#include "tensor/all.h"
#include "quant_test_helpers.h"

using namespace weft;
using namespace weft::precision::quant;
using quant_test::check_bitwise;
using quant_test::get;

namespace {

Tensor table_as_tensor(const float* values, int64_t n) {
  return from_vector(std::vector<float>(values, values + n), {n});
}

const char* kInputs[] = {"x_long", "x_dense", "x_small"};

}  // namespace

TEST_CASE("code tables equal bitsandbytes': NF4, FP4 (bit order) and the signed dynamic map") {
  check_bitwise(table_as_tensor(nf4_code().data(), 16), get("bnb_linear4bit_nf4", "weight.quant_map"), "nf4");
  check_bitwise(table_as_tensor(fp4_code().data(), 16), get("bnb_linear4bit_fp4", "weight.quant_map"), "fp4");
  check_bitwise(table_as_tensor(dynamic_code().data(), 256), get("bnb_8bit", "dynamic_map"), "dynamic map");
  // The map's shape: 127 negative values, one zero, 128 positive, max +1 but min only -0.99297.
  const auto& d = dynamic_code();
  CHECK(std::count_if(d.begin(), d.end(), [](float v) { return v < 0; }) == 127);
  CHECK(std::count(d.begin(), d.end(), 0.0f) == 1);
  CHECK(d.back() == 1.0f);
  CHECK(d.front() == doctest::Approx(-0.99297).epsilon(1e-5));
}

TEST_CASE("nf4 / fp4: packed codes, absmax and dequantized values equal bitsandbytes at every block size") {
  for (const char* type : {"nf4", "fp4"}) {
    const QuantKind kind = quant_format(type).kind;
    for (int64_t bs = 32; bs <= 4096; bs *= 2) {
      for (const char* input : kInputs) {
        const std::string key = std::string(type) + ".bs" + std::to_string(bs) + "." + input;
        auto [packed, state] = quantize_4bit(get("bnb_4bit", input), kind, bs);
        check_bitwise(packed.reshape({-1}), get("bnb_4bit", key + ".packed"), key + " packed");
        check_bitwise(state.absmax, get("bnb_4bit", key + ".absmax"), key + " absmax");
        if (const Tensor* deq = quant_test::golden("bnb_4bit").find(key + ".dequant"))
          check_bitwise(dequantize_4bit(packed, state).reshape({-1}), *deq, key + " dequantized");
      }
    }
    // A (6, 37) weight: blocks and bytes straddle rows.
    const std::string key = std::string(type) + ".w_odd";
    auto [packed, state] = quantize_4bit(get("bnb_4bit", key), kind, 64);
    check_bitwise(packed.reshape({-1}), get("bnb_4bit", key + ".packed"), key + " packed");
    const Tensor deq = dequantize_4bit(packed, state);
    CHECK(deq.shape() == Shape{6, 37});
    check_bitwise(deq, get("bnb_4bit", key + ".dequant"), key + " dequantized");
  }
}

// Tensors of several runs of blocks are quantized and decoded on several threads, run by run: the
// bytes must be those of quantizing piece by piece (pieces of whole blocks, each one run), with
// the partial last block and the odd count in the last piece; and decode to the same values.
TEST_CASE("blockwise quantization of large tensors: the same bytes as piece by piece") {
  manual_seed(31);
  constexpr int64_t kBlock = 64, kPiece = 8192, kN = 3 * 65536 + 40 * kBlock + 37;
  const Tensor x = randn({kN});
  for (const QuantKind kind : {QuantKind::NF4, QuantKind::FP4, QuantKind::Int8Dynamic}) {
    const bool four_bit = kind != QuantKind::Int8Dynamic;
    INFO(quant_format(kind).name);
    auto [codes, state] = four_bit ? quantize_4bit(x, kind, kBlock) : quantize_blockwise(x, kBlock, false);
    const Tensor decoded = four_bit ? dequantize_4bit(codes, state) : dequantize_blockwise(codes, state);
    const std::vector<uint8_t> all_codes = codes.reshape({-1}).to_vector<uint8_t>();
    const std::vector<float> all_absmax = state.absmax.to_vector<float>(), all_decoded = decoded.to_vector<float>();
    int64_t wrong_codes = 0, wrong_absmax = 0, wrong_values = 0;
    for (int64_t first = 0; first < kN; first += kPiece) {
      const int64_t count = std::min(kPiece, kN - first);
      auto [piece_codes, piece_state] = four_bit ? quantize_4bit(x.narrow(0, first, count), kind, kBlock)
                                                 : quantize_blockwise(x.narrow(0, first, count), kBlock, false);
      const Tensor piece_decoded =
          four_bit ? dequantize_4bit(piece_codes, piece_state) : dequantize_blockwise(piece_codes, piece_state);
      const auto c = piece_codes.reshape({-1}).to_vector<uint8_t>();
      const auto a = piece_state.absmax.to_vector<float>();
      const auto d = piece_decoded.to_vector<float>();
      const int64_t code0 = four_bit ? first / 2 : first;
      for (size_t i = 0; i < c.size(); ++i) wrong_codes += c[i] != all_codes[static_cast<size_t>(code0) + i];
      for (size_t i = 0; i < a.size(); ++i) wrong_absmax += a[i] != all_absmax[static_cast<size_t>(first / kBlock) + i];
      // By value: an FP4 tensor of odd length decodes its zeros as +0, as bitsandbytes does, and
      // only the last piece is of odd length.
      for (size_t i = 0; i < d.size(); ++i) wrong_values += d[i] != all_decoded[static_cast<size_t>(first) + i];
    }
    CHECK(wrong_codes == 0);
    CHECK(wrong_absmax == 0);
    CHECK(wrong_values == 0);
  }
}

// The 4-bit quantizer's and decoder's vector kernels against the scalar reference, bit for bit, at
// every instruction set the machine has: values on the midpoints between table entries (ties go
// to the lower entry), just off them, beyond ±absmax's scale, NaN, ±Inf, ±0, denormals, a zero
// block; random blocks of every size, with a partial last block and an odd count.
TEST_CASE("4-bit quantization and decoding: every instruction set gives the reference's bits") {
  manual_seed(37);
  for (const QuantKind kind : {QuantKind::NF4, QuantKind::FP4}) {
    std::array<float, 16> sorted = kind == QuantKind::NF4 ? nf4_code() : fp4_code();
    std::sort(sorted.begin(), sorted.end());
    std::vector<float> special;  // blocks of 64 whose absmax is 1: each value is its scaled value
    for (int i = 0; i < 15; ++i) {
      const float midpoint = (sorted[static_cast<size_t>(i)] + sorted[static_cast<size_t>(i) + 1]) / 2.0f;
      special.insert(special.end(), {midpoint, std::nextafter(midpoint, -2.0f), std::nextafter(midpoint, 2.0f)});
    }
    special.insert(special.end(), {1.0f, -1.0f, 0.0f, -0.0f, 1e-40f, -3e-39f});
    special.resize(128, 0.25f);
    special[100] = std::nanf("");  // a block with NaN: its absmax is NaN
    std::vector<float> blocks = special;
    blocks.resize(256, 0.0f);      // a block of zeros
    blocks.insert(blocks.end(), {std::numeric_limits<float>::infinity(), 0.5f, -2.0f});
    blocks.resize(384, -std::numeric_limits<float>::infinity());
    for (int i = 0; i < 64; ++i) blocks.push_back(static_cast<float>(i - 32) * 1e-39f);  // denormals only
    const std::vector<float> random = mul(randn({3 * 4096 + 300 + 17}), 4.0).to_vector<float>();
    struct Input {
      const std::vector<float>* values;
      int64_t blocksize;
    };
    for (const Input input : {Input{&blocks, 64}, Input{&random, 32}, Input{&random, 64}, Input{&random, 256},
                              Input{&random, 4096}}) {
      const Tensor x = from_vector(*input.values, {static_cast<int64_t>(input.values->size())});
      Tensor want_codes, want_absmax, want_values;
      {
        CpuIsaGuard guard(CpuIsa::Scalar);
        auto [codes, state] = quantize_4bit(x, kind, input.blocksize);
        want_codes = codes;
        want_absmax = state.absmax;
        want_values = dequantize_4bit(codes, state);
      }
      for (const CpuIsa isa : cpu_isas_supported()) {
        INFO(quant_format(kind).name, " bs=", input.blocksize, " isa ", cpu_isa_name(isa));
        CpuIsaGuard guard(isa);
        auto [codes, state] = quantize_4bit(x, kind, input.blocksize);
        check_bitwise(codes, want_codes, "codes");
        check_bitwise(state.absmax, want_absmax, "absmax");
        check_bitwise(dequantize_4bit(want_codes, state), want_values, "decoded");
      }
    }
  }
}

TEST_CASE("double quantization: nested codes, offset, nested absmax and bfloat16 output equal bitsandbytes") {
  const Tensor& x = get("bnb_4bit", "dq.x");
  REQUIRE(x.dtype() == kBFloat16);
  for (const char* type : {"nf4", "fp4"}) {
    const std::string key = std::string("dq.") + type;
    auto [packed, state] = quantize_4bit(x, quant_format(type).kind, 32, true);
    REQUIRE(state.nested);
    CHECK(state.nested_blocksize == 256);
    check_bitwise(packed.reshape({-1}), get("bnb_4bit", key + ".packed"), key + " packed");
    check_bitwise(state.absmax, get("bnb_4bit", key + ".absmax"), key + " absmax codes");
    check_bitwise(from_vector(std::vector<float>{state.offset}, {1}), get("bnb_4bit", key + ".offset"), key + " offset");
    check_bitwise(state.nested_absmax, get("bnb_4bit", key + ".nested_absmax"), key + " nested absmax");
    check_bitwise(state.nested_code, get("bnb_4bit", key + ".nested_quant_map"), key + " nested map");
    if (const Tensor* deq = quant_test::golden("bnb_4bit").find(key + ".dequant")) {
      const Tensor got = dequantize_4bit(packed, state);
      CHECK(got.dtype() == kBFloat16);
      check_bitwise(got.reshape({-1}), *deq, key + " dequantized");
    }
  }
  // float16 input, plain statistics.
  auto [packed, state] = quantize_4bit(get("bnb_4bit", "half.x"), QuantKind::NF4, 64);
  check_bitwise(packed.reshape({-1}), get("bnb_4bit", "half.nf4.packed"), "half packed");
  check_bitwise(state.absmax, get("bnb_4bit", "half.nf4.absmax"), "half absmax");
  check_bitwise(dequantize_4bit(packed, state).reshape({-1}), get("bnb_4bit", "half.nf4.dequant"), "half dequant");
}

TEST_CASE("8-bit dynamic blockwise: codes, absmax, nested statistics and dequantized values equal bitsandbytes") {
  const Tensor& x = get("bnb_8bit", "x_long");
  for (int64_t bs = 64; bs <= 4096; bs *= 2) {
    const std::string key = "bs" + std::to_string(bs);
    auto [codes, state] = quantize_blockwise(x, bs);
    check_bitwise(codes, get("bnb_8bit", key + ".codes"), key + " codes");
    check_bitwise(state.absmax, get("bnb_8bit", key + ".absmax"), key + " absmax");
    if (const Tensor* deq = quant_test::golden("bnb_8bit").find(key + ".dequant"))
      check_bitwise(dequantize_blockwise(codes, state), *deq, key + " dequantized");
  }
  auto [codes, state] = quantize_blockwise(get("bnb_8bit", "nested.x"), 64, true);
  REQUIRE(state.nested);
  check_bitwise(codes, get("bnb_8bit", "nested.codes"), "nested codes");
  check_bitwise(state.absmax, get("bnb_8bit", "nested.absmax"), "nested absmax codes");
  check_bitwise(from_vector(std::vector<float>{state.offset}, {1}), get("bnb_8bit", "nested.offset"), "nested offset");
  check_bitwise(state.nested_absmax, get("bnb_8bit", "nested.nested_absmax"), "nested absmax");
  check_bitwise(dequantize_blockwise(codes, state), get("bnb_8bit", "nested.dequant"), "nested dequantized");

  auto [bcodes, bstate] = quantize_blockwise(get("bnb_8bit", "bf16.x"), 256);
  check_bitwise(bcodes, get("bnb_8bit", "bf16.codes"), "bf16 codes");
  check_bitwise(bstate.absmax, get("bnb_8bit", "bf16.absmax"), "bf16 absmax");
  check_bitwise(dequantize_blockwise(bcodes, bstate), get("bnb_8bit", "bf16.dequant"), "bf16 dequantized");
}

TEST_CASE("QuantFormat table: one row per format, sizes, lookups and block-size errors") {
  std::vector<std::string> names;
  for (const QuantFormat& f : quant_formats()) names.emplace_back(f.name);
  CHECK(names == std::vector<std::string>{"nf4", "fp4", "int8_dynamic", "llm_int8"});
  CHECK(quant_format("nf4").default_block_size == 64);
  CHECK(quant_format("int8_dynamic").default_block_size == 4096);
  // 64 NF4 values: 32 bytes of codes + a float32 absmax = 36 bytes = 0.5625 bytes per value.
  CHECK(quantized_bytes(quant_format("nf4"), 64, 64) == 36);
  CHECK(quantized_bytes(quant_format("fp4"), 65, 64) == 33 + 8);
  CHECK(quantized_bytes(quant_format("int8_dynamic"), 4096, 4096) == 4100);
  CHECK(quantized_bytes(quant_format("llm_int8"), 3 * 10, 10) == 30 + 12);
  CHECK_THROWS_WITH_AS(quant_format("nf3"),
                       "[quant_format] expected one of nf4, fp4, int8_dynamic, llm_int8, got 'nf3'", Error);
  const Tensor x = randn({100});
  CHECK_THROWS_WITH_AS(quantize_4bit(x, QuantKind::NF4, 48), doctest::Contains("power of two in [32, 4096], got 48"),
                       Error);
  CHECK_THROWS_WITH_AS(quantize_4bit(x, QuantKind::NF4, 8192), doctest::Contains("got 8192"), Error);
  CHECK_THROWS_WITH_AS(quantize_blockwise(x, 32), doctest::Contains("power of two in [64, 4096], got 32"), Error);
  CHECK_THROWS_WITH_AS(quantize_4bit(x.to(kFloat64), QuantKind::FP4),
                       doctest::Contains("expected a float32, float16 or bfloat16 tensor, got float64"), Error);
  CHECK_THROWS_WITH_AS(quantize_4bit(x, QuantKind::Int8Dynamic), doctest::Contains("expected nf4 or fp4"), Error);
  CHECK_THROWS_WITH_AS(quantize_4bit(empty({0}), QuantKind::NF4), doctest::Contains("non-empty"), Error);
}

TEST_CASE("dequantize refuses a state whose tensors do not fit the codes") {
  auto [packed, state] = quantize_4bit(randn({10, 10}), QuantKind::NF4, 32, true);
  CHECK_THROWS_WITH_AS(dequantize_4bit(packed.narrow(0, 0, 10), state), doctest::Contains("expected 50 uint8 codes"),
                       Error);
  QuantState bad = state;
  bad.absmax = state.absmax.narrow(0, 0, 2);
  CHECK_THROWS_WITH_AS(dequantize_4bit(packed, bad), doctest::Contains("expected 4 absmax values of dtype uint8"),
                       Error);
  bad = state;
  bad.code = table_as_tensor(fp4_code().data(), 16);
  CHECK_THROWS_WITH_AS(dequantize_4bit(packed, bad), doctest::Contains("quant_map is not the nf4 table"), Error);
  bad = state;
  bad.nested_absmax = zeros({3});
  CHECK_THROWS_WITH_AS(dequantize_4bit(packed, bad), doctest::Contains("expected 1 float32 nested_absmax"), Error);
}

TEST_CASE("4-bit accuracy on randn(512, 512) lies in bitsandbytes' band (mean |error| per block size)") {
  // bitsandbytes' test_4bit_quant means on randn(1024, 1024): NF4 0.0678 / 0.0728 / 0.0768 and
  // FP4 0.0889 / 0.0965 / 0.1030 for blocks of 32 / 64 / 128.
  manual_seed(7);
  const Tensor x = randn({512, 512});
  const double nf4[] = {0.0678, 0.0728, 0.0768}, fp4[] = {0.0889, 0.0965, 0.1030};
  for (int i = 0; i < 3; ++i) {
    const int64_t bs = int64_t{32} << i;
    for (const QuantKind kind : {QuantKind::NF4, QuantKind::FP4}) {
      auto [packed, state] = quantize_4bit(x, kind, bs);
      const double err = mean(abs(sub(dequantize_4bit(packed, state), x))).item<double>();
      const double expected = kind == QuantKind::NF4 ? nf4[i] : fp4[i];
      CHECK(err == doctest::Approx(expected).epsilon(0.02));
    }
  }
}

TEST_CASE("pytorch_sum follows PyTorch's cascade: exact for integers, and not a plain left-to-right sum") {
  std::vector<float> ints(1000);
  for (int i = 0; i < 1000; ++i) ints[i] = static_cast<float>(i % 17);
  double exact = 0;
  for (float v : ints) exact += v;
  CHECK(pytorch_sum(ints.data(), 1000) == exact);
  // 2^24 then fifteen 1s: a running float sum loses every 1. PyTorch's kernel adds the two
  // 8-value vectors lane by lane (lane 0 loses its 1 to 2^24, lanes 1-7 make 2 each) and then the
  // lanes in order: 2^24 + 7·2.
  std::vector<float> v(16, 1.0f);
  v[0] = 16777216.0f;
  float running = 0;
  for (float f : v) running += f;
  CHECK(running == 16777216.0f);
  CHECK(pytorch_sum(v.data(), 16) == 16777230.0f);
  CHECK(pytorch_mean(v.data(), 16) == 16777230.0f / 16.0f);
}
