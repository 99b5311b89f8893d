// Tensor-level blockwise quantization on top of the QuantFormat reference kernels, with the 4-bit
// formats' vector kernels where the CPU has them (the references' bytes), on weft's threads.
#include "precision/quant/blockwise.h"

#include <algorithm>
#include <array>
#include <vector>

#include "precision/quant/codebooks.h"
#include "precision/quant/gemm_4bit_kernels.h"
#include "precision/quant/pytorch_sum.h"
#include "precision/quant/quantize_4bit_kernels.h"
#include "tensor/cpu/exact_memory.h"
#include "tensor/cpu/isa.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace weft::precision::quant {
namespace {

void check_input(const Tensor& x, const char* op) {
  WEFT_CHECK(x.defined(), "[", op, "] the input tensor is undefined");
  WEFT_CHECK(x.device().is_cpu(), "[", op, "] expected a CPU tensor, got one on ", x.device());
  const DType d = x.dtype();
  WEFT_CHECK(d == kFloat32 || d == kFloat16 || d == kBFloat16, "[", op,
             "] expected a float32, float16 or bfloat16 tensor, got ", d);
  WEFT_CHECK(x.numel() > 0, "[", op, "] expected a non-empty tensor, got shape ", x.shape());
}

Tensor table_tensor(QuantKind type) {
  if (type == QuantKind::Int8Dynamic) {
    const auto& c = dynamic_code();
    return from_vector(std::vector<float>(c.begin(), c.end()), {256}, TensorOptions(kFloat32).device(kCPU));
  }
  const auto& c = type == QuantKind::NF4 ? nf4_code() : fp4_code();
  return from_vector(std::vector<float>(c.begin(), c.end()), {16}, TensorOptions(kFloat32).device(kCPU));
}

Tensor as_float32(const Tensor& x) { return x.to(kFloat32).contiguous(); }

// Runs fn(first, count) over [0, n) in runs of whole blocks, on weft's threads when there are
// several. Each block is quantized (or decoded) on its own, so the bytes do not depend on the
// split; blocks are even, so a 4-bit run starts on a byte, and only the last run holds a partial
// last block or an odd count. A 4096² weight on two threads against one: nf4 quantization 18 ->
// 9 ms, decoding 7.7 -> 4.4 ms (both with their AVX2 kernels; the scalar references took 208 and
// 18 ms on one thread); 8-bit 52 -> 26 and 9.6 -> 5 ms.
template <class Fn>
void over_block_runs(int64_t n, int64_t block, Fn&& fn) {
  constexpr int64_t kValuesPerRun = int64_t{1} << 16;  // ~0.1-1 ms of work
  const int64_t blocks_per_run = std::max<int64_t>(1, kValuesPerRun / block), run = blocks_per_run * block;
  const int64_t runs = (n + run - 1) / run;
  parallel_for_if(runs > 1, runs, [&](int64_t r) { fn(r * run, std::min(n - r * run, run)); });
}

// Stores (absmax - mean) as int8_dynamic codes in blocks of `nested_blocksize` inside `state`.
void nest(QuantState& state, const Tensor& absmax, int64_t nested_blocksize) {
  const int64_t n = absmax.numel();
  const float* a = absmax.data<float>();
  state.offset = pytorch_mean(a, n);
  Tensor centered = weft::detail::make_tensor({n}, kFloat32, kCPU);
  float* c = centered.data<float>();
  for (int64_t i = 0; i < n; ++i) c[i] = a[i] - state.offset;
  auto [codes, inner] = quantize_blockwise(centered, nested_blocksize, false);
  state.nested = true;
  state.absmax = codes;
  state.nested_absmax = inner.absmax;
  state.nested_code = inner.code;
  state.nested_blocksize = nested_blocksize;
  state.nested_dtype = kFloat32;
}

bool equals_table(const Tensor& code, const float* table, int64_t size) {
  if (!code.defined() || code.dtype() != kFloat32 || code.numel() != size) return false;
  const Tensor c = code.contiguous();
  for (int64_t i = 0; i < size; ++i)
    if (c.data<float>()[i] != table[i]) return false;
  return true;
}

}  // namespace

int64_t QuantState::numel() const { return weft::detail::shape_numel(shape); }

std::pair<Tensor, QuantState> quantize_4bit(const Tensor& x, QuantKind type, int64_t blocksize,
                                            bool compress_statistics) {
  WEFT_CHECK(type == QuantKind::NF4 || type == QuantKind::FP4, "[quantize_4bit] expected nf4 or fp4, got ",
             quant_format(type).name);
  check_input(x, "quantize_4bit");
  const QuantFormat& format = quant_format(type);
  check_block_size(format, blocksize, "quantize_4bit");
  const Tensor xf = as_float32(x);
  const int64_t n = xf.numel();
  // A quantized weight is kept as long as its layer: memory of its exact size, not a size class
  // (tensor/cpu/exact_memory.h).
  Tensor packed = exact_empty({(n + 1) / 2, 1}, kUInt8);
  Tensor absmax = exact_empty({(n + blocksize - 1) / blocksize}, kFloat32);
  // Full blocks by the vector kernel where the CPU has one (the reference's bytes), the partial
  // last block and an odd count's padding by the reference.
  const bool vector = cpu_isa() != CpuIsa::Scalar && blocksize % 32 == 0;
  const Table4bitSearch search = table_4bit_search(type);
  over_block_runs(n, blocksize, [&](int64_t first, int64_t count) {
    const int64_t whole = vector ? count / blocksize * blocksize : 0;
    if (whole > 0)
      kernels::quantize_4bit_avx2({xf.data<float>() + first, whole / blocksize, blocksize, search.bounds,
                                   search.code_of, packed.data<uint8_t>() + first / 2,
                                   absmax.data<float>() + first / blocksize});
    if (whole < count)
      format.quantize(xf.data<float>() + first + whole, count - whole, blocksize,
                      packed.data<uint8_t>() + (first + whole) / 2, absmax.data<float>() + (first + whole) / blocksize);
  });

  QuantState state;
  state.type = type;
  state.blocksize = blocksize;
  state.shape = x.shape();
  state.dtype = x.dtype();
  state.code = table_tensor(type);
  state.absmax = absmax;
  if (compress_statistics) nest(state, absmax, kNestedBlockSize4bit);
  return {packed, state};
}

ZeroQuantized4bit zero_4bit(const Shape& shape, DType dtype, QuantKind type, int64_t blocksize,
                            bool compress_statistics) {
  WEFT_CHECK(type == QuantKind::NF4 || type == QuantKind::FP4, "[zero_4bit] expected nf4 or fp4, got ",
             quant_format(type).name);
  check_block_size(quant_format(type), blocksize, "zero_4bit");
  QuantState state;
  state.type = type;
  state.blocksize = blocksize;
  state.shape = shape;
  state.dtype = dtype;
  state.code = table_tensor(type);
  const int64_t n = state.numel(), blocks = state.num_blocks();
  WEFT_CHECK(n > 0, "[zero_4bit] expected a non-empty shape, got ", shape);
  ZeroQuantized4bit out;
  out.packed = zero_pages({(n + 1) / 2, 1}, kUInt8);
  out.block_absmax = zero_pages({blocks}, kFloat32);
  state.absmax = out.block_absmax;
  if (compress_statistics) {
    // Codes 0 of nested blocks whose absmax is 0, offset 0: every decoded absmax is (-)0.
    state.nested = true;
    state.absmax = zero_pages({blocks}, kUInt8);
    state.nested_absmax = zeros({(blocks + kNestedBlockSize4bit - 1) / kNestedBlockSize4bit},
                                TensorOptions(kFloat32).device(kCPU));
    state.nested_code = table_tensor(QuantKind::Int8Dynamic);
    state.nested_blocksize = kNestedBlockSize4bit;
    state.nested_dtype = kFloat32;
  }
  out.state = state;
  return out;
}

std::pair<Tensor, QuantState> quantize_blockwise(const Tensor& x, int64_t blocksize, bool nested) {
  check_input(x, "quantize_blockwise");
  const QuantFormat& format = quant_format(QuantKind::Int8Dynamic);
  check_block_size(format, blocksize, "quantize_blockwise");
  const Tensor xf = as_float32(x);
  const int64_t n = xf.numel();
  Tensor codes = weft::detail::make_tensor(x.shape(), kUInt8, kCPU);
  Tensor absmax = weft::detail::make_tensor({(n + blocksize - 1) / blocksize}, kFloat32, kCPU);
  over_block_runs(n, blocksize, [&](int64_t first, int64_t count) {
    format.quantize(xf.data<float>() + first, count, blocksize, codes.data<uint8_t>() + first,
                    absmax.data<float>() + first / blocksize);
  });

  QuantState state;
  state.type = QuantKind::Int8Dynamic;
  state.blocksize = blocksize;
  state.shape = x.shape();
  state.dtype = x.dtype();
  state.code = table_tensor(QuantKind::Int8Dynamic);
  state.absmax = absmax;
  if (nested) nest(state, absmax, blocksize);
  return {codes, state};
}

Tensor block_absmax(const QuantState& state) {
  if (!state.nested) return state.absmax.contiguous();
  const int64_t n = state.absmax.numel();
  Tensor out = weft::detail::make_tensor({n}, kFloat32, kCPU);
  const Tensor nested_absmax = state.nested_absmax.contiguous();
  quant_format(QuantKind::Int8Dynamic)
      .dequantize(state.absmax.contiguous().data<uint8_t>(), nested_absmax.data<float>(), n, state.nested_blocksize,
                  out.data<float>());
  float* a = out.data<float>();
  for (int64_t i = 0; i < n; ++i) a[i] += state.offset;
  return out;
}

Tensor dequantize_4bit(const Tensor& packed, const QuantState& state) {
  check_quant_state(state, packed, "dequantize_4bit");
  const Tensor absmax = block_absmax(state);
  Tensor out = weft::detail::make_tensor(state.shape, kFloat32, kCPU);
  const int64_t n = state.numel();
  float* o = out.data<float>();
  const Tensor codes = packed.contiguous();
  // The vector decoder where the CPU has one, with the reference's table: the same multiply per
  // value, so the same bits.
  const float* table = table_4bit_decode(state.type).data();
  const bool vector = cpu_isa() != CpuIsa::Scalar;
  over_block_runs(n, state.blocksize, [&](int64_t first, int64_t count) {
    const uint8_t* run_codes = codes.data<uint8_t>() + first / 2;
    const float* run_absmax = absmax.data<float>() + first / state.blocksize;
    if (vector)
      kernels::dequantize_4bit_avx2({{run_codes, run_absmax, table, state.blocksize, 0, count}, o + first});
    else
      quant_format(state.type).dequantize(run_codes, run_absmax, count, state.blocksize, o + first);
  });
  // bitsandbytes decodes a tensor whose last dimension is odd with its generic path, whose FP4
  // table has +0 where the CPU kernel has -0; adding +0 turns -0 into +0 and changes nothing else.
  const int64_t last_dim = state.shape.empty() ? 1 : state.shape.back();
  if (state.type == QuantKind::FP4 && last_dim % 2 != 0)
    for (int64_t i = 0; i < n; ++i) o[i] += 0.0f;
  return out.to(state.dtype);
}

Tensor dequantize_blockwise(const Tensor& codes, const QuantState& state) {
  check_quant_state(state, codes, "dequantize_blockwise");
  const Tensor absmax = block_absmax(state);
  Tensor out = weft::detail::make_tensor(codes.shape(), kFloat32, kCPU);
  const Tensor contiguous = codes.contiguous();
  over_block_runs(state.numel(), state.blocksize, [&](int64_t first, int64_t count) {
    quant_format(QuantKind::Int8Dynamic)
        .dequantize(contiguous.data<uint8_t>() + first, absmax.data<float>() + first / state.blocksize, count,
                    state.blocksize, out.data<float>() + first);
  });
  return out.to(state.dtype);
}

void check_quant_state(const QuantState& state, const Tensor& codes, const char* op) {
  const QuantFormat& format = quant_format(state.type);
  WEFT_CHECK(state.type != QuantKind::LlmInt8, "[", op, "] a QuantState describes nf4, fp4 or int8_dynamic codes");
  check_block_size(format, state.blocksize, op);
  const int64_t n = state.numel();
  WEFT_CHECK(n > 0, "[", op, "] the quantized tensor's shape ", state.shape, " holds no values");
  const DType d = state.dtype;
  WEFT_CHECK(d == kFloat32 || d == kFloat16 || d == kBFloat16, "[", op,
             "] the quantized tensor's dtype must be float32, float16 or bfloat16, got ", d);
  const int64_t code_bytes = format.bits == 4 ? (n + 1) / 2 : n;
  WEFT_CHECK(codes.defined() && codes.dtype() == kUInt8 && codes.numel() == code_bytes, "[", op, "] expected ",
             code_bytes, " uint8 codes for shape ", state.shape, ", got ",
             codes.defined() ? weft::detail::cat(codes.numel(), " ", codes.dtype()) : std::string("none"));
  const int64_t blocks = state.num_blocks();
  const DType absmax_dtype = state.nested ? kUInt8 : kFloat32;
  WEFT_CHECK(state.absmax.defined() && state.absmax.dtype() == absmax_dtype && state.absmax.numel() == blocks, "[",
             op, "] expected ", blocks, " absmax values of dtype ", absmax_dtype, ", got ",
             state.absmax.defined() ? weft::detail::cat(state.absmax.numel(), " ", state.absmax.dtype())
                                    : std::string("none"));
  const bool four_bit = format.bits == 4;
  const auto& table4 = state.type == QuantKind::NF4 ? nf4_code() : fp4_code();
  const bool table_ok = four_bit ? equals_table(state.code, table4.data(), 16)
                                 : equals_table(state.code, dynamic_code().data(), 256);
  WEFT_CHECK(table_ok, "[", op, "] quant_map is not the ", format.name, " table bitsandbytes writes");
  if (!state.nested) return;
  check_block_size(quant_format(QuantKind::Int8Dynamic), state.nested_blocksize, op);
  const int64_t nested_blocks = (blocks + state.nested_blocksize - 1) / state.nested_blocksize;
  WEFT_CHECK(state.nested_absmax.defined() && state.nested_absmax.dtype() == kFloat32 &&
                 state.nested_absmax.numel() == nested_blocks,
             "[", op, "] expected ", nested_blocks, " float32 nested_absmax values for ", blocks, " blocks in groups of ",
             state.nested_blocksize);
  WEFT_CHECK(state.nested_dtype == kFloat32, "[", op, "] nested_dtype must be float32, got ", state.nested_dtype);
  WEFT_CHECK(equals_table(state.nested_code, dynamic_code().data(), 256), "[", op,
             "] nested_quant_map is not the signed dynamic map bitsandbytes writes");
}

}  // namespace weft::precision::quant
