// FP8 cast throughput against memcpy, measured in the same run on the same buffers.
//
// A cast reads its source and writes its codes, so its speed is bytes moved (read + written)
// per second, and the peer is memcpy moving bytes the same way: copying the cast's source buffer
// (read + write = twice its size). The goal is a cast at >= 50 % of memcpy's GB/s: a cast that
// keeps up with memory is free next to the GEMM that follows it.
//
// Operations, each on every instruction-set level this CPU has:
//   f32->e4m3        fp8_cast of a float32 tensor (the forward's input and weight in float32)
//   bf16->e4m3       the same from bfloat16 (the transformer-engine precision's activations)
//   bf16->e4m3+bf16  the fused cast Fp8Linear uses: codes, amax, and the exact bfloat16 copy
//   e4m3->bf16       the decode into the CPU GEMM's scratch operand
// at two sizes: 256 Ki elements (the source fits in L2/L3) and 16 Mi elements (memory).
//
// The kernels are timed directly on preallocated buffers, as memcpy is (one thread each, so the
// peer is fair); the last column times the public fp8_cast on all threads, which also allocates
// its result. Timing: after a warm-up, memcpy and the cast alternate call by call until each has
// run --min-time seconds; the median call counts.
//
// Output: a table, then one line of JSON starting with {"bench":"fp8_cast".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "precision/fp8/fp8_dispatch.h"
#include "median_timer.h"
#include "weft.h"

namespace {

using weft::CpuIsa;
namespace wd = weft::detail;

using Timer = bench::MedianTimer;

struct Row {
  std::string op, isa;
  int64_t n;
  double cast_gbs, memcpy_gbs, api_gbs;
};

// Times `cast` (moving `moved` bytes per call) against memcpy of `source_bytes`, alternately.
std::pair<double, double> time_against_memcpy(const std::function<void()>& cast, size_t moved, size_t source_bytes,
                                              double min_time) {
  std::vector<char> from(source_bytes, 1), to(source_bytes);
  Timer copy([&] { std::memcpy(to.data(), from.data(), source_bytes); });
  Timer timed(cast);
  for (int i = 0; !copy.done(min_time) || !timed.done(min_time); ++i) {
    (i % 2 ? copy : timed).call();
    (i % 2 ? timed : copy).call();
  }
  const double cast_gbs = static_cast<double>(moved) / timed.median() * 1e-9;
  return {cast_gbs, 2.0 * static_cast<double>(source_bytes) / copy.median() * 1e-9};
}

double time_api(const std::function<void()>& fn, size_t moved, double min_time) {
  Timer timed(fn);
  while (!timed.done(min_time)) timed.call();
  return static_cast<double>(moved) / timed.median() * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  double min_time = 0.3;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--min-time" && i + 1 < argc) {
      min_time = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_fp8_cast [--min-time SECONDS]\n");
      return arg == "--help" ? 0 : 2;
    }
  }
  const int threads = weft::num_threads();
  std::printf("bench_fp8_cast: GB/s = (bytes read + bytes written) / median call; kernels and memcpy on one "
              "thread, the API column on %d threads (allocating its result); CPU supports %s%s\n\n",
              threads, std::string(weft::cpu_isa_name(weft::cpu_isa_supported())).c_str(),
              weft::cpu_isa_emulated() ? " (AVX-512 emulated: its figures mean nothing)" : "");
  std::printf("%-16s %-12s %10s | %10s %10s %9s | %10s\n", "op", "isa", "elements", "cast GB/s", "memcpy", "ratio",
              "API GB/s");

  std::vector<Row> rows;
  for (const int64_t n : {int64_t{1} << 18, int64_t{1} << 24}) {
    weft::Generator gen(7);
    const weft::Tensor x32 = weft::mul(weft::randn({n}, weft::kFloat32, &gen), 50.0);
    const weft::Tensor x16 = x32.to(weft::kBFloat16);
    const weft::Tensor q = weft::precision::fp8_cast(x32, weft::kFloat8E4M3FN, 1.0f);
    std::vector<uint8_t> codes(static_cast<size_t>(n));
    std::vector<uint16_t> decoded(static_cast<size_t>(n));
    const size_t un = static_cast<size_t>(n);
    struct Op {
      const char* name;
      const void* src;
      bool bf16, fused, decode;
      size_t source_bytes, moved;
    };
    const std::vector<Op> ops = {
        {"f32->e4m3", x32.data_ptr(), false, false, false, 4 * un, 5 * un},
        {"bf16->e4m3", x16.data_ptr(), true, false, false, 2 * un, 3 * un},
        {"bf16->e4m3+bf16", x16.data_ptr(), true, true, false, 2 * un, 5 * un},
        {"e4m3->bf16", q.data_ptr(), false, false, true, un, 3 * un},
    };
    for (const Op& op : ops) {
      std::function<void()> api;
      if (op.decode) api = [&] { weft::precision::fp8_decode_bf16(q); };
      else api = [&, bf16 = op.bf16, fused = op.fused] {
        weft::precision::fp8_cast_with_amax(bf16 ? x16 : x32, weft::kFloat8E4M3FN, 1.0f, true, fused);
      };
      const double api_gbs = time_api(api, op.moved, min_time);
      for (CpuIsa isa : weft::cpu_isas_supported()) {
        if (isa > CpuIsa::Avx512) continue;  // the FP8 kernels have no VNNI/BF16 variants
        const weft::CpuIsaGuard level(isa);
        const wd::Fp8KernelTable k = wd::fp8_kernels();
        std::function<void()> kernel;
        if (op.decode) {
          kernel = [&, k] { k.decode({codes.data(), nullptr, decoded.data(), n, 1.0f, false}); };
        } else {
          kernel = [&, k, op] {
            k.encode({op.src, op.bf16, codes.data(), op.fused ? decoded.data() : nullptr, n, 1.0f, false, true});
          };
        }
        if (op.decode) std::memcpy(codes.data(), q.data_ptr(), un);
        const auto [cast_gbs, memcpy_gbs] = time_against_memcpy(kernel, op.moved, op.source_bytes, min_time);
        const Row r{op.name, std::string(weft::cpu_isa_name(isa)), n, cast_gbs, memcpy_gbs, api_gbs};
        rows.push_back(r);
        std::printf("%-16s %-12s %10lld | %10.2f %10.2f %8.0f%% | %10.2f\n", r.op.c_str(), r.isa.c_str(),
                    static_cast<long long>(n), r.cast_gbs, r.memcpy_gbs, 100 * r.cast_gbs / r.memcpy_gbs, r.api_gbs);
        std::fflush(stdout);
      }
    }
  }
  std::printf("\n{\"bench\":\"fp8_cast\",\"threads_api\":%d,\"min_time_s\":%g,\"cases\":[", threads, min_time);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::printf("%s{\"op\":\"%s\",\"isa\":\"%s\",\"elements\":%lld,\"cast_gbs\":%.3f,\"memcpy_gbs\":%.3f,"
                "\"cast_vs_memcpy\":%.4f,\"api_gbs\":%.3f}",
                i ? "," : "", r.op.c_str(), r.isa.c_str(), static_cast<long long>(r.n), r.cast_gbs, r.memcpy_gbs,
                r.cast_gbs / r.memcpy_gbs, r.api_gbs);
  }
  std::printf("]}\n");
  return 0;
}
