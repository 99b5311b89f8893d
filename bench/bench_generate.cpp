// bench_generate: generation from a Hugging Face folder (weft's side of bench/compare_generate.sh).
//
//   bench_generate --model DIR [--quantize MODE] [--dtype float32|bfloat16] [--prompt 128]
//                  [--new 128] [--threads 2] [--repeat 3] [--packed-mb 0] [--device cpu|cuda]
//
// A prompt of random token ids (seed 0), greedy decoding of --new tokens with eos ignored, batch 1.
// Per run: decode tokens/s (every step after the first token) from a full generation, then
// prefill tokens/s from a generation of one token (the prompt's forward and the first token, the
// whole call timed), run right after it as transformers' side runs its own. Decode at batch 1
// reads every weight once per token, so its limit is memory bandwidth: the bytes a decode step
// reads (the weights as stored, the KV cache at its mean length) divided by the step's time,
// against a read-only stream over a buffer of the same size timed right after each run
// ("bandwidth_fraction": the median of the runs' ratios, so a shared machine's bandwidth drifting
// between runs cancels out). The stream runs in a child process, so its buffer stays out of this
// one's peak resident memory. The median of --repeat runs is reported, with the peak resident
// memory against weights + KV cache, as one JSON line after a table. --packed-mb sets the
// packed-weight cache's limit (tensor/packed_weights.h; 0, the default, leaves it off); the packed
// copies it made are reported, and count in the peak resident memory.
//
// --device cuda (a build with -DWEFT_CUDA=ON): the model and its KV cache on the GPU. The stream
// is then a sum over a device buffer of the same size (a reduction reads every byte once, at close
// to the memory's rate), and the memory held against weights + KV cache ("memory_over_stored",
// on the CPU the peak resident memory) is the device's: the caching allocator's peak.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "weft.h"

using namespace weft;

namespace {

struct Options {
  std::string model;
  std::string quantize;
  std::string dtype = "float32";
  int64_t prompt = 128;
  int64_t new_tokens = 128;
  int threads = 2;
  int repeat = 3;
  int64_t packed_mb = 0;
  std::string device = "cpu";
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "bench_generate: %s\nusage: bench_generate --model DIR [--quantize MODE] [--dtype D] "
                       "[--prompt N] [--new N] [--threads N] [--repeat N] [--packed-mb N] [--device cpu|cuda]\n",
               why.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage(flag + " needs a value");
    const std::string v = argv[i + 1];
    if (flag == "--model") o.model = v;
    else if (flag == "--quantize") o.quantize = v == "none" ? "" : v;
    else if (flag == "--dtype") o.dtype = v;
    else if (flag == "--prompt") o.prompt = std::atoll(v.c_str());
    else if (flag == "--new") o.new_tokens = std::atoll(v.c_str());
    else if (flag == "--threads") o.threads = std::atoi(v.c_str());
    else if (flag == "--repeat") o.repeat = std::atoi(v.c_str());
    else if (flag == "--packed-mb") o.packed_mb = std::atoll(v.c_str());
    else if (flag == "--device") o.device = v;
    else usage("unknown option " + flag);
  }
  if (o.model.empty()) usage("--model is required");
  if (o.dtype != "float32" && o.dtype != "bfloat16") usage("--dtype expects float32 or bfloat16, got '" + o.dtype + "'");
  if (o.prompt < 1 || o.new_tokens < 2 || o.threads < 1 || o.repeat < 1 || o.packed_mb < 0) usage("sizes must be positive");
  if (o.device != "cpu" && o.device != "cuda") usage("--device expects cpu or cuda, got '" + o.device + "'");
  if (o.device == "cuda" && !cuda::is_available()) usage("--device cuda: " + cuda::unavailable_reason());
  return o;
}

// Seconds to read `bytes` once with `threads` threads (each summing its share as 64-bit words),
// the median of 5 passes; the buffer is written first so its pages are resident.
double stream_seconds(size_t bytes, int threads) {
  const size_t words = bytes / sizeof(uint64_t);
  std::vector<uint64_t> buffer(words);
  for (size_t i = 0; i < words; ++i) buffer[i] = i * 0x9E3779B97F4A7C15ull;
  std::vector<double> passes;
  volatile uint64_t sink = 0;
  for (int pass = 0; pass < 5; ++pass) {
    std::vector<uint64_t> partial(static_cast<size_t>(threads));
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const size_t begin = words * static_cast<size_t>(t) / static_cast<size_t>(threads);
        const size_t end = words * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
        uint64_t a = 0, b = 0, c = 0, d = 0;
        size_t i = begin;
        for (; i + 4 <= end; i += 4) {
          a += buffer[i];
          b += buffer[i + 1];
          c += buffer[i + 2];
          d += buffer[i + 3];
        }
        for (; i < end; ++i) a += buffer[i];
        partial[static_cast<size_t>(t)] = a + b + c + d;
      });
    for (auto& th : pool) th.join();
    passes.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    for (uint64_t p : partial) sink = sink + p;
  }
  std::sort(passes.begin(), passes.end());
  return passes[passes.size() / 2];
}

// stream_seconds in a forked child: the parent's peak resident memory (ru_maxrss) never sees the
// buffer. The parent's pool threads are idle here, and the child only allocates, spawns its own
// threads and exits.
double stream_seconds_apart(size_t bytes, int threads) {
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("bench_generate: pipe");
    std::exit(1);
  }
  const pid_t child = fork();
  if (child < 0) {
    std::perror("bench_generate: fork");
    std::exit(1);
  }
  if (child == 0) {
    close(fds[0]);
    const double seconds = stream_seconds(bytes, threads);
    const bool sent = write(fds[1], &seconds, sizeof(seconds)) == static_cast<ssize_t>(sizeof(seconds));
    _exit(sent ? 0 : 1);
  }
  close(fds[1]);
  double seconds = 0.0;
  const bool received = read(fds[0], &seconds, sizeof(seconds)) == static_cast<ssize_t>(sizeof(seconds));
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (!received || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !(seconds > 0.0)) {
    std::fprintf(stderr, "bench_generate: the stream measurement's process failed\n");
    std::exit(1);
  }
  return seconds;
}

// Seconds for the GPU to read `bytes` once: a sum over a float32 buffer of that size on the
// device, the median of 5 passes after one to warm up.
double device_stream_seconds(size_t bytes) {
  const Tensor buffer = ones({static_cast<int64_t>(bytes / sizeof(float))}, TensorOptions(kFloat32).device(Device("cuda")));
  std::vector<double> passes;
  for (int pass = 0; pass < 6; ++pass) {
    cuda::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    const Tensor total = buffer.sum();
    cuda::synchronize();
    if (pass > 0) passes.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(passes.begin(), passes.end());
  return passes[passes.size() / 2];
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// Bytes of every parameter and buffer as stored (quantized weights at their packed size).
size_t weight_bytes(const nn::Module& model) {
  const nn::TensorDict sd = model.state_dict();
  size_t total = 0;
  for (const auto& [name, t] : sd) total += t.nbytes();
  // A tied head is listed under two names and stored once.
  if (const Tensor* head = sd.find("lm_head.weight"))
    for (const char* embedding : {"transformer.wte.weight", "model.embed_tokens.weight"})
      if (const Tensor* e = sd.find(embedding); e != nullptr && e->data_ptr() == head->data_ptr()) total -= head->nbytes();
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  set_num_threads(o.threads);
  set_packed_weight_limit(o.packed_mb << 20);
  const auto load_start = std::chrono::steady_clock::now();
  models::PretrainedModel pretrained = models::from_pretrained(
      o.model, {.quantize = o.quantize, .dtype = o.dtype == "bfloat16" ? kBFloat16 : kFloat32});
  const bool gpu = o.device == "cuda";
  if (gpu) pretrained.model->to(Device("cuda"));
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  models::CausalLM& model = *pretrained.model;
  const models::CausalLMShape shape = model.lm_shape();

  Generator ids_generator(0);
  std::vector<int64_t> prompt(static_cast<size_t>(o.prompt));
  for (int64_t& id : prompt) id = static_cast<int64_t>(ids_generator.below(static_cast<uint64_t>(shape.vocab_size)));
  models::GenerateOptions g;
  g.max_new_tokens = o.new_tokens;
  g.use_eos = false;
  g.kv_dtype = o.dtype == "bfloat16" ? kBFloat16 : kFloat32;

  // Per decode step: every weight once, and the cache's keys and values up to the step's length
  // (on average the prompt plus half the new tokens of the cache's capacity).
  const size_t weights = weight_bytes(model);
  const double kv_fraction = (static_cast<double>(o.prompt) + static_cast<double>(o.new_tokens) / 2.0) /
                             static_cast<double>(o.prompt + o.new_tokens);
  // Prefill is timed as transformers' side times it: a whole generate of one token, right after a
  // full generation (so the weights are where the decode left them, not where the stream did).
  // The callback ends it after that token, so its KV cache is the full one's size and reuses its
  // memory instead of adding a second cache to the peak.
  models::GenerateOptions first_token = g;
  first_token.on_token = [](int64_t, int64_t) { return false; };
  std::vector<double> prefill, decode, stream, fraction;
  size_t kv_bytes = 0, bytes_per_token = 0;
  double device_peak_mb = 0.0;
  for (int r = 0; r < o.repeat; ++r) {
    const models::GenerateResult result = models::generate(model, {prompt}, g);
    const auto prefill_start = std::chrono::steady_clock::now();
    models::generate(model, {prompt}, first_token);
    prefill.push_back(static_cast<double>(o.prompt) /
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - prefill_start).count());
    decode.push_back(static_cast<double>(result.decode_tokens) / result.decode_seconds);
    kv_bytes = result.kv_cache_bytes;
    bytes_per_token = static_cast<size_t>(static_cast<double>(weights) + kv_fraction * static_cast<double>(kv_bytes));
    // On a GPU the memory that counts is the device's: the caching allocator's peak over the
    // generations, read before the stream's buffer joins the model's on the device and reset after.
    if (gpu) device_peak_mb = std::max(device_peak_mb, static_cast<double>(cuda::memory_stats().allocated_peak) / 1048576.0);
    const double seconds = gpu ? device_stream_seconds(bytes_per_token) : stream_seconds_apart(bytes_per_token, o.threads);
    if (gpu) cuda::reset_peak_memory_stats();
    stream.push_back(static_cast<double>(bytes_per_token) / seconds / 1e9);
    fraction.push_back(seconds * decode.back());  // (bytes × tokens/s) / (bytes / seconds)
  }
  const double prefill_rate = median(prefill), decode_rate = median(decode);
  const double rss = peak_rss_mb();
  const double held_mb = gpu ? device_peak_mb : rss;  // the memory that holds the model
  const double decode_gbps = static_cast<double>(bytes_per_token) * decode_rate / 1e9;
  const double stream_gbps = median(stream), bandwidth_fraction = median(fraction);
  const double stored_mb = static_cast<double>(weights + kv_bytes) / 1048576.0;

  std::printf("%-10s %-9s %10s %10s %12s %12s %9s %10s %10s\n", "quantize", "dtype", "prefill/s", "decode/s",
              "decode GB/s", "stream GB/s", "fraction", gpu ? "device MB" : "rss MB", "stored MB");
  std::printf("%-10s %-9s %10.1f %10.2f %12.2f %12.2f %9.3f %10.1f %10.1f\n",
              o.quantize.empty() ? "none" : o.quantize.c_str(), o.dtype.c_str(), prefill_rate, decode_rate, decode_gbps,
              stream_gbps, bandwidth_fraction, held_mb, stored_mb);
  std::printf("{\"program\":\"bench_generate\",\"model\":\"%s\",\"architecture\":\"%s\",\"quantize\":\"%s\",\"dtype\":\"%s\","
              "\"threads\":%d,\"prompt\":%lld,\"new_tokens\":%lld,\"prefill_tokens_per_s\":%.2f,\"decode_tokens_per_s\":%.3f,"
              "\"bytes_per_token\":%zu,\"decode_gbps\":%.3f,\"stream_gbps\":%.3f,\"bandwidth_fraction\":%.4f,"
              "\"weights_mb\":%.2f,\"kv_cache_mb\":%.2f,\"peak_rss_mb\":%.1f,\"rss_over_stored\":%.3f,"
              "\"peak_device_mb\":%.1f,\"memory_over_stored\":%.3f,\"load_ms\":%.1f,\"device\":\"%s\",\"kernel\":\"%s\","
              "\"packed_weight_mb\":%.1f}\n",
              o.model.c_str(), models::hf_architecture_name(pretrained.config.architecture),
              o.quantize.empty() ? "none" : o.quantize.c_str(), o.dtype.c_str(), o.threads,
              static_cast<long long>(o.prompt), static_cast<long long>(o.new_tokens), prefill_rate, decode_rate,
              bytes_per_token, decode_gbps, stream_gbps, bandwidth_fraction, static_cast<double>(weights) / 1048576.0,
              static_cast<double>(kv_bytes) / 1048576.0, rss, rss / stored_mb, device_peak_mb, held_mb / stored_mb,
              load_ms, o.device.c_str(),
              gpu ? "cuda" : std::string(cpu_isa_name(cpu_isa())).c_str(),
              static_cast<double>(packed_weight_bytes()) / 1048576.0);
  return 0;
}
