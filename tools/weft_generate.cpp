// weft-generate: loads a Hugging Face model folder (GPT-2 or Llama, config.json +
// model.safetensors + tokenizer.json) and continues a prompt, printing the text as it is made.
//
//   weft-generate --model DIR --prompt TEXT [--max-new-tokens N]
//                 [--greedy | --temperature T --top-k K --top-p P] [--seed S]
//                 [--quantize nf4|nf4-dq|fp4|fp4-dq|int8|fp8|fp8-channel] [--dtype float32|bfloat16]
//                 [--kv-cache float32|bfloat16] [--stop ID ...] [--threads N] [--device cpu|cuda] [--json]
//
// Without sampling flags it decodes greedily. --json prints, instead of the streamed text, one
// JSON line: the prompt's and the completion's token ids, the completion, prefill and decode
// speeds, the time to the first token, the peak resident memory, the quantization (--quantize's
// mode, or the bitsandbytes folder's own: "nf4-dq", "int8", ...), the device and what computed on it
// (the CPU kernel level, or "cuda"), and on a GPU its peak memory. Every
// flag is checked before the model is read, and a prompt that does not fit in the model's
// positions (with --max-new-tokens) is an error, not a silent crop.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "weft.h"

using namespace weft;

namespace {

struct Options {
  std::string model;
  std::optional<std::string> prompt;
  int64_t max_new_tokens = 64;
  models::SamplingOptions sampling;
  bool sampling_flag = false;  // a --temperature / --top-k / --top-p was given
  bool greedy_flag = false;
  uint64_t seed = 0;
  std::string quantize;
  std::string dtype = "float32";
  std::string kv_cache = "float32";
  std::vector<int64_t> stop;
  std::optional<int> threads;
  std::string device = "cpu";
  bool json = false;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "weft-generate: " << message << "\n(weft-generate --help lists the options)\n";
  std::exit(2);
}

void print_help() {
  std::cout << "usage: weft-generate --model DIR --prompt TEXT [options]\n"
               "  --model DIR            a Hugging Face folder: config.json, model.safetensors (or a sharded\n"
               "                         index) and tokenizer.json; GPT2LMHeadModel or LlamaForCausalLM\n"
               "  --prompt TEXT          the text to continue\n"
               "  --max-new-tokens N     tokens to generate at most (default 64)\n"
               "  --greedy               the most likely token each step (the default)\n"
               "  --temperature T        sample: divide the logits by T > 0 (default 1)\n"
               "  --top-k K              sample among the K most likely tokens, 1 <= K <= vocabulary\n"
               "  --top-p P              sample among the likeliest tokens whose probability reaches P, 0 < P <= 1\n"
               "  --seed S               the sampling generator's seed (default 0)\n"
               "  --quantize MODE        nf4, nf4-dq, fp4, fp4-dq, int8, fp8 (E4M3, a scale per tensor) or\n"
               "                         fp8-channel (a scale per output row): quantized on load; a folder\n"
               "                         that transformers saved through bitsandbytes loads as stored, and\n"
               "                         refuses --quantize\n"
               "  --dtype D              float32 (default) or bfloat16 weights and compute\n"
               "  --kv-cache D           float32 (default) or bfloat16 keys and values\n"
               "  --stop ID              a token id that ends the text (repeatable), besides the model's eos\n"
               "  --threads N            CPU threads (default: the CPUs this process may use)\n"
               "  --device D             cpu (default) or cuda: the model, its KV cache and every step on\n"
               "                         the GPU (a build with -DWEFT_CUDA=ON); tokens are chosen on the CPU\n"
               "  --json                 print one JSON line of results instead of the text\n";
}

int64_t parse_int(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  usage_error(flag + " expects an integer, got '" + v + "'");
}

// The library's sampling options read top-k 0 as "off", and a seed is unsigned: on the command
// line those are left out, so a 0 or a negative value is a mistake to name, not a value to wrap.
int64_t parse_at_least(const std::string& flag, const std::string& v, int64_t least) {
  const int64_t x = parse_int(flag, v);
  if (x < least) usage_error(flag + " expects an integer of at least " + std::to_string(least) + ", got " + v);
  return x;
}

double parse_double(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    const double x = std::stod(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  usage_error(flag + " expects a number, got '" + v + "'");
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      print_help();
      std::exit(0);
    }
    if (flag == "--greedy") {
      o.greedy_flag = true;
      continue;
    }
    if (flag == "--json") {
      o.json = true;
      continue;
    }
    if (flag.rfind("--", 0) != 0) usage_error("unexpected argument '" + flag + "' (every option is a --flag)");
    if (i + 1 >= argc) usage_error(flag + " needs a value");
    const std::string v = argv[++i];
    if (flag == "--model") o.model = v;
    else if (flag == "--prompt") o.prompt = v;
    else if (flag == "--max-new-tokens") o.max_new_tokens = parse_int(flag, v);
    else if (flag == "--temperature") o.sampling.temperature = parse_double(flag, v), o.sampling_flag = true;
    else if (flag == "--top-k") o.sampling.top_k = parse_at_least(flag, v, 1), o.sampling_flag = true;
    else if (flag == "--top-p") o.sampling.top_p = parse_double(flag, v), o.sampling_flag = true;
    else if (flag == "--seed") o.seed = static_cast<uint64_t>(parse_at_least(flag, v, 0));
    else if (flag == "--quantize") o.quantize = v;
    else if (flag == "--dtype") o.dtype = v;
    else if (flag == "--kv-cache") o.kv_cache = v;
    else if (flag == "--stop") o.stop.push_back(parse_int(flag, v));
    else if (flag == "--threads") o.threads = static_cast<int>(parse_int(flag, v));
    else if (flag == "--device") o.device = v;
    else usage_error("unknown option '" + flag + "'");
  }
  return o;
}

// Everything that can be checked without reading the model's weights.
void check_options(Options& o) {
  if (o.model.empty()) usage_error("--model is required: a Hugging Face model folder");
  if (!std::filesystem::is_directory(o.model)) usage_error("--model: '" + o.model + "' is not a directory");
  for (const char* file : {"config.json", "tokenizer.json"})
    if (!std::filesystem::is_regular_file(std::filesystem::path(o.model) / file))
      usage_error("--model: '" + o.model + "' has no " + file);
  if (!o.prompt) usage_error("--prompt is required");
  if (o.max_new_tokens < 1) usage_error("--max-new-tokens expects at least 1, got " + std::to_string(o.max_new_tokens));
  if (o.greedy_flag && o.sampling_flag) usage_error("--greedy excludes --temperature, --top-k and --top-p");
  o.sampling.greedy = !o.sampling_flag;
  try {
    o.sampling.check();
  } catch (const Error& e) {
    usage_error(e.what());
  }
  const std::vector<std::string> modes{"nf4", "nf4-dq", "fp4", "fp4-dq", "int8", "fp8", "fp8-channel"};
  if (!o.quantize.empty() && std::find(modes.begin(), modes.end(), o.quantize) == modes.end())
    usage_error("--quantize expects nf4, nf4-dq, fp4, fp4-dq, int8, fp8 or fp8-channel, got '" + o.quantize + "'");
  if (o.dtype != "float32" && o.dtype != "bfloat16") usage_error("--dtype expects float32 or bfloat16, got '" + o.dtype + "'");
  if (o.kv_cache != "float32" && o.kv_cache != "bfloat16")
    usage_error("--kv-cache expects float32 or bfloat16, got '" + o.kv_cache + "'");
  const int max_threads = 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (o.threads && (*o.threads < 1 || *o.threads > max_threads))
    usage_error("--threads expects 1 to " + std::to_string(max_threads) + ", got " + std::to_string(*o.threads));
  if (o.device != "cpu" && o.device != "cuda") usage_error("--device expects cpu or cuda, got '" + o.device + "'");
  if (o.device == "cuda")
    if (const std::string why = cuda::unavailable_reason(); !why.empty()) usage_error("--device cuda: " + why);
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// A JSON string literal of valid UTF-8 text: quotes, backslashes and control characters escaped.
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_ids(const std::vector<int64_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids[i]);
  }
  return out + "]";
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  check_options(o);
  try {
    const auto start = std::chrono::steady_clock::now();
    if (o.threads) set_num_threads(*o.threads);
    models::PretrainedOptions load;
    load.quantize = o.quantize;
    load.dtype = o.dtype == "bfloat16" ? kBFloat16 : kFloat32;
    const models::Tokenizer tokenizer = models::Tokenizer::from_folder(o.model);
    models::PretrainedModel pretrained = models::from_pretrained(o.model, load);
    const bool on_gpu = o.device == "cuda";
    if (on_gpu) pretrained.model->to(Device("cuda"));
    const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    const std::vector<int32_t> encoded = tokenizer.encode(*o.prompt, /*add_special_tokens=*/true);
    const std::vector<int64_t> prompt_ids(encoded.begin(), encoded.end());
    models::GenerateOptions g;
    g.max_new_tokens = o.max_new_tokens;
    g.sampling = o.sampling;
    g.seed = o.seed;
    g.stop_tokens = o.stop;
    g.kv_dtype = o.kv_cache == "bfloat16" ? kBFloat16 : kFloat32;
    models::TextStream stream(tokenizer);
    models::check_generate_request(pretrained.model->lm_shape(), {prompt_ids}, g);
    if (!o.json) {
      std::cout << *o.prompt << std::flush;
      g.on_token = [&](int64_t, int64_t token) {
        std::cout << stream.push(static_cast<int32_t>(token)) << std::flush;
        return true;
      };
    }
    const models::GenerateResult r = models::generate(*pretrained.model, {prompt_ids}, g);
    const std::vector<int32_t> completion_ids(r.tokens[0].begin(), r.tokens[0].end());
    const std::string text = tokenizer.decode(completion_ids, /*skip_special_tokens=*/true);
    if (!o.json) {
      std::cout << stream.finish() << "\n";
      return 0;
    }
    const std::string quantization = !o.quantize.empty()                ? o.quantize
                                     : pretrained.config.quantization ? pretrained.config.quantization->mode
                                                                      : "none";
    const double prefill_rate = static_cast<double>(r.prefill_tokens) / r.prefill_seconds;
    const double decode_rate = r.decode_tokens > 0 ? static_cast<double>(r.decode_tokens) / r.decode_seconds : 0.0;
    std::printf(
        "{\"program\":\"weft-generate\",\"architecture\":\"%s\",\"prompt_ids\":%s,\"completion_ids\":%s,"
        "\"completion\":%s,\"prefill_tokens\":%lld,\"decode_tokens\":%lld,\"prefill_tokens_per_s\":%.2f,"
        "\"decode_tokens_per_s\":%.2f,\"load_ms\":%.1f,\"time_to_first_token_ms\":%.1f,\"peak_rss_mb\":%.1f,"
        "\"kv_cache_mb\":%.2f,\"quantize\":\"%s\",\"dtype\":\"%s\",\"device\":\"%s\",\"kernel\":\"%s\","
        "\"peak_device_mb\":%.1f,\"threads\":%d}\n",
        models::hf_architecture_name(pretrained.config.architecture), json_ids(prompt_ids).c_str(),
        json_ids(r.tokens[0]).c_str(), json_string(text).c_str(), static_cast<long long>(r.prefill_tokens),
        static_cast<long long>(r.decode_tokens), prefill_rate, decode_rate, load_seconds * 1e3,
        (load_seconds + r.prefill_seconds) * 1e3, peak_rss_mb(), static_cast<double>(r.kv_cache_bytes) / 1048576.0,
        quantization.c_str(), o.dtype.c_str(), o.device.c_str(),
        on_gpu ? "cuda" : std::string(cpu_isa_name(cpu_isa())).c_str(),
        on_gpu ? static_cast<double>(cuda::memory_stats().allocated_peak) / 1048576.0 : 0.0, num_threads());
  } catch (const Error& e) {
    std::cerr << "weft-generate: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
