// FP8 weight-only GEMV (precision/fp8/fp8_weight_linear.h) against a read-only memory stream,
// measured in the same run: decoding a token multiplies one input row by every weight once, so
// its limit is how fast the weight bytes come from memory, and the peer is a plain sum over a
// buffer of the same size as the weight's codes, on the same threads. The goal is GEMV weight
// GB/s >= 90 % of the stream's (issue 44, "Decode >= 90 % of the bandwidth bound").
//
// Shapes (out, in): 4096 x 4096 (a 7B model's attention projection), 2048 x 5632 and 5632 x 2048
// (a 1.1B Llama's MLP down and up projections). Batch 1, float32 activations, per-channel scales.
// To measure memory rather than the last-level cache, both sides rotate over enough copies of
// their buffer to pass --working-set MB (default 512) in all, as a model's layers do.
//
// Timing: after an untimed pass over every copy, the GEMV (the public forward, on weft's threads) and the stream
// alternate call by call until each has run --min-time seconds; the median call counts, and the
// fastest call of each is printed beside it (on a machine shared with other work, the fastest
// call is the one that ran least disturbed). Both sides suffer alike from the others' load,
// which is why the ratio is the figure.
//
// Output: a table, then one line of JSON starting with {"bench":"fp8_weight".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "weft.h"

namespace {

// Times one case call by call (after one warm-up call): the median and the fastest call.
class Timer {
 public:
  explicit Timer(std::function<void()> fn) : fn_(std::move(fn)) { fn_(); }
  void call() {
    const auto t0 = std::chrono::steady_clock::now();
    fn_();
    calls_.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    total_ += calls_.back();
  }
  bool done(double min_time) const { return total_ >= min_time && calls_.size() >= 5; }
  double median() {
    std::nth_element(calls_.begin(), calls_.begin() + static_cast<int64_t>(calls_.size() / 2), calls_.end());
    return calls_[calls_.size() / 2];
  }
  double fastest() const { return *std::min_element(calls_.begin(), calls_.end()); }

 private:
  std::function<void()> fn_;
  std::vector<double> calls_;
  double total_ = 0;
};

struct Row {
  int64_t out, in, copies;
  double gemv_gbs, stream_gbs;            // median calls
  double gemv_best_gbs, stream_best_gbs;  // fastest calls
};

volatile uint64_t g_sink;  // keeps the stream's sums alive

// Sums n_words uint64 words, split over weft's threads as the GEMV is, prefetching 4 KB ahead as
// the GEMV does, so that the peer is the fastest plain read of the same bytes.
void stream(const uint64_t* words, int64_t n_words) {
  constexpr int64_t kChunk = 1 << 13;   // 64 KB per task
  constexpr int64_t kAhead = 4096 / 8;  // words
  const int64_t tasks = (n_words + kChunk - 1) / kChunk;
  std::vector<uint64_t> partial(static_cast<size_t>(tasks));
  weft::parallel_for(tasks, [&](int64_t t) {
    const int64_t begin = t * kChunk, end = std::min(n_words, begin + kChunk);
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = begin;
    for (; i + 8 <= end; i += 8) {
      if (i + kAhead < n_words) __builtin_prefetch(words + i + kAhead);
      s0 += words[i] + words[i + 4];
      s1 += words[i + 1] + words[i + 5];
      s2 += words[i + 2] + words[i + 6];
      s3 += words[i + 3] + words[i + 7];
    }
    for (; i < end; ++i) s0 += words[i];
    partial[static_cast<size_t>(t)] = s0 + s1 + s2 + s3;
  });
  uint64_t total = 0;
  for (uint64_t p : partial) total += p;
  g_sink = total;
}

Row run_case(int64_t out, int64_t in, double working_set_mb, double min_time) {
  using weft::precision::Fp8WeightLinear;
  const int64_t bytes = out * in;
  const int64_t copies = std::max<int64_t>(1, static_cast<int64_t>(working_set_mb * 1e6 / static_cast<double>(bytes)));
  std::vector<Fp8WeightLinear> layers;
  {
    Fp8WeightLinear first(in, out, false, weft::precision::Fp8WeightGranularity::PerChannel);
    const weft::nn::TensorDict state = first->state_dict();
    layers.push_back(first);
    const weft::TensorFrameGuard skip(weft::TensorFrame{std::nullopt, std::nullopt, true});
    for (int64_t c = 1; c < copies; ++c) {
      Fp8WeightLinear copy(in, out, false, weft::precision::Fp8WeightGranularity::PerChannel);
      copy->load_state_dict(state);
      layers.push_back(copy);
    }
  }
  std::vector<std::vector<uint64_t>> buffers(static_cast<size_t>(copies),
                                             std::vector<uint64_t>(static_cast<size_t>(bytes / 8), 1));
  weft::Generator gen(1);
  const weft::Tensor x = weft::randn({1, in}, weft::kFloat32, &gen);
  int64_t next_layer = 0, next_buffer = 0;
  Timer gemv([&] { layers[static_cast<size_t>(next_layer++ % copies)]->forward(x); });
  Timer peer([&] {
    const auto& b = buffers[static_cast<size_t>(next_buffer++ % copies)];
    stream(b.data(), static_cast<int64_t>(b.size()));
  });
  // One untimed pass over every copy first: page faults and waking the threads are not measured.
  for (int64_t c = 0; c < copies; ++c) {
    layers[static_cast<size_t>(c)]->forward(x);
    stream(buffers[static_cast<size_t>(c)].data(), static_cast<int64_t>(buffers[static_cast<size_t>(c)].size()));
  }
  for (int i = 0; !gemv.done(min_time) || !peer.done(min_time); ++i) {
    (i % 2 ? gemv : peer).call();
    (i % 2 ? peer : gemv).call();
  }
  const double gb = static_cast<double>(bytes) * 1e-9;  // both sides read exactly the weight's bytes
  return {out, in, copies, gb / gemv.median(), gb / peer.median(), gb / gemv.fastest(), gb / peer.fastest()};
}

}  // namespace

int main(int argc, char** argv) {
  double min_time = 0.5, working_set_mb = 512;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--min-time" && i + 1 < argc) {
      min_time = std::atof(argv[++i]);
    } else if (arg == "--working-set" && i + 1 < argc) {
      working_set_mb = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_fp8_weight [--min-time SECONDS] [--working-set MB]\n");
      return arg == "--help" ? 0 : 2;
    }
  }
  const int threads = weft::num_threads();
  std::printf(
      "bench_fp8_weight: batch-1 FP8 weight GEMV vs a read-only stream of the same bytes, %d threads each, "
      "working set %.0f MB per side; kernel level %s%s\n\n",
      threads, working_set_mb, std::string(weft::cpu_isa_name(weft::cpu_isa())).c_str(),
      weft::cpu_isa_emulated() ? " (AVX-512 emulated: its figures mean nothing)" : "");
  std::printf("%6s %6s %7s %7s | %10s %12s %7s | %10s %12s %7s\n", "out", "in", "MB", "copies", "GEMV GB/s",
              "stream GB/s", "ratio", "best GEMV", "best stream", "ratio");
  std::vector<Row> rows;
  for (const auto& [out, in] : std::vector<std::pair<int64_t, int64_t>>{{4096, 4096}, {2048, 5632}, {5632, 2048}}) {
    const Row r = run_case(out, in, working_set_mb, min_time);
    rows.push_back(r);
    std::printf("%6lld %6lld %7.1f %7lld | %10.2f %12.2f %6.0f%% | %10.2f %12.2f %6.0f%%\n",
                static_cast<long long>(r.out), static_cast<long long>(r.in), static_cast<double>(r.out * r.in) * 1e-6,
                static_cast<long long>(r.copies), r.gemv_gbs, r.stream_gbs, 100 * r.gemv_gbs / r.stream_gbs,
                r.gemv_best_gbs, r.stream_best_gbs, 100 * r.gemv_best_gbs / r.stream_best_gbs);
    std::fflush(stdout);
  }
  std::printf(
      "\n{\"bench\":\"fp8_weight\",\"threads\":%d,\"isa\":\"%s\",\"min_time_s\":%g,\"working_set_mb\":%g,"
      "\"cases\":[",
      threads, std::string(weft::cpu_isa_name(weft::cpu_isa())).c_str(), min_time, working_set_mb);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::printf(
        "%s{\"out\":%lld,\"in\":%lld,\"weight_bytes\":%lld,\"gemv_gbs\":%.3f,\"stream_gbs\":%.3f,"
        "\"gemv_vs_stream\":%.4f,\"best_gemv_gbs\":%.3f,\"best_stream_gbs\":%.3f,"
        "\"best_gemv_vs_stream\":%.4f}",
        i ? "," : "", static_cast<long long>(r.out), static_cast<long long>(r.in), static_cast<long long>(r.out * r.in),
        r.gemv_gbs, r.stream_gbs, r.gemv_gbs / r.stream_gbs, r.gemv_best_gbs, r.stream_best_gbs,
        r.gemv_best_gbs / r.stream_best_gbs);
  }
  std::printf("]}\n");
  return 0;
}
