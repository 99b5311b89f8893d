// Checkpoints of many tensors: saving, loading and state dicts must grow linearly with the number
// of tensors (a state dict of n names used to be built by n scans of a list: 19 s to load 100,000
// tensors, half an hour for a million).
//
// For each count n of small float32 tensors (4 elements each), the median of several calls of:
//   save          io::save_safetensors of n tensors
//   load          io::load_safetensors of that file
//   checkpoint    io::read_checkpoint of that file (load, then split model and optimizer parts)
//   state_dict    Module::state_dict of a model holding n parameters (Linear(1, 1) layers)
//   load_state    Module::load_state_dict of that state dict into the model
// The peer is the same run at a tenth of the tensors: each column's ratio n / (n / 10) is 10 when
// the cost is linear and 100 when it is quadratic.
//
// Usage: bench_checkpoint_load [--tensors N] (default 100000). Output: a table, then one line of
// JSON starting with {"bench":"checkpoint_load".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "median_timer.h"
#include "weft.h"

using namespace weft;

namespace {

struct Times {
  double save = 0, load = 0, checkpoint = 0, state_dict = 0, load_state = 0;
};

double median_seconds(const std::function<void()>& fn) {
  bench::MedianTimer timer(fn);
  while (!timer.done(0.5)) timer.call();
  return timer.median();
}

// A model of `n` parameters: Linear(1, 1) layers (weight and bias) in groups of 500, so that no
// container holds more than a few hundred children.
nn::ModuleList model_of(int64_t n) {
  nn::ModuleList model;
  for (int64_t layers = n / 2; layers > 0; layers -= 500) {
    nn::Sequential group;
    for (int64_t i = 0; i < std::min<int64_t>(layers, 500); ++i) group->push_back(nn::Linear(1, 1));
    model->push_back(group);
  }
  return model;
}

Times measure(int64_t n, const std::filesystem::path& path) {
  nn::TensorDict tensors;
  const Tensor values = zeros({n, 4});
  for (int64_t i = 0; i < n; ++i) tensors.insert("layers." + std::to_string(i) + ".weight", values[i]);
  Times t;
  t.save = median_seconds([&] { io::save_safetensors(path, tensors); });
  t.load = median_seconds([&] { io::load_safetensors(path); });
  t.checkpoint = median_seconds([&] { io::read_checkpoint(path); });
  nn::ModuleList model = model_of(n);
  const nn::TensorDict state = model->state_dict();
  t.state_dict = median_seconds([&] { model->state_dict(); });
  t.load_state = median_seconds([&] { model->load_state_dict(state); });
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 100'000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--tensors") == 0 && i + 1 < argc) {
      n = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_checkpoint_load [--tensors N]\n");
      return 2;
    }
  }
  if (n < 20) {
    std::fprintf(stderr, "bench_checkpoint_load: --tensors expects at least 20, got %lld\n", static_cast<long long>(n));
    return 2;
  }
  const auto path = std::filesystem::temp_directory_path() /
                    ("weft_bench_checkpoint_" + std::to_string(::getpid()) + ".safetensors");
  const Times small = measure(n / 10, path), large = measure(n, path);
  std::filesystem::remove(path);

  const auto row = [](const char* what, double a, double b) {
    std::printf("%-12s %12.4f %12.4f %8.1f\n", what, a, b, b / a);
  };
  std::printf("%-12s %12s %12s %8s\n", "op", (std::to_string(n / 10) + " (s)").c_str(),
              (std::to_string(n) + " (s)").c_str(), "ratio");
  row("save", small.save, large.save);
  row("load", small.load, large.load);
  row("checkpoint", small.checkpoint, large.checkpoint);
  row("state_dict", small.state_dict, large.state_dict);
  row("load_state", small.load_state, large.load_state);
  std::printf("(ratio 10: linear in the number of tensors; 100: quadratic)\n");
  std::printf("{\"bench\":\"checkpoint_load\",\"tensors\":%lld,\"save_s\":%.6f,\"load_s\":%.6f,\"checkpoint_s\":%.6f,"
              "\"state_dict_s\":%.6f,\"load_state_dict_s\":%.6f,\"load_ratio\":%.3f,\"load_state_dict_ratio\":%.3f}\n",
              static_cast<long long>(n), large.save, large.load, large.checkpoint, large.state_dict, large.load_state,
              large.load / small.load, large.load_state / small.load_state);
  return 0;
}
