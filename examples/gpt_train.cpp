// gpt_train: a character-level GPT (models/gpt.h, nanoGPT's structure) trained on a UTF-8 text —
// by default the King James Bible as Debian's bible-kjv packages give it (scripts/train-gpt.sh
// extracts it) — then a sample of generated text.
//
// Defaults are nanoGPT's CPU configuration of shakespeare_char: 4 layers, 4 heads, 128 wide,
// context 64, batch 12, no dropout, no biases, AdamW (lr 1e-3, betas (0.9, 0.99), weight decay
// 0.1 on the matrices and embeddings only), gradient clipping at norm 1, the learning rate warmed
// up linearly for 100 steps and then decayed along a cosine to lr/10 at --lr-decay-steps. The
// vocabulary is the text's distinct characters (codepoints, sorted); the last 10 % of the text is
// held out for validation.
//
// Batches follow nanoGPT's get_batch: B random windows of T + 1 characters (input and the input
// shifted by one). Every random draw is a function of the seed and the step (the windows of step
// s, the dropout masks of step s) or fixed (the validation windows), so a run saved at step s and
// resumed equals a straight run bit for bit (examples/gpt_resume_test.sh), and the validation
// losses of two runs are measured on the same windows.
//
// Training goes through the Fabric facade, so --precision picks the precision plugin (every one
// the Fabric offers: 32-true, 64-true, 16-true, bf16-true, bf16-mixed, 16-mixed, which on the cpu
// falls back to bf16-mixed with the reference's warning, transformer-engine for FP8 linears) and
// --strategy the data parallelism under `weft-run -n 2`: --batch-size is the global batch, every
// rank draws the same windows and trains on its share of them, and rank 0 alone prints, logs,
// plots and saves.
//
// QLoRA: --finetune CHECKPOINT --quantize nf4 --lora-rank 8 loads a model this program trained,
// freezes its linear layers as 4-bit NF4 (the bitsandbytes plugin; the tied embedding / LM head
// stays in float), adds LoRA adapters to them and trains only the adapters, reporting the
// validation loss before and after. It runs in one process, under ddp (each rank holds the
// whole 4-bit model) or under fsdp (QLoRA-FSDP: every LoRA layer a unit whose 4-bit base is
// sharded as frozen bytes beside its trained adapters, distributed/fsdp.h).
//
// Output: a progress line, the losses at every evaluation, a CSV log (a row per step), a PNG plot
// of the train and validation losses (gnuplot), a generated sample, and one JSON line.
// Every flag, path and the text itself are checked before the model is built (check_options).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <numbers>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "char_text.h"
#include "command_line.h"
#include "option_checks.h"
#include "weft.h"

using namespace weft;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string data = "kjv.txt";
  int64_t steps = 2000;
  std::optional<int64_t> lr_decay_steps;  // unset: --steps
  int64_t warmup_steps = 100;
  int64_t batch_size = 12;
  // The model's shape; unset takes the default, or the checkpoint's under --resume / --finetune.
  std::optional<int64_t> block_size, n_layer, n_head, n_embd;
  double dropout = 0.0;
  double lr = 1e-3;
  std::optional<double> min_lr;  // unset: lr / 10
  double weight_decay = 0.1;
  double grad_clip = 1.0;
  uint64_t seed = 1337;
  std::optional<int> threads;
  int64_t eval_interval = 250;
  int64_t eval_iters = 20;
  std::string precision = "32-true";
  std::string strategy = "auto";
  int64_t devices = 0;  // 0: what the launcher started on this node, else 1
  std::string device = "cpu";
  std::string checkpoint;
  std::string resume;
  std::string log = "gpt_train.csv";
  std::string plot = "gpt_train.png";
  bool plot_given = false;
  int64_t sample_tokens = 300;
  double temperature = 0.8;
  std::optional<int64_t> top_k;       // default: 20, or the vocabulary where it is smaller
  std::optional<std::string> prompt;  // default: a newline, or the text's first character
  std::string finetune;  // QLoRA: the trained model's checkpoint
  std::string quantize = "nf4";
  int64_t lora_rank = 8;
  double lora_alpha = 16.0;
  std::string finetune_only_flag;  // the first of --quantize / --lora-rank / --lora-alpha given
  bool progress = true;
};

}  // namespace

namespace weft::examples {
const char* const kProgram = "gpt_train";
const char* const kUsage = R"(usage: gpt_train [options]
  --data FILE            UTF-8 text to train on (default kjv.txt; scripts/train-gpt.sh makes it)
  --steps 2000           optimizer steps in total (a resumed run continues up to this)
  --batch-size 12        sequences per step (the global batch under several ranks)
  --block-size 64        context length in characters
  --n-layer 4            transformer blocks
  --n-head 4             attention heads (must divide --n-embd)
  --n-embd 128           model width
  --dropout 0            dropout probability in training
  --lr 0.001             peak AdamW learning rate
  --min-lr X             learning rate at the end of the cosine decay (default lr / 10)
  --warmup-steps 100     steps of linear warm-up
  --lr-decay-steps N     step where the cosine decay reaches --min-lr (default --steps)
  --weight-decay 0.1     AdamW weight decay of the matrices and embeddings
  --grad-clip 1.0        clip the gradients' total norm to this (0: no clipping)
  --seed 1337            seed for initialisation, batches, dropout and sampling
  --threads N            CPU threads, 1 to 4 x the hardware threads (default: all cores)
  --eval-interval 250    evaluate (and save the checkpoint) every N steps, and at the end
  --eval-iters 20        batches per loss estimate (the same windows every time)
  --precision 32-true    32-true, 64-true, 16-true, bf16-true, bf16-mixed, 16-mixed (bf16-mixed on
                         the cpu), transformer-engine (FP8 linears), or the aliases 64, 32, 16, bf16
  --strategy auto        auto, ddp or fsdp (several processes: under weft-run / torchrun, or --devices)
  --devices N            processes on this node (default: what the launcher started, else 1)
  --device cpu           cpu or cuda (one process; needs weft built with CUDA)
  --checkpoint FILE      save model + optimizer at every evaluation (safetensors)
  --resume FILE          continue training from a checkpoint
  --log FILE             CSV log, a row per step (default gpt_train.csv; '' to disable)
  --plot FILE            PNG plot of the losses via gnuplot (default gpt_train.png when gnuplot is
                         installed; '' to disable)
  --sample-tokens 300    characters to generate at the end (0: none)
  --temperature 0.8      sampling temperature (> 0)
  --top-k 20             sample among the k most likely characters (1 to the vocabulary size;
                         by default 20, or the whole vocabulary where it is smaller)
  --prompt TEXT          what the sample continues (default a newline, or the text's first
                         character where it has none)
  --finetune FILE        QLoRA: quantize the model in this checkpoint and train LoRA adapters
  --quantize nf4         the 4-bit format of the frozen layers under --finetune: nf4, nf4-dq,
                         fp4, fp4-dq
  --lora-rank 8          LoRA rank under --finetune
  --lora-alpha 16        LoRA scale (the adapters are multiplied by alpha / rank)
  --no-progress          no progress line
)";

}  // namespace weft::examples

namespace {

using examples::option_error;
using examples::parse_number;
using examples::usage_error;

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << examples::kUsage;
      std::exit(0);
    }
    if (flag == "--no-progress") {
      o.progress = false;
      continue;
    }
    if (flag.empty() || flag[0] != '-')
      usage_error("unexpected argument '" + flag + "': gpt_train takes options only (--help lists them)");
    if (i + 1 >= argc) examples::missing_value_error(flag);
    const std::string value = argv[++i];
    if (flag == "--data") o.data = value;
    else if (flag == "--steps") o.steps = parse_number<int64_t>(flag, value);
    else if (flag == "--lr-decay-steps") o.lr_decay_steps = parse_number<int64_t>(flag, value);
    else if (flag == "--warmup-steps") o.warmup_steps = parse_number<int64_t>(flag, value);
    else if (flag == "--batch-size") o.batch_size = parse_number<int64_t>(flag, value);
    else if (flag == "--block-size") o.block_size = parse_number<int64_t>(flag, value);
    else if (flag == "--n-layer") o.n_layer = parse_number<int64_t>(flag, value);
    else if (flag == "--n-head") o.n_head = parse_number<int64_t>(flag, value);
    else if (flag == "--n-embd") o.n_embd = parse_number<int64_t>(flag, value);
    else if (flag == "--dropout") o.dropout = parse_number<double>(flag, value);
    else if (flag == "--lr") o.lr = parse_number<double>(flag, value);
    else if (flag == "--min-lr") o.min_lr = parse_number<double>(flag, value);
    else if (flag == "--weight-decay") o.weight_decay = parse_number<double>(flag, value);
    else if (flag == "--grad-clip") o.grad_clip = parse_number<double>(flag, value);
    else if (flag == "--seed") o.seed = parse_number<uint64_t>(flag, value);
    else if (flag == "--threads") o.threads = parse_number<int>(flag, value);
    else if (flag == "--eval-interval") o.eval_interval = parse_number<int64_t>(flag, value);
    else if (flag == "--eval-iters") o.eval_iters = parse_number<int64_t>(flag, value);
    else if (flag == "--precision") o.precision = value;
    else if (flag == "--strategy") o.strategy = value;
    else if (flag == "--devices") o.devices = parse_number<int64_t>(flag, value);
    else if (flag == "--device") o.device = value;
    else if (flag == "--checkpoint") o.checkpoint = value;
    else if (flag == "--resume") o.resume = value;
    else if (flag == "--log") o.log = value;
    else if (flag == "--plot") {
      o.plot = value;
      o.plot_given = true;
    }
    else if (flag == "--sample-tokens") o.sample_tokens = parse_number<int64_t>(flag, value);
    else if (flag == "--temperature") o.temperature = parse_number<double>(flag, value);
    else if (flag == "--top-k") o.top_k = parse_number<int64_t>(flag, value);
    else if (flag == "--prompt") o.prompt = value;
    else if (flag == "--finetune") o.finetune = value;
    else if (flag == "--quantize") o.quantize = value;
    else if (flag == "--lora-rank") o.lora_rank = parse_number<int64_t>(flag, value);
    else if (flag == "--lora-alpha") o.lora_alpha = parse_number<double>(flag, value);
    else usage_error("unknown option " + flag);
    if ((flag == "--quantize" || flag == "--lora-rank" || flag == "--lora-alpha") && o.finetune_only_flag.empty())
      o.finetune_only_flag = flag;
  }
  return o;
}

// What a checkpoint of this program says about the model and the run, in its metadata.
struct SavedRun {
  int64_t step = 0;
  std::string vocabulary;  // UTF-8, the characters in id order
  int64_t block_size = 0, n_layer = 0, n_head = 0, n_embd = 0;
};

io::SafetensorsMetadata run_metadata(const SavedRun& run) {
  return {{"step", std::to_string(run.step)},       {"vocabulary", run.vocabulary},
          {"block_size", std::to_string(run.block_size)}, {"n_layer", std::to_string(run.n_layer)},
          {"n_head", std::to_string(run.n_head)},   {"n_embd", std::to_string(run.n_embd)}};
}

SavedRun saved_run(const io::SafetensorsMetadata& meta, const std::string& flag, const std::string& path) {
  auto entry = [&](const char* key) {
    const auto it = meta.find(key);
    if (it == meta.end())
      option_error(flag + ": '" + path + "' has no '" + key + "' entry; expected a checkpoint saved by gpt_train "
                   "--checkpoint");
    return it->second;
  };
  if (meta.count("finetune"))
    option_error(flag + ": '" + path + "' holds a model fine-tuned with --finetune (" + meta.at("finetune") +
                 " layers and LoRA adapters); expected a checkpoint of a plain training run");
  SavedRun run;
  run.step = parse_number<int64_t>("the checkpoint's step", entry("step"));
  run.vocabulary = entry("vocabulary");
  run.block_size = parse_number<int64_t>("the checkpoint's block_size", entry("block_size"));
  run.n_layer = parse_number<int64_t>("the checkpoint's n_layer", entry("n_layer"));
  run.n_head = parse_number<int64_t>("the checkpoint's n_head", entry("n_head"));
  run.n_embd = parse_number<int64_t>("the checkpoint's n_embd", entry("n_embd"));
  return run;
}

// Everything the options decide once checked: the text and the model's shape.
struct Plan {
  examples::CharText text;
  models::GPTConfig config;  // block_size: the position table (the checkpoint's when resuming)
  int64_t context = 0;       // characters per training window, at most config.block_size
  int64_t start_step = 0;    // steps already done (a resumed run)
  std::vector<int64_t> prompt;
  int64_t top_k = 0;  // of the sample at the end
};

bool have_gnuplot() { return std::system("command -v gnuplot > /dev/null 2>&1") == 0; }

void check_positive(const char* flag, int64_t value) {
  if (value < 1) option_error(std::string(flag) + " expects at least 1, got " + std::to_string(value));
}

// Every value and path, and the text, before the model is built. A new flag adds its check here.
Plan check_options(const Options& o) {
  check_positive("--steps", o.steps);
  check_positive("--batch-size", o.batch_size);
  check_positive("--eval-interval", o.eval_interval);
  check_positive("--eval-iters", o.eval_iters);
  for (const auto& [flag, value] : {std::pair{"--block-size", o.block_size}, {"--n-layer", o.n_layer},
                                    {"--n-head", o.n_head}, {"--n-embd", o.n_embd}})
    if (value) check_positive(flag, *value);
  if (o.lr_decay_steps) check_positive("--lr-decay-steps", *o.lr_decay_steps);
  if (o.warmup_steps < 0) option_error("--warmup-steps expects 0 or more, got " + std::to_string(o.warmup_steps));
  if (!(o.lr > 0)) option_error("--lr expects a positive number, got " + std::to_string(o.lr));
  if (o.min_lr && !(*o.min_lr >= 0 && *o.min_lr <= o.lr))
    option_error("--min-lr expects 0 to --lr (" + std::to_string(o.lr) + "), got " + std::to_string(*o.min_lr));
  if (!(o.weight_decay >= 0)) option_error("--weight-decay expects 0 or more, got " + std::to_string(o.weight_decay));
  if (!(o.grad_clip >= 0)) option_error("--grad-clip expects 0 (off) or more, got " + std::to_string(o.grad_clip));
  if (!(o.dropout >= 0 && o.dropout < 1))
    option_error("--dropout expects 0 <= p < 1, got " + std::to_string(o.dropout));
  if (o.sample_tokens < 0) option_error("--sample-tokens expects 0 or more, got " + std::to_string(o.sample_tokens));
  if (!(o.temperature > 0))
    option_error("--temperature expects a positive number, got " + std::to_string(o.temperature) +
                 " (for the most likely character every time, use --top-k 1)");
  const int max_threads = 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (o.threads && (*o.threads < 1 || *o.threads > max_threads))
    option_error("--threads expects 1 to " + std::to_string(max_threads) + " (4 x the hardware threads), got " +
                 std::to_string(*o.threads));
  if (o.strategy != "auto" && o.strategy != "ddp" && o.strategy != "fsdp")
    option_error("--strategy expects auto, ddp or fsdp, got '" + o.strategy + "'");
  if (o.devices < 0) option_error("--devices expects 1 or more, got " + std::to_string(o.devices));
  if (o.device != "cpu" && o.device != "cuda") option_error("--device expects cpu or cuda, got '" + o.device + "'");
  try {
    precision::CaptureWarnings quiet;  // Fabric parses it again and warns then
    precision::parse_precision(o.precision);
  } catch (const Error& e) {
    option_error(std::string("--precision: ") + e.what());
  }
  if (o.device == "cuda") {
    if (o.strategy != "auto" || o.devices > 1 || distributed::launched_by_launcher())
      option_error("--device cuda trains in one process; expected no --strategy, --devices or launcher");
    if (const std::string why = cuda::unavailable_reason(); !why.empty()) option_error("--device cuda: " + why);
  }
  if (o.finetune.empty() && !o.finetune_only_flag.empty())
    option_error(o.finetune_only_flag + " sets up QLoRA fine-tuning; expected it with --finetune CHECKPOINT");
  if (!o.finetune.empty()) {
    if (!o.resume.empty()) option_error("--finetune starts new adapters from a trained model; expected no --resume");
    if (o.quantize != "nf4" && o.quantize != "nf4-dq" && o.quantize != "fp4" && o.quantize != "fp4-dq")
      option_error("--quantize expects nf4, nf4-dq, fp4 or fp4-dq, got '" + o.quantize + "'");
    check_positive("--lora-rank", o.lora_rank);
    if (!(o.lora_alpha > 0))
      option_error("--lora-alpha expects a positive number, got " + std::to_string(o.lora_alpha));
    if (o.precision != "32-true")
      option_error("--finetune computes in the 4-bit plugin's bfloat16; expected no --precision, got '" + o.precision +
                   "'");
    if (o.device != "cpu") option_error("--finetune runs on the cpu; expected no --device");
  }

  // Paths: the text, the checkpoint to read, the files to write.
  Plan plan;
  if (const std::string why = examples::unreadable_reason(o.data); !why.empty())
    option_error("--data: " + why + "; expected a UTF-8 text file\n"
                 "(scripts/train-gpt.sh installs bible-kjv and writes the King James Bible to kjv.txt)");
  try {
    plan.text = examples::read_char_text(o.data, "--data '" + o.data + "'");
  } catch (const Error& e) {
    option_error(e.what());
  }
  const int64_t n = static_cast<int64_t>(plan.text.ids.size());
  if (n == 0) option_error("--data: '" + o.data + "' is empty; expected a UTF-8 text");

  const std::string& source = o.finetune.empty() ? o.resume : o.finetune;
  const std::string source_flag = o.finetune.empty() ? "--resume" : "--finetune";
  std::optional<SavedRun> saved;
  if (!source.empty()) {
    if (const std::string why = examples::unreadable_reason(source); !why.empty())
      option_error(source_flag + ": " + why);
    try {
      saved = saved_run(io::read_checkpoint(source).metadata, source_flag, source);
    } catch (const Error& e) {
      option_error(source_flag + ": " + e.what());
    }
    if (saved->vocabulary != examples::vocabulary_text(plan.text))
      option_error(source_flag + ": '" + source + "' was trained on a text with another vocabulary (" +
                   std::to_string(examples::decode_utf8(saved->vocabulary, source_flag).size()) +
                   " characters) than '" + o.data + "' (" + std::to_string(plan.text.vocabulary.size()) +
                   "); expected the text it was trained on");
    auto same = [&](const char* flag, const std::optional<int64_t>& given, int64_t kept) {
      if (given && *given != kept)
        option_error(source_flag + ": '" + source + "' holds a model with " + flag + " " + std::to_string(kept) +
                     ", not " + std::to_string(*given) + "; expected the same shape (or no " + flag + ")");
    };
    same("--n-layer", o.n_layer, saved->n_layer);
    same("--n-head", o.n_head, saved->n_head);
    same("--n-embd", o.n_embd, saved->n_embd);
    if (o.block_size && *o.block_size > saved->block_size)
      option_error("--block-size " + std::to_string(*o.block_size) + " is longer than the " +
                   std::to_string(saved->block_size) + " positions of the model in '" + source +
                   "'; expected at most " + std::to_string(saved->block_size));
    if (o.finetune.empty() && saved->step >= o.steps)
      option_error("--resume: '" + source + "' was saved after step " + std::to_string(saved->step) +
                   " and --steps is " + std::to_string(o.steps) + ", so there is nothing left to train; expected "
                   "--steps above " + std::to_string(saved->step));
    if (o.finetune.empty()) plan.start_step = saved->step;
  }
  plan.config.vocab_size = static_cast<int64_t>(plan.text.vocabulary.size());
  plan.config.n_layer = saved ? saved->n_layer : o.n_layer.value_or(4);
  plan.config.n_head = saved ? saved->n_head : o.n_head.value_or(4);
  plan.config.n_embd = saved ? saved->n_embd : o.n_embd.value_or(128);
  plan.context = o.block_size.value_or(saved ? saved->block_size : 64);
  plan.config.block_size = saved ? saved->block_size : plan.context;
  plan.config.dropout = o.dropout;
  plan.config.bias = false;
  if (plan.config.n_embd % plan.config.n_head != 0)
    option_error("--n-head " + std::to_string(plan.config.n_head) + " does not divide --n-embd " +
                 std::to_string(plan.config.n_embd) + "; expected a head count that divides the width");

  // Both splits need one window of context + 1 characters: the validation split is the last 10 %.
  const int64_t needed = 10 * (plan.context + 1);
  if (n < needed)
    option_error("--data: '" + o.data + "' has " + std::to_string(n) + " characters; expected at least " +
                 std::to_string(needed) + " (a window of --block-size + 1 = " + std::to_string(plan.context + 1) +
                 " characters in the held-out last 10 %)");
  const auto V = plan.config.vocab_size;
  plan.top_k = o.top_k.value_or(std::min<int64_t>(20, V));
  if (plan.top_k < 1 || plan.top_k > V)
    option_error("--top-k expects 1 to the vocabulary size " + std::to_string(V) + ", got " +
                 std::to_string(plan.top_k));
  // A text of one line has no newline to start the sample from: it starts from the text's first
  // character then.
  const std::string prompt = o.prompt.value_or(examples::has_character(plan.text, U'\n')
                                                   ? "\n"
                                                   : examples::encode_utf8({plan.text.vocabulary[plan.text.ids[0]]}));
  std::string missing;
  plan.prompt = examples::encode(plan.text, prompt, &missing);
  if (!missing.empty() || plan.prompt.empty())
    option_error(prompt.empty() ? "--prompt expects at least one character"
                                : "--prompt: the character " + missing + " is not in the text's vocabulary");

  if (!o.checkpoint.empty())
    if (const std::string why = examples::unwritable_reason(o.checkpoint); !why.empty())
      option_error("--checkpoint: " + why);
  if (!o.log.empty())
    if (const std::string why = examples::unappendable_reason(o.log); !why.empty()) option_error("--log: " + why);
  if (o.plot_given && !o.plot.empty()) {
    if (o.log.empty()) option_error("--plot draws the CSV log, which --log '' turned off");
    if (!have_gnuplot()) option_error("--plot needs gnuplot (apt-get install gnuplot-nox), or --plot '' for no plot");
    if (const std::string why = examples::unwritable_reason(o.plot); !why.empty()) option_error("--plot: " + why);
  }
  return plan;
}

// nanoGPT's schedule: linear warm-up, then a cosine from lr down to min_lr at decay_steps, then min_lr.
double learning_rate(const Options& o, int64_t step) {
  const double min_lr = o.min_lr.value_or(o.lr / 10);
  const int64_t decay_steps = o.lr_decay_steps.value_or(o.steps);
  if (step < o.warmup_steps) return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps + 1);
  if (step > decay_steps) return min_lr;
  const double progress = decay_steps == o.warmup_steps
                              ? 1.0
                              : static_cast<double>(step - o.warmup_steps) /
                                    static_cast<double>(decay_steps - o.warmup_steps);
  return min_lr + 0.5 * (1 + std::cos(std::numbers::pi * progress)) * (o.lr - min_lr);
}

// A batch of windows: rows [first, first + count) of the `batch` windows whose start offsets
// `gen` draws from `ids` (as nanoGPT's get_batch), as int64 inputs and targets (count, T).
struct Batch {
  Tensor x, y;
};

Batch draw_batch(const std::vector<int32_t>& ids, int64_t begin, int64_t end, int64_t batch, int64_t context,
                 int64_t first, int64_t count, Generator& gen) {
  const Tensor starts = randint(0, end - begin - context, {batch}, TensorOptions(kInt64), &gen);
  const int64_t* s = starts.data<int64_t>();
  std::vector<int64_t> x, y;
  x.reserve(static_cast<size_t>(count * context));
  y.reserve(static_cast<size_t>(count * context));
  for (int64_t r = first; r < first + count; ++r)
    for (int64_t t = 0; t < context; ++t) {
      x.push_back(ids[static_cast<size_t>(begin + s[r] + t)]);
      y.push_back(ids[static_cast<size_t>(begin + s[r] + t + 1)]);
    }
  return {from_vector(x, {count, context}, TensorOptions(kInt64)),
          from_vector(y, {count, context}, TensorOptions(kInt64))};
}

// Seeds of the random streams, apart for every (seed, purpose, step).
uint64_t stream_seed(uint64_t seed, uint64_t purpose, int64_t step) {
  return (seed * 0x9E3779B97F4A7C15ull) ^ (purpose << 56) ^ static_cast<uint64_t>(step);
}
constexpr uint64_t kTrainStream = 1, kValStream = 2, kDropoutStream = 3, kSampleStream = 4;

Tensor lm_loss(const fabric::FabricModule& model, const Batch& batch) {
  const Tensor logits = model(batch.x);  // (B, T, V)
  return cross_entropy(logits.reshape({-1, logits.size(-1)}), batch.y.reshape({-1}));
}

// Where a run's figures go: the CSV log, the progress line and the printed evaluations.
struct Reporter {
  std::ofstream log;
  bool progress = false;
  bool speak = false;  // rank 0
};

// What a run of the loop measured.
struct RunStats {
  int64_t steps_run = 0;
  double train_loss = NAN, val_loss = NAN;
  double ms_per_step = NAN;  // median of this run's steps
  double tokens_per_s = NAN;
  double train_seconds = 0;
};

class Trainer {
 public:
  Trainer(fabric::Fabric& fabric, const fabric::FabricModule& model, const fabric::FabricOptimizer& optimizer,
          const Options& o, const Plan& plan)
      : fabric_(fabric), model_(model), optimizer_(optimizer), o_(o), plan_(plan) {
    const int64_t n = static_cast<int64_t>(plan.text.ids.size());
    val_begin_ = n - n / 10;
    world_ = fabric.world_size();
    local_batch_ = o.batch_size / world_;
    first_row_ = fabric.global_rank() * local_batch_;
  }

  // The mean loss over --eval-iters validation batches: the same windows at every call, each rank
  // taking its share of every batch as in training.
  double val_loss() {
    NoGradGuard no_grad;
    model_->eval();
    Generator gen(stream_seed(o_.seed, kValStream, 0));
    const int64_t n = static_cast<int64_t>(plan_.text.ids.size());
    double sum = 0;
    for (int64_t i = 0; i < o_.eval_iters; ++i) {
      const Batch b = draw_batch(plan_.text.ids, val_begin_, n, o_.batch_size, plan_.context, first_row_,
                                 local_batch_, gen);
      sum += lm_loss(model_, {fabric_.to_device(b.x), fabric_.to_device(b.y)}).item();
    }
    model_->train();
    return mean_over_ranks(sum / static_cast<double>(o_.eval_iters));
  }

  // Steps from `first` (steps already done) up to --steps, evaluating, logging and saving.
  RunStats train(int64_t first, Reporter& report, const io::SafetensorsMetadata& metadata) {
    RunStats stats;
    std::vector<double> step_ms;
    double interval_loss = 0;
    int64_t interval_steps = 0;
    const auto run_start = Clock::now();
    for (int64_t step = first; step < o_.steps; ++step) {
      const auto t0 = Clock::now();
      const double lr = learning_rate(o_, step);
      for (size_t g = 0; g < optimizer_->num_param_groups(); ++g) optimizer_->set_lr(g, lr);
      Generator gen(stream_seed(o_.seed, kTrainStream, step));
      const Batch b = draw_batch(plan_.text.ids, 0, val_begin_, o_.batch_size, plan_.context, first_row_,
                                 local_batch_, gen);
      manual_seed(stream_seed(o_.seed, kDropoutStream, step) + static_cast<uint64_t>(fabric_.global_rank()));
      const Tensor loss = lm_loss(model_, {fabric_.to_device(b.x), fabric_.to_device(b.y)});
      optimizer_.zero_grad();
      fabric_.backward(loss, &model_);
      if (o_.grad_clip > 0) fabric_.clip_gradients(model_, optimizer_, std::nullopt, o_.grad_clip);
      optimizer_.step();
      const double train_loss = mean_over_ranks(loss.item());
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      step_ms.push_back(ms);
      stats.train_seconds += ms / 1000;
      interval_loss += train_loss;
      ++interval_steps;
      const int64_t done = step + 1;
      const bool evaluate = done % o_.eval_interval == 0 || done == o_.steps;
      std::optional<double> val;
      if (evaluate) {
        val = val_loss();
        stats.val_loss = *val;
        stats.train_loss = interval_loss / static_cast<double>(interval_steps);
        if (report.progress) std::fprintf(stderr, "\n");
        if (report.speak)
          std::printf("step %lld: train loss %.4f, val loss %.4f, lr %.3g, %.1f ms/step\n",
                      static_cast<long long>(done), stats.train_loss, *val, lr, median(step_ms));
        std::fflush(stdout);
        interval_loss = 0;
        interval_steps = 0;
        if (!o_.checkpoint.empty()) {
          io::SafetensorsMetadata meta = metadata;
          meta["step"] = std::to_string(done);
          fabric_.save(o_.checkpoint, model_, &optimizer_, meta);
        }
      }
      if (report.log.is_open()) {
        report.log << done << ',' << train_loss << ',';
        if (val) report.log << *val;
        report.log << ',' << lr << ',' << ms << '\n';
      }
      if (report.progress && (done % 10 == 0 || done == o_.steps)) {
        const double seconds = std::chrono::duration<double>(Clock::now() - run_start).count();
        progress_line(done, train_loss, static_cast<double>((done - first) * o_.batch_size * plan_.context) / seconds);
      }
    }
    stats.steps_run = o_.steps - first;
    stats.ms_per_step = median(step_ms);
    stats.tokens_per_s = static_cast<double>(stats.steps_run * o_.batch_size * plan_.context) / stats.train_seconds;
    return stats;
  }

  // --sample-tokens characters continuing --prompt: temperature, then the top k, then a draw from
  // the softmax (transformers' order), each from a generator seeded by --seed. Every rank samples
  // the same (an fsdp forward needs them all).
  std::string sample() {
    NoGradGuard no_grad;
    model_->eval();
    Generator gen(stream_seed(o_.seed, kSampleStream, 0));
    std::vector<int64_t> ids = plan_.prompt;
    std::vector<char32_t> out;
    for (int64_t i = 0; i < o_.sample_tokens; ++i) {
      const int64_t t = std::min<int64_t>(static_cast<int64_t>(ids.size()), plan_.config.block_size);
      const std::vector<int64_t> window(ids.end() - t, ids.end());
      const Tensor idx = fabric_.to_device(from_vector(window, {1, t}, TensorOptions(kInt64)));
      const Tensor logits = model_(idx).select(1, t - 1).to(kFloat32) / o_.temperature;  // (1, V)
      const Tensor kth = topk(logits, plan_.top_k).values.narrow(1, plan_.top_k - 1, 1);  // (1, 1)
      const Tensor probs = softmax(masked_fill(logits, lt(logits, kth), -INFINITY), -1);
      const int64_t next = multinomial(probs, 1, false, &gen).to(kCPU).item<int64_t>();
      ids.push_back(next);
      out.push_back(plan_.text.vocabulary[static_cast<size_t>(next)]);
    }
    model_->train();
    return examples::encode_utf8(out);
  }

 private:
  double mean_over_ranks(double value) const {
    return world_ == 1 ? value : fabric_.all_reduce(scalar_tensor(value, TensorOptions(kFloat64))).item();
  }
  static double median(std::vector<double> values) {
    if (values.empty()) return NAN;
    std::nth_element(values.begin(), values.begin() + static_cast<long>(values.size() / 2), values.end());
    return values[values.size() / 2];
  }
  void progress_line(int64_t done, double loss, double tokens_per_s) const {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / o_.steps);
    std::fprintf(stderr, "\rstep %lld/%lld [%s%s] loss %.4f %.0f tokens/s ", static_cast<long long>(done),
                 static_cast<long long>(o_.steps), std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(kWidth - filled), '.').c_str(), loss, tokens_per_s);
  }

  fabric::Fabric& fabric_;
  const fabric::FabricModule& model_;
  const fabric::FabricOptimizer& optimizer_;
  const Options& o_;
  const Plan& plan_;
  int64_t val_begin_ = 0;
  int world_ = 1;
  int64_t local_batch_ = 0, first_row_ = 0;
};

// The train loss per step and the validation loss at its evaluations (gnuplot joins those points
// over the empty cells between them), steps on whole-number ticks, the legend beside the plot.
void render_plot(const std::string& csv, const std::string& png, int64_t steps) {
  if (png.empty() || csv.empty()) return;
  if (!have_gnuplot()) {
    std::cout << "no plot: gnuplot is not installed (apt-get install gnuplot-nox)\n";
    return;
  }
  int64_t tick = 1;  // 1, 2, 5, 10, 20, 50, ... so that about 10 ticks or fewer span the run
  for (int64_t m = 1; steps / tick > 10; m *= 10)
    for (int64_t f : {1, 2, 5})
      if (steps / tick > 10) tick = f * m;
  const std::string script = png + ".gp";
  std::ofstream(script) << "set terminal pngcairo size 900,500\nset output '" << png << "'\n"
                        << "set datafile separator ','\n"
                        << "set title 'gpt_train: character-level cross-entropy' noenhanced\n"
                        << "set xlabel 'step'\nset ylabel 'loss'\nset xtics " << tick << " out\n"
                        << "set format x '%.0f'\nset key outside right top box\nset grid\n"
                        << "plot '" << csv << "' using 1:2 skip 1 with lines lc rgb '#9ecae1' title 'train',\\\n"
                        << "     '" << csv << "' using 1:3 skip 1 with linespoints pt 7 lc rgb '#d62728' lw 2 "
                        << "title 'validation'\n";
  if (std::system(("gnuplot '" + script + "' 2> /dev/null").c_str()) == 0) std::cout << "plot: " << png << "\n";
  else std::cerr << "gpt_train: gnuplot could not draw " << png << "\n";
  std::filesystem::remove(script);
}

// The attention path of the model's scaled_dot_product_attention in the precision's compute dtype
// (tensor/attention.h): the device's fused kernel ("fused avx512", "fused amx" for bfloat16 on
// AMX, ...), or "unfused", the composition of ops, in float64 or where the device has no kernel.
std::string attention_kernel(const fabric::Fabric& fabric) {
  const DType dtype = precision::precision_traits(fabric.precision().mode()).compute_dtype;
  const std::string name = attention_kernel_name(fabric.device(), dtype);
  return name == "unfused" ? name : "fused " + name;
}

// The GEMM kernel the matrix products of this precision take, by their compute dtype.
std::string gemm_kernel(const fabric::Fabric& fabric) {
  if (fabric.device().is_cuda()) return "cublas";
  return cpu_gemm_kernel(precision::precision_traits(fabric.precision().mode()).compute_dtype);
}

std::string device_name(Device device) {
  std::ostringstream os;
  os << device;
  return os.str();
}

fabric::FabricOptions fabric_options(const Options& o) {
  fabric::FabricOptions options;
  options.accelerator = o.device;
  options.precision = o.precision;
  options.strategy = o.strategy;
  const bool launched = distributed::launched_by_launcher();
  const distributed::DistEnv env = launched ? distributed::read_dist_env() : distributed::DistEnv{};
  options.devices = o.devices > 0 ? o.devices : env.local_world_size;
  options.num_nodes = env.world_size / env.local_world_size;
  options.auto_wrap_policy = distributed::module_type_auto_wrap_policy({"Linear", "LayerNorm"});  // make_adamw
  return options;
}

// nanoGPT's AdamW (betas (0.9, 0.99) as its shakespeare_char): weight decay on the parameters
// with two or more dimensions (matrices, embeddings), none on the LayerNorms; only what requires
// grad (under --finetune, the adapters). Under fsdp the optimizer trains one flat shard per unit
// (use_orig_params is false), so the grouping is by unit: fabric_options makes every Linear and
// every LayerNorm a unit of its own and leaves the embeddings (the tied head's weight among them)
// to the root, so a unit is all matrices or all norms (the model has no biases).
optim::AdamW make_adamw(const fabric::FabricModule& model, const Options& o) {
  const optim::AdamWOptions options{.lr = o.lr, .betas = {0.9, 0.99}, .weight_decay = o.weight_decay};
  const auto* fsdp = dynamic_cast<const distributed::FullyShardedDataParallelImpl*>(model.wrapped().get());
  if (fsdp == nullptr) return models::make_gpt_adamw(*model.module(), options);
  std::map<std::string, std::shared_ptr<nn::Module>> by_name;
  for (const auto& [name, m] : model.module()->named_modules()) by_name[name] = m;
  std::vector<Tensor> decay, no_decay;
  const auto units = fsdp->units();
  for (size_t u = 0; u < units.size(); ++u) {
    const Tensor shard = fsdp->shard(u);
    if (!shard.requires_grad()) continue;
    const bool norm = units[u].name != "" && by_name.at(units[u].name)->type_name() == "LayerNorm";
    (norm ? no_decay : decay).push_back(shard);
  }
  optim::AdamW adamw(decay, options);
  if (!no_decay.empty()) {
    optim::AdamWOptions plain = options;
    plain.weight_decay = 0;
    adamw.add_param_group(no_decay, plain);
  }
  return adamw;
}

Reporter open_reporter(const fabric::Fabric& fabric, const Options& o, bool append) {
  Reporter report;
  report.speak = fabric.is_global_zero();
  report.progress = o.progress && report.speak && isatty(STDERR_FILENO);
  if (!o.log.empty() && report.speak) {
    append = append && std::filesystem::exists(o.log);
    report.log.open(o.log, append ? std::ios::app : std::ios::trunc);
    WEFT_CHECK(report.log.is_open(), "[gpt_train] cannot open the log '", o.log, "' for writing");
    report.log.precision(7);
    if (!append) report.log << "step,train_loss,val_loss,lr,ms\n";
  }
  return report;
}

void print_sample(const fabric::Fabric& fabric, const std::string& text) {
  fabric.print("---- sample ----\n" + text + "\n----------------");
}

// QLoRA: the trained model's linears frozen as 4-bit, LoRA adapters on them trained.
int finetune(const Options& o, const Plan& plan) {
  fabric::FabricOptions options = fabric_options(o);
  options.precision.reset();
  // Under fsdp every LoRA layer is a unit (its 4-bit base, its adapters), every LayerNorm one too.
  options.auto_wrap_policy = distributed::module_type_auto_wrap_policy({"LoraLinear", "LayerNorm"});
  // The LM head is the token embedding (tied, not a Linear): it stays in float, without an adapter.
  auto plugin = std::make_shared<precision::BitsandbytesPrecision>(o.quantize);
  options.plugin = plugin;
  fabric::Fabric fabric(options);
  fabric.launch();
  if (o.batch_size % fabric.world_size() != 0)
    option_error("--batch-size (the global batch) must divide by the " + std::to_string(fabric.world_size()) +
                 " ranks");
  fabric::Fabric::seed_everything(o.seed);
  models::GPT net(plan.config);
  io::apply_checkpoint(io::read_checkpoint(o.finetune), *net, nullptr);  // the model alone; the tie restored
  plugin->convert_module(*net);
  const std::vector<std::string> adapted =
      precision::quant::apply_lora(*net, {o.lora_rank, o.lora_alpha, 0.0, kFloat32});
  int64_t adapter_values = 0;  // counted before fsdp moves the parameters into its shards
  for (const Tensor& p : net->parameters())
    if (p.requires_grad()) adapter_values += p.numel();
  const fabric::FabricModule model = fabric.setup_module(net);
  const fabric::FabricOptimizer optimizer = fabric.setup_optimizer(make_adamw(model, o));
  fabric.print("QLoRA: " + std::to_string(adapted.size()) + " linears frozen as " + o.quantize + ", rank-" +
               std::to_string(o.lora_rank) + " adapters (" + std::to_string(adapter_values) + " trainable values)");

  Trainer trainer(fabric, model, optimizer, o, plan);
  const double before = trainer.val_loss();
  fabric.print("val loss of the " + o.quantize + " model before fine-tuning: " + std::to_string(before));
  Reporter report = open_reporter(fabric, o, false);
  io::SafetensorsMetadata metadata = run_metadata({0, examples::vocabulary_text(plan.text), plan.config.block_size,
                                                    plan.config.n_layer, plan.config.n_head, plan.config.n_embd});
  metadata["finetune"] = o.quantize;
  const RunStats stats = trainer.train(0, report, metadata);
  if (report.log.is_open()) {
    report.log.close();
    render_plot(o.log, o.plot, o.steps);
  }
  if (o.sample_tokens > 0) print_sample(fabric, trainer.sample());
  if (fabric.is_global_zero())
    std::printf("{\"program\": \"weft gpt_train\", \"mode\": \"qlora\", \"quantize\": \"%s\", \"lora_rank\": %lld, "
                "\"lora_alpha\": %g, \"trainable\": %lld, \"threads\": %d, \"strategy\": \"%s\", \"ranks\": %d, "
                "\"steps\": %lld, \"val_loss_before\": %.4f, \"val_loss\": %.4f, \"ms_per_step\": %.2f, "
                "\"tokens_per_s\": %.0f}\n",
                o.quantize.c_str(), static_cast<long long>(o.lora_rank), o.lora_alpha,
                static_cast<long long>(adapter_values), num_threads(), fabric.strategy().name().c_str(),
                fabric.world_size(), static_cast<long long>(o.steps), before, stats.val_loss, stats.ms_per_step,
                stats.tokens_per_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  const Plan plan = check_options(o);
  if (o.threads) set_num_threads(*o.threads);
  if (!o.finetune.empty()) return finetune(o, plan);

  fabric::Fabric fabric(fabric_options(o));
  fabric.launch();
  const int world = fabric.world_size();
  if (o.batch_size % world != 0)
    option_error("--batch-size (the global batch) must divide by the " + std::to_string(world) + " ranks");
  fabric.print("precision: " + fabric.precision().precision() + ", strategy: " + fabric.strategy().name() +
               ", ranks: " + std::to_string(world) + ", device: " + device_name(fabric.device()));
  fabric.print("text: " + std::to_string(plan.text.ids.size()) + " characters, vocabulary " +
               std::to_string(plan.config.vocab_size));
  fabric::Fabric::seed_everything(o.seed);
  models::GPT net = [&] {
    precision::Context init = fabric.init_module();
    return models::GPT(plan.config);
  }();
  const fabric::FabricModule model = fabric.setup_module(net);
  const fabric::FabricOptimizer optimizer = fabric.setup_optimizer(make_adamw(model, o));
  if (!o.resume.empty()) {
    fabric.load(o.resume, model, &optimizer);
    fabric.print("resumed from " + o.resume + " after step " + std::to_string(plan.start_step));
  }
  int64_t parameters = 0;
  for (const Tensor& p : net->parameters()) parameters += p.numel();
  fabric.print("model: " + std::to_string(parameters) + " parameters");

  const SavedRun run{0, examples::vocabulary_text(plan.text), plan.config.block_size, plan.config.n_layer,
                     plan.config.n_head, plan.config.n_embd};
  Trainer trainer(fabric, model, optimizer, o, plan);
  Reporter report = open_reporter(fabric, o, !o.resume.empty());
  const auto start = Clock::now();
  const RunStats stats = trainer.train(plan.start_step, report, run_metadata(run));
  if (report.log.is_open()) {
    report.log.close();
    render_plot(o.log, o.plot, o.steps);
  }
  if (o.sample_tokens > 0) print_sample(fabric, trainer.sample());
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (fabric.is_global_zero())
    std::printf("{\"program\": \"weft gpt_train\", \"threads\": %d, \"kernel\": \"%s\", \"attention\": \"%s\", "
                "\"cpu_isa\": \"%s\", \"device\": \"%s\", \"precision\": \"%s\", \"strategy\": \"%s\", \"ranks\": %d, "
                "\"parameters\": %lld, \"vocab_size\": %lld, \"batch_size\": %lld, \"block_size\": %lld, "
                "\"steps\": %lld, \"train_loss\": %.4f, \"val_loss\": %.4f, \"ms_per_step\": %.2f, "
                "\"tokens_per_s\": %.0f, \"seconds\": %.1f}\n",
                num_threads(), gemm_kernel(fabric).c_str(), attention_kernel(fabric).c_str(),
                std::string(cpu_isa_name(cpu_isa())).c_str(), device_name(fabric.device()).c_str(),
                fabric.precision().precision().c_str(), fabric.strategy().name().c_str(), world,
                static_cast<long long>(parameters), static_cast<long long>(plan.config.vocab_size),
                static_cast<long long>(o.batch_size), static_cast<long long>(plan.context),
                static_cast<long long>(o.steps), stats.train_loss, stats.val_loss, stats.ms_per_step,
                stats.tokens_per_s, seconds);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "gpt_train: " << e.what() << "\n";
  return 1;
}
