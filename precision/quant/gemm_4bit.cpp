// The 4-bit product: the exact fused kernel's scalar reference and dispatch; the int8 fused
// kernel's activation preparation, int8 tables, kernel choice,
// threading and scalar reference; the dequantizing regime; row dequantization.
#include "precision/quant/gemm_4bit.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "precision/quant/codebooks.h"
#include "precision/quant/gemm_4bit_kernels.h"
#include "tensor/cpu/gemm/gemm.h"
#include "tensor/error.h"
#include "tensor/float_formats.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace weft::precision::quant {
namespace {

constexpr int64_t kChunk = 64;         // values per kernel step (Note [4-bit product layout])
constexpr int64_t kRowsPerItem = 16;   // weight rows per parallel work item
// Below this many multiply-adds a product runs on the calling thread: waking the other threads
// would cost more than it saves (and far more on a machine whose cores are busy).
constexpr int64_t kParallelWork = int64_t{1} << 20;
// Below this many values a copy runs on the calling thread (64 KiB: ~5 µs).
constexpr int64_t kParallelCopy = int64_t{1} << 14;

// round(127 · table[code]) per code.
std::vector<int8_t> int8_table(QuantKind type) {
  const auto& table = type == QuantKind::NF4 ? nf4_code() : fp4_code();
  std::vector<int8_t> t(16);
  for (int i = 0; i < 16; ++i) t[i] = static_cast<int8_t>(std::nearbyint(127.0f * table[i]));
  return t;
}

// The position of value v of a row among the prepared activations: within its 64-value chunk,
// the even values first, then the odd ones (Note [4-bit product layout]).
int64_t prepared_position(int64_t v) {
  const int64_t j = v % kChunk;
  return v - j + (j % 2 == 0 ? j / 2 : kChunk / 2 + j / 2);
}

// The scalar reference of the activations' preparation (kernels::Prepare4bitArgs).
void prepare_reference(const kernels::Prepare4bitArgs& p) {
  const int64_t blocks = p.k / p.blocksize;
  std::vector<int8_t> codes(static_cast<size_t>(p.k));  // one row's codes in x's order
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* xb = p.x + i * p.k + b * p.blocksize;
      int8_t* cb = codes.data() + b * p.blocksize;
      const float amax = absmax_of(xb, p.blocksize);  // NaN if the block holds one
      // A zero block has codes 0; a block holding NaN or Inf has codes 0 and that scale, so its
      // outputs come out NaN as a float product's would (and xb[j] * 0 is not used for the zeros:
      // a NaN or Inf times 0 is NaN, whose conversion to int8 is undefined). So has a block too
      // small for 127 / max|x| to be finite (max|x| < 3.7e-37, as quantize_int8_rows does): its
      // codes would be x · Inf.
      const float ratio = 127.0f / amax;
      const float inverse = std::isfinite(ratio) && ratio > 0.0f ? ratio : 0.0f;
      int32_t sum = 0;
      if (inverse == 0.0f) {
        std::fill(cb, cb + p.blocksize, int8_t{0});
      } else {
        for (int64_t j = 0; j < p.blocksize; ++j) {
          cb[j] = static_cast<int8_t>(round_half_even(xb[j] * inverse));
          sum += cb[j];
        }
      }
      p.q_sum[i * blocks + b] = sum;
      p.scale[i * blocks + b] = amax / 16129.0f;
    }
    // Permuted chunk by chunk into prepared_position's order: value j of each 64-value chunk to
    // position j/2 (even j) or 32 + j/2 (odd j).
    int8_t* q = p.q + i * p.k;
    uint8_t* q_abs = p.q_abs + i * p.k;
    for (int64_t c = 0; c < p.k; c += kChunk)
      for (int64_t j = 0; j < kChunk / 2; ++j) {
        const int8_t even = codes[static_cast<size_t>(c + 2 * j)], odd = codes[static_cast<size_t>(c + 2 * j + 1)];
        q[c + j] = even;
        q[c + kChunk / 2 + j] = odd;
        q_abs[c + j] = static_cast<uint8_t>(even < 0 ? -even : even);
        q_abs[c + kChunk / 2 + j] = static_cast<uint8_t>(odd < 0 ? -odd : odd);
      }
  }
}

using Prepare = void (*)(const kernels::Prepare4bitArgs&);

Prepare prepare_for(CpuIsa isa) { return isa == CpuIsa::Scalar ? prepare_reference : kernels::prepare_4bit_avx2; }

PreparedActivations prepare(const float* x, int64_t m, int64_t k, int64_t blocksize, Prepare kernel) {
  PreparedActivations p;
  p.q.resize(static_cast<size_t>(m * k));
  p.q_abs.resize(p.q.size());
  p.q_sum.resize(static_cast<size_t>(m * (k / blocksize)));
  p.scale.resize(p.q_sum.size());
  kernel({x, m, k, blocksize, p.q.data(), p.q_abs.data(), p.q_sum.data(), p.scale.data()});
  return p;
}

using Panel = void (*)(const kernels::Gemm4bitArgs&);

Panel panel_for(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar: return nullptr;
    case CpuIsa::Avx2: return kernels::gemm_4bit_panel_avx2;
    case CpuIsa::Avx512: return kernels::gemm_4bit_panel_avx512;
    case CpuIsa::Avx512Vnni:
    case CpuIsa::Avx512Bf16:
    case CpuIsa::Amx: return kernels::gemm_4bit_panel_avx512vnni;
  }
  return nullptr;
}

// The scalar kernel on the prepared activations: the arithmetic every vector kernel follows,
// value by value in each block, whatever the block size.
void reference_panel(const kernels::Gemm4bitArgs& p) {
  const int64_t blocks = p.k / p.blocksize;
  for (int64_t n = 0; n < p.rows; ++n) {
    const uint8_t* w = p.w + n * p.w_stride;
    const float* absmax = p.absmax + n * p.absmax_stride;
    for (int64_t i = 0; i < p.m; ++i) {
      float y = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        int32_t dot = 0;
        for (int64_t v = b * p.blocksize; v < (b + 1) * p.blocksize; ++v) {
          const int code = v % 2 == 0 ? w[v / 2] >> 4 : w[v / 2] & 0x0F;
          dot += int32_t{p.table[code]} * p.q[i * p.k + prepared_position(v)];
        }
        const float s = absmax[b] * p.scale[i * blocks + b];
        y += static_cast<float>(dot) * s;
      }
      p.y[i * p.y_stride + n * p.y_col_stride] = y;
    }
  }
}

void check(const Weights4bit& w, int64_t m) {
  WEFT_CHECK(w.type == QuantKind::NF4 || w.type == QuantKind::FP4, "[gemm_4bit] expected nf4 or fp4 weights");
  WEFT_CHECK(m >= 0 && w.n >= 0 && w.k > 0 && w.blocksize > 0, "[gemm_4bit] expected non-negative sizes, K > 0 and ",
             "a positive block size, got M=", m, ", N=", w.n, ", K=", w.k, ", blocksize=", w.blocksize);
}

void check_isa(CpuIsa isa) {
  WEFT_CHECK(isa <= cpu_isa_supported(), "[gemm_4bit] this CPU supports instruction sets up to ",
             cpu_isa_name(cpu_isa_supported()), ", got a request for ", cpu_isa_name(isa));
}

// Note [Blocks across rows]
// bitsandbytes' blocks run over the flat weight, so where K is not a multiple of the block size a
// block holds the end of one row and the start of the next, and row n starts `offset` =
// (n·K) mod blocksize values into its first block. The offsets repeat every `period` =
// blocksize / gcd(K, blocksize) rows (the example's 784 inputs in blocks of 64: 0, 16, 32, 48).
// The kernel takes each row from the start of that first block, as whole blocks: K' =
// round_up(offset + K, blocksize) values, the neighbours' values around the row meeting
// activations that are zero — x shifted right by `offset` and padded to K', prepared per block
// as for aligned rows. So the rows of one offset are the kernel's usual rows, period·K/2 bytes
// apart, and the product is what it would be for whole blocks: each weight value meets the
// activation its column holds, scaled by its own block's absmax. The costs are one preparation of
// x per offset and up to a block more read per row. Batch 1, 2 threads on a Xeon: nf4 512×784 in
// 17 µs, against 37 µs through dequantized rows (and 12 µs for 512×768, whole blocks);
// 4096×4000 in 0.30 ms against 1.29. A row whose blocks reach past the weight's last byte (a
// partial last block) reads a zero-padded copy instead.
struct Phase {
  int64_t offset;  // values of the row's first block that belong to the rows before it
  int64_t k;       // values per kernel row: whole blocks
  PreparedActivations x;  // the activations shifted right by `offset`, zero-padded to k, prepared
  // x again for the VNNI GEMV in blocks of 64 (Note [Two steps to a vector]); empty elsewhere.
  detail::AlignedVector<int8_t> q_pairs;
  detail::AlignedVector<int32_t> pair_compensation;
  detail::AlignedVector<float> pair_scale;
};

// The pair layout of one prepared activation row of k values in blocks of 64 (Note [Two steps to
// a vector] in gemm_4bit_kernels.h): its whole eights of blocks, steps two by two.
void prepare_pairs(Phase& phase) {
  constexpr int64_t kBlocksPerGroup = 8, kHalf = kChunk / 2;
  const int64_t groups = phase.k / (kBlocksPerGroup * kChunk);
  phase.q_pairs.resize(static_cast<size_t>(groups * kBlocksPerGroup * kChunk));
  phase.pair_compensation.resize(static_cast<size_t>(groups * 16));
  phase.pair_scale.resize(phase.pair_compensation.size());
  const int8_t* q = phase.x.q.data();
  int8_t* out = phase.q_pairs.data();
  for (int64_t step = 0; step < groups * kBlocksPerGroup; step += 2, q += 2 * kChunk, out += 2 * kChunk) {
    std::copy(q, q + kHalf, out);                                         // evens of the first step
    std::copy(q + kChunk, q + kChunk + kHalf, out + kHalf);               // evens of the second
    std::copy(q + kHalf, q + kChunk, out + kChunk);                       // odds of the first
    std::copy(q + kChunk + kHalf, q + 2 * kChunk, out + kChunk + kHalf);  // odds of the second
  }
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t lane = 0; lane < 16; ++lane) {
      const auto at = static_cast<size_t>(g * 16 + lane);
      const auto block = static_cast<size_t>(g * kBlocksPerGroup + kernels::kPairLaneBlock[lane]);
      const bool first_of_block = lane % 8 < 4;
      phase.pair_compensation[at] = first_of_block ? 128 * phase.x.q_sum[block] : 0;
      phase.pair_scale[at] = phase.x.scale[block];
    }
}

int64_t phase_period(int64_t k, int64_t blocksize) { return blocksize / std::gcd(k, blocksize); }

// Every offset's preparation costs as much as the aligned case's one: past this many, rows of W
// dequantized per thread are the cheaper way.
constexpr int64_t kMaxPhases = 16;

// Below this many activation values (over all offsets, ~0.25 ns each with AVX2: 2 µs) the offsets
// are prepared on the calling thread. 512×784 at batch 4 / 8, two threads: 30 / 57 µs with the
// threshold at 32K values, 28 / 50 at 8K.
constexpr int64_t kParallelPrepare = int64_t{1} << 13;

std::vector<Phase> prepare_phases(const float* x, int64_t m, const Weights4bit& w, int64_t phases, Prepare kernel,
                                  bool pairs) {
  std::vector<Phase> out(static_cast<size_t>(phases));
  parallel_for_if(phases > 1 && phases * m * w.k >= kParallelPrepare, phases, [&](int64_t c) {
    Phase& phase = out[static_cast<size_t>(c)];
    phase.offset = c * w.k % w.blocksize;
    phase.k = (phase.offset + w.k + w.blocksize - 1) / w.blocksize * w.blocksize;
    if (phase.k == w.k) {
      phase.x = prepare(x, m, w.k, w.blocksize, kernel);
    } else {
      std::vector<float> shifted(static_cast<size_t>(m * phase.k), 0.0f);
      for (int64_t i = 0; i < m; ++i)
        std::copy(x + i * w.k, x + (i + 1) * w.k, shifted.data() + i * phase.k + phase.offset);
      phase.x = prepare(shifted.data(), m, phase.k, w.blocksize, kernel);
    }
    if (pairs) prepare_pairs(phase);
  });
  return out;
}

// One kernel row whose blocks reach past the weight's last byte (Note [Blocks across rows]), from a
// zero-padded copy of its bytes and block absmax: args as for the weight in place, one row.
void run_padded_row(kernels::Gemm4bitArgs args, const Weights4bit& w, Panel panel) {
  const int64_t bytes = (w.n * w.k + 1) / 2, blocks = (w.n * w.k + w.blocksize - 1) / w.blocksize;
  const int64_t byte0 = args.w - w.packed, block0 = args.absmax - w.absmax;
  thread_local std::vector<uint8_t> padded_w;
  thread_local std::vector<float> padded_absmax;
  padded_w.assign(static_cast<size_t>(args.k / 2), 0);
  std::copy(args.w, w.packed + std::min(bytes, byte0 + args.k / 2), padded_w.begin());
  padded_absmax.assign(static_cast<size_t>(args.k / w.blocksize), 0.0f);
  std::copy(args.absmax, w.absmax + std::min(blocks, block0 + args.k / w.blocksize), padded_absmax.begin());
  args.w = padded_w.data();
  args.absmax = padded_absmax.data();
  args.rows = 1;
  panel(args);
}

void run(const float* x, int64_t m, const Weights4bit& w, float* y, CpuIsa isa) {
  check(w, m);
  WEFT_CHECK(gemm_4bit_fused_supported(w.k, w.blocksize), "[gemm_4bit] the fused kernel needs blocks of 32 values ",
             "with K a multiple of 64, or blocks of a multiple of 64 values and rows that start at no more than ",
             kMaxPhases, " offsets into a block (blocksize / gcd(K, blocksize)), got K=", w.k, ", blocksize=",
             w.blocksize);
  if (m == 0 || w.n == 0) return;
  const Panel panel = panel_for(isa), kernel = panel ? panel : reference_panel;
  const int64_t period = phase_period(w.k, w.blocksize), phases = std::min(period, w.n);
  const bool pairs = isa >= CpuIsa::Avx512Vnni && m == 1 && w.blocksize == kChunk;  // Note [Two steps to a vector]
  const std::vector<Phase> prepared = prepare_phases(x, m, w, phases, prepare_for(isa), pairs);
  const std::vector<int8_t> table = int8_table(w.type);
  // Rows n0 .. n0 + rows_per_item - 1 per work item, each offset's rows one panel: the item reads
  // its stretch of W front to back, as the prefetches ahead of each row expect. Where the VNNI
  // kernel takes weight rows as lanes, each offset gets kRowsPerItem rows, its panels' 16 lanes
  // (the example's first layer, 4 offsets, at batch 8: 4 rows to a panel took twice as long),
  // unless that leaves fewer than two items per thread; the row kernels ran slower on such items
  // (the same layer at 4 rows: 0.023 against 0.017 ms), so they keep kRowsPerItem rows in all.
  int64_t rows_per_item = (kRowsPerItem + period - 1) / period * period;
  if (isa >= CpuIsa::Avx512Vnni && m >= kernels::kLanesMinRows) {
    const int64_t balanced = (w.n + 2 * num_threads() - 1) / (2 * num_threads());
    rows_per_item = std::clamp((balanced + period - 1) / period * period, rows_per_item, kRowsPerItem * period);
  }
  auto args_for = [&](const Phase& phase, int64_t first_row, int64_t rows) {
    const int64_t start = first_row * w.k - phase.offset;  // the first block's first value
    kernels::Gemm4bitArgs args;
    args.w = w.packed + start / 2;
    args.w_stride = period * w.k / 2;
    args.absmax = w.absmax + start / w.blocksize;
    args.absmax_stride = period * w.k / w.blocksize;
    args.rows = rows;
    args.k = phase.k;
    args.blocksize = w.blocksize;
    args.table = table.data();
    args.q = phase.x.q.data();
    args.q_abs = phase.x.q_abs.data();
    args.q_sum = phase.x.q_sum.data();
    args.scale = phase.x.scale.data();
    args.m = m;
    args.y = y + first_row;
    args.y_stride = w.n;
    args.y_col_stride = period;
    args.q_pairs = pairs ? phase.q_pairs.data() : nullptr;
    args.pair_compensation = pairs ? phase.pair_compensation.data() : nullptr;
    args.pair_scale = pairs ? phase.pair_scale.data() : nullptr;
    return args;
  };
  auto panel_item = [&](int64_t item) {
    const int64_t n0 = item * rows_per_item, n1 = std::min(w.n, n0 + rows_per_item);
    for (int64_t c = 0; c < phases && n0 + c < n1; ++c) {
      const Phase& phase = prepared[static_cast<size_t>(c)];
      const int64_t first = n0 + c, rows = (n1 - first + period - 1) / period;
      // Rows in place while their blocks end within the weight; only the last rows can reach past.
      int64_t whole = rows;
      while (whole > 0 && (first + (whole - 1) * period) * w.k - phase.offset + phase.k > w.n * w.k) --whole;
      if (whole > 0) kernel(args_for(phase, first, whole));
      for (int64_t r = whole; r < rows; ++r) run_padded_row(args_for(phase, first + r * period, 1), w, kernel);
    }
  };
  parallel_for_if(m * w.n * w.k >= kParallelWork, (w.n + rows_per_item - 1) / rows_per_item, panel_item);
}

// Values [begin, end) of the flat weight array, as the scalar reference decodes them.
void dequantize_reference(const kernels::Dequant4bitArgs& p) {
  for (int64_t i = p.begin; i < p.end; ++i) {
    const uint8_t byte = p.packed[i / 2];
    p.out[i - p.begin] = p.table[i % 2 == 0 ? byte >> 4 : byte & 0x0F] * p.absmax[i / p.blocksize];
  }
}

using DequantizeKernel = void (*)(const kernels::Dequant4bitArgs&);

DequantizeKernel dequantize_kernel(CpuIsa isa) {
  return isa >= CpuIsa::Avx512 ? kernels::dequantize_4bit_avx512
         : isa == CpuIsa::Avx2 ? kernels::dequantize_4bit_avx2
                               : dequantize_reference;
}

// Values [begin, end) rounded to bfloat16, from the level's float32 kernel a stretch at a time: the
// scalar reference, and the AVX2 level's (whose GEMM widens bfloat16 back to float32 anyway).
template <DequantizeKernel kFloatKernel>
void dequantize_bf16_through_float(const kernels::Dequant4bitBf16Args& p) {
  constexpr int64_t kStretch = 256;
  float values[kStretch];
  for (int64_t i = p.begin; i < p.end; i += kStretch) {
    const int64_t end = std::min(p.end, i + kStretch);
    kFloatKernel({{p.packed, p.absmax, p.table, p.blocksize, i, end}, values});
    for (int64_t v = i; v < end; ++v) p.out[v - p.begin] = float_to_bfloat16(values[v - i]);
  }
}

using DequantizeBf16Kernel = void (*)(const kernels::Dequant4bitBf16Args&);

DequantizeBf16Kernel dequantize_bf16_kernel(CpuIsa isa) {
  return isa >= CpuIsa::Avx512 ? kernels::dequantize_4bit_bf16_avx512
         : isa == CpuIsa::Avx2 ? dequantize_bf16_through_float<kernels::dequantize_4bit_avx2>
                               : dequantize_bf16_through_float<dequantize_reference>;
}

// W as the GEMM's A or Bᵀ, made block by block (GemmBlockSource in tensor/cpu/gemm/gemm.h), in
// float32 by `kernel` or, when it is set instead, in bfloat16 by `bf16_kernel`.
struct DequantizedWeights {
  const Weights4bit* w;
  DequantizeKernel kernel;
  DequantizeBf16Kernel bf16_kernel = nullptr;
};

// out[r·kc + p] = W(r0 + r, p0 + p) for r < rows, p < kc: float32, or bfloat16 bits.
void fill_dequantized(const void* context, int64_t r0, int64_t rows, int64_t p0, int64_t kc, void* out) {
  const auto& source = *static_cast<const DequantizedWeights*>(context);
  const Weights4bit& w = *source.w;
  const float* table = table_4bit_decode(w.type).data();
  // Each row's run is a few cache lines 2·K bytes after the previous one's, and its block absmax
  // K / blocksize floats after the previous ones: too far apart for the hardware prefetcher, so the
  // decoding waited on memory for most of its time (the absmax alone for half of the bfloat16
  // kernel's). The runs two rows ahead are fetched while this one is decoded.
  constexpr int64_t kAhead = 2, kLine = 64;
  for (int64_t r = 0; r < rows; ++r) {
    if (r + kAhead < rows) {
      const int64_t ahead = (r0 + r + kAhead) * w.k + p0;
      for (int64_t byte = ahead / 2; byte <= (ahead + kc - 1) / 2; byte += kLine) __builtin_prefetch(w.packed + byte);
      const float* absmax_first = w.absmax + ahead / w.blocksize;
      const float* absmax_last = w.absmax + (ahead + kc - 1) / w.blocksize;
      for (const float* a = absmax_first; a <= absmax_last; a += kLine / sizeof(float)) __builtin_prefetch(a);
      __builtin_prefetch(absmax_last);
    }
    const int64_t begin = (r0 + r) * w.k + p0, end = begin + kc;
    const kernels::Dequant4bitRun run{w.packed, w.absmax, table, w.blocksize, begin, end};
    if (source.bf16_kernel)
      source.bf16_kernel({run, static_cast<uint16_t*>(out) + r * kc});
    else
      source.kernel({run, static_cast<float*>(out) + r * kc});
  }
}

// Values of W one work item of dequantized_rows dequantizes: 512 KiB of float32, in the core's L2.
constexpr int64_t kItemValues = int64_t{1} << 17;

// A few rows of x against a W the fused kernel does not take (blocks of 32 with K not a multiple
// of 64, or rows starting at more than 16 offsets into a block): each thread dequantizes a few
// rows of W at a time into its own buffer and multiplies x by them there with weft's GEMM, whose
// few-rows paths (dot products for one row, W read in place) suit this shape; the blocked path
// would spend a 32-wide tile on a single column of yᵀ (nf4 512×784, batch 1: 145 µs against 20 µs
// for the float32 linear).
void dequantized_rows(const float* x, int64_t m, const Weights4bit& w, float* y, CpuIsa isa) {
  const int64_t threads = num_threads();
  const int64_t rows_per_item = std::clamp<int64_t>(kItemValues / w.k, 1, (w.n + threads - 1) / threads);
  const int64_t items = (w.n + rows_per_item - 1) / rows_per_item;
  parallel_for(items, [&](int64_t item) {
    thread_local detail::AlignedVector<float> tile;
    const int64_t n0 = item * rows_per_item, rows = std::min(rows_per_item, w.n - n0);
    tile.resize(static_cast<size_t>(rows * w.k));
    dequantize_4bit_rows(w, n0, rows, tile.data(), isa);  // inside parallel_for: on this thread
    weft::detail::gemm(m, rows, w.k, {x, w.k, 1, false}, {tile.data(), 1, w.k, false}, y + n0, w.n, false);
  });
}

// Note [Dequantized block by block]: the compute-bound regime is weft's float32 GEMM with W made
// block by block, exactly dequantized into a scratch of the thread that needs it, so W never
// exists in float32 beyond a block and each value is dequantized once. Two orientations:
//   y = x · Wᵀ, W as the GEMM's B: each panel of 32 of W's rows is dequantized into L1 and packed
//     from there as the float32 linear packs W; the product writes y directly. For weights under
//     a million values, and for 512 rows and more: the example's 512×784 at batch 64 / 128 / 256,
//     2 threads on a Xeon, 233 / 377 / 732 µs against 320 / 452 / 798 µs the other way (the
//     float32 linear: 351 µs at 128); 2048² at batch 1024, 26.3 against 33.8 ms.
//   yᵀ = W · xᵀ, W as the GEMM's A: each cache block of W's rows is dequantized and read in place
//     (twelve rows of it in L1 at a time while xᵀ's packed panels pass by), then yᵀ is transposed
//     into y. For larger weights at fewer rows it is the faster one: 4096² at batch 64 / 128 / 256,
//     7.5 / 14.3 / 27.5 ms against 9.7 / 15.5 / 29.5.
// (Dequantizing 4 MiB tiles of W and multiplying them read the tiles back from beyond L2: batch
// 32, 4096², 2 threads, 6.3 ms, twice weft's float32 linear.)
constexpr int64_t kWeightsAsBMaxValues = int64_t{1} << 20;
constexpr int64_t kWeightsAsBMinRows = 512;

// y (m×n) = the GEMM's yᵀ (n×m), by 16 × 16 blocks so both sides stay in L1; the threads take 16
// rows of y each (on one thread the other waited for it: 4 % of a 512×512 product at batch 128).
void transpose_into_y(const float* from, int64_t m, int64_t n, float* y) {
  constexpr int64_t kBlock = 16;
  auto rows_of_y = [&](int64_t part) {
    const int64_t i0 = part * kBlock, i1 = std::min(m, i0 + kBlock);
    for (int64_t n0 = 0; n0 < n; n0 += kBlock)
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = n0; j < std::min(n, n0 + kBlock); ++j) y[i * n + j] = from[j * m + i];
  };
  const int64_t parts = (m + kBlock - 1) / kBlock;
  parallel_for_if(m * n >= kParallelCopy, parts, rows_of_y);
}

// x (m × w.k, float32, or bfloat16 bits when bf16) · Wᵀ in one of the two orientations, with W
// made by `source` (float32 values, or rounded to bfloat16 for a bfloat16 x).
void gemm_dequantized(const void* x, bool bf16, int64_t m, const Weights4bit& w, const DequantizedWeights& source,
                      float* y) {
  // Runs of W's rows from a multiple of 64 values: whole bytes, 16 values at a time from a block's
  // start (a run from value 373 decoded its ends one value at a time and took twice the product).
  const weft::detail::GemmBlockSource rows{fill_dequantized, &source, 64, bf16};
  if (w.n * w.k < kWeightsAsBMaxValues || m >= kWeightsAsBMinRows)
    return weft::detail::gemm(m, w.n, w.k, {x, w.k, 1, bf16}, rows, true, y, w.n, false);
  // From the caching allocator: reused, and released by empty_cache.
  const Tensor yt = weft::detail::make_tensor({w.n, m}, kFloat32, kCPU);
  weft::detail::gemm(w.n, m, w.k, rows, {x, 1, w.k, bf16}, yt.data<float>(), m, false);
  transpose_into_y(yt.data<float>(), m, w.n, y);
}

// The scalar reference of the exact kernels (Note [Exact 4-bit product]): each value
// dequantized as dequantize_4bit does, times its activation, summed in the order of K.
void exact_reference(const kernels::Gemm4bitExactArgs& p) {
  for (int64_t n = p.n0; n < p.n0 + p.rows; ++n)
    for (int64_t i = 0; i < p.m; ++i) {
      float y = 0.0f;
      for (int64_t v = 0; v < p.k; ++v) {
        const int64_t flat = n * p.k + v;
        const uint8_t byte = p.packed[flat / 2];
        const float value = p.table[flat % 2 == 0 ? byte >> 4 : byte & 0x0F] * p.absmax[flat / p.blocksize];
        y += value * p.x[i * p.k + prepared_position(v)];
      }
      p.y[i * p.y_stride + n] = y;
    }
}

using ExactKernel = void (*)(const kernels::Gemm4bitExactArgs&);

ExactKernel exact_kernel(CpuIsa isa) {
  return isa >= CpuIsa::Avx512 ? kernels::gemm_4bit_exact_avx512
         : isa == CpuIsa::Avx2 ? kernels::gemm_4bit_exact_avx2
                               : exact_reference;
}

// x permuted into the kernels' order (Note [4-bit product layout]), then kRowsPerItem weight rows
// per work item: each thread streams its rows' codes once for all m activation rows.
void run_exact(const float* x, int64_t m, const Weights4bit& w, float* y, ExactKernel kernel) {
  detail::AlignedVector<float> permuted(static_cast<size_t>(m * w.k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t v = 0; v < w.k; ++v) permuted[static_cast<size_t>(i * w.k + prepared_position(v))] = x[i * w.k + v];
  const float* table = table_4bit_decode(w.type).data();
  auto item = [&](int64_t it) {
    const int64_t n0 = it * kRowsPerItem, rows = std::min(kRowsPerItem, w.n - n0);
    kernel({w.packed, w.absmax, table, w.k, w.blocksize, n0, rows, permuted.data(), m, y, w.n});
  };
  parallel_for_if(m * w.n * w.k >= kParallelWork, (w.n + kRowsPerItem - 1) / kRowsPerItem, item);
}

}  // namespace

bool gemm_4bit_fused_supported(int64_t k, int64_t blocksize) {
  if (k <= 0) return false;
  // Blocks of 32: two to a kernel step, for rows of whole steps (Note [4-bit product layout]).
  if (blocksize == kChunk / 2) return k % kChunk == 0;
  return blocksize >= kChunk && blocksize % kChunk == 0 && phase_period(k, blocksize) <= kMaxPhases;
}

void gemm_4bit_fused(const float* x, int64_t m, const Weights4bit& w, float* y, CpuIsa isa) {
  check_isa(isa);
  run(x, m, w, y, isa);
}

void gemm_4bit_fused_reference(const float* x, int64_t m, const Weights4bit& w, float* y) {
  run(x, m, w, y, CpuIsa::Scalar);
}

PreparedActivations prepare_4bit_activations(const float* x, int64_t m, int64_t k, int64_t blocksize, CpuIsa isa) {
  check_isa(isa);
  WEFT_CHECK(m >= 0 && k > 0 && blocksize > 0 && k % kChunk == 0 && k % blocksize == 0 &&
                 (blocksize == kChunk / 2 || blocksize % kChunk == 0),
             "[prepare_4bit_activations] expected K a multiple of 64 and of the block (32 or a multiple of 64), ",
             "got m=", m, ", K=", k, ", blocksize=", blocksize);
  return prepare(x, m, k, blocksize, prepare_for(isa));
}

bool gemm_4bit_exact_supported(int64_t k, int64_t blocksize) {
  return k > 0 && k % kChunk == 0 && blocksize > 0 && blocksize % kChunk == 0;
}

void gemm_4bit_exact(const float* x, int64_t m, const Weights4bit& w, float* y, CpuIsa isa) {
  check_isa(isa);
  check(w, m);
  WEFT_CHECK(gemm_4bit_exact_supported(w.k, w.blocksize), "[gemm_4bit_exact] expected K and the block size ",
             "multiples of 64, got K=", w.k, ", blocksize=", w.blocksize);
  if (m > 0 && w.n > 0) run_exact(x, m, w, y, exact_kernel(isa));
}

void gemm_4bit_exact_reference(const float* x, int64_t m, const Weights4bit& w, float* y) {
  check(w, m);
  WEFT_CHECK(gemm_4bit_exact_supported(w.k, w.blocksize), "[gemm_4bit_exact] expected K and the block size ",
             "multiples of 64, got K=", w.k, ", blocksize=", w.blocksize);
  if (m > 0 && w.n > 0) run_exact(x, m, w, y, exact_reference);
}

void gemm_4bit(const float* x, int64_t m, const Weights4bit& w, float* y, Product4bit product, CpuIsa isa) {
  check_isa(isa);
  check(w, m);
  if (m == 0 || w.n == 0) return;
  if (m <= kFusedMaxRows && product == Product4bit::Exact && gemm_4bit_exact_supported(w.k, w.blocksize)) {
    run_exact(x, m, w, y, exact_kernel(isa));
  } else if (m <= kFusedMaxRows && product == Product4bit::Int8Activations &&
             gemm_4bit_fused_supported(w.k, w.blocksize)) {
    run(x, m, w, y, isa);
  } else if (m <= kFusedMaxRows) {
    dequantized_rows(x, m, w, y, isa);
  } else {
    gemm_dequantized(x, false, m, w, DequantizedWeights{&w, dequantize_kernel(isa)}, y);
  }
}

void gemm_4bit_bf16(const uint16_t* x, int64_t m, const Weights4bit& w, float* y, Product4bit product,
                    CpuIsa isa) {
  check_isa(isa);
  check(w, m);
  if (m == 0 || w.n == 0) return;
  // Past the fused kernel's rows: W rounded to bfloat16 block by block into weft's bfloat16 GEMM,
  // which multiplies pairs of bfloat16 into float32 sums.
  if (m > kFusedMaxRows) {
    return gemm_dequantized(x, true, m, w, DequantizedWeights{&w, nullptr, dequantize_bf16_kernel(isa)}, y);
  }
  std::vector<float> wide(static_cast<size_t>(m * w.k));
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = bfloat16_to_float(x[i]);
  gemm_4bit(wide.data(), m, w, y, product, isa);
}

void gemm_4bit_input_grad(const float* g, int64_t m, const Weights4bit& w, float* dx, CpuIsa isa) {
  check_isa(isa);
  check(w, m);
  // W as the GEMM's B, its rows dequantized a K block and up to 256 columns at a time, never
  // whole (Note [Dequantized block by block]). Dequantizing all of W first and multiplying by it
  // wrote and read back 64 MiB for a 4096² layer: its backward at batch 128, 2 threads, took 20.3
  // ms, now 14.2 (the float32 product with W in memory alone: 15.2-16.0).
  const DequantizedWeights source{&w, dequantize_kernel(isa)};
  const weft::detail::GemmBlockSource rows{fill_dequantized, &source, 1};
  weft::detail::gemm(m, w.k, w.n, {g, w.n, 1, false}, rows, false, dx, w.k, false);
}

namespace {

// Rows [row0, row0 + rows) of W through `kernel` (into float32 or bfloat16), in chunks of whole
// blocks for the threads.
template <class Args, class Out>
void dequantize_rows_with(void (*kernel)(const Args&), const Weights4bit& w, int64_t row0, int64_t rows, Out* out) {
  check(w, 0);
  WEFT_CHECK(row0 >= 0 && rows >= 0 && row0 + rows <= w.n, "[dequantize_4bit_rows] rows [", row0, ", ", row0 + rows,
             ") are not within the ", w.n, " rows of the weight");
  const int64_t begin = row0 * w.k, end = (row0 + rows) * w.k;
  const int64_t chunk = std::max<int64_t>(w.blocksize, (int64_t{1} << 16) / w.blocksize * w.blocksize);
  const int64_t first = begin / chunk, last = (end + chunk - 1) / chunk;
  auto part = [&](int64_t c) {
    const kernels::Dequant4bitRun run{w.packed, w.absmax, table_4bit_decode(w.type).data(), w.blocksize,
                                      std::max(begin, (first + c) * chunk), std::min(end, (first + c + 1) * chunk)};
    if (run.begin < run.end) kernel({run, out + (run.begin - begin)});
  };
  parallel_for_if(end - begin >= kParallelWork, last - first, part);
}

}  // namespace

void dequantize_4bit_rows(const Weights4bit& w, int64_t row0, int64_t rows, float* out, CpuIsa isa) {
  check_isa(isa);
  dequantize_rows_with(dequantize_kernel(isa), w, row0, rows, out);
}

void dequantize_4bit_rows_bf16(const Weights4bit& w, int64_t row0, int64_t rows, uint16_t* out, CpuIsa isa) {
  check_isa(isa);
  dequantize_rows_with(dequantize_bf16_kernel(isa), w, row0, rows, out);
}

}  // namespace weft::precision::quant
