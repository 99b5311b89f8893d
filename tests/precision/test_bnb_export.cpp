// weft -> bitsandbytes: quantized layers saved by weft as safetensors files that bitsandbytes
// loads (bitsandbytes' keys and layout; scripts/golden_bnb.py --verify loads them into
// bitsandbytes and compares its forward with the one weft stored beside each file). CI has no
// bitsandbytes, so here the files are written to a scratch directory and read back by weft;
// with WEFT_BNB_EXPORT_DIR set they are written there for the script, run by hand:
//
//   WEFT_BNB_EXPORT_DIR=/tmp/weft_bnb build/tests/test_precision -tc='*export for bitsandbytes*'
//   /work/venv/bin/python scripts/golden_bnb.py --verify /tmp/weft_bnb
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <unistd.h>

#include "precision/quant/linear_4bit.h"
#include "precision/quant/linear_8bit.h"
#include "quant_test_helpers.h"

using namespace weft;
using namespace weft::precision::quant;

namespace {

std::filesystem::path export_dir() {
  if (const char* dir = std::getenv("WEFT_BNB_EXPORT_DIR")) return dir;
  return std::filesystem::temp_directory_path() / ("weft_bnb_export_" + std::to_string(::getpid()));
}

void export_layer(const std::filesystem::path& dir, const std::string& name, nn::Module& layer,
                  io::SafetensorsMetadata meta, int64_t in_features, DType input_dtype) {
  const Tensor x = randn({4, in_features}).to(input_dtype);
  Tensor y;
  {
    NoGradGuard no_grad;
    layer.eval();
    y = layer.forward(x);
  }
  meta["in_features"] = std::to_string(in_features);
  io::save_safetensors(dir / (name + ".safetensors"), layer.state_dict(), meta);
  nn::TensorDict io;
  io.insert("x", x);
  io.insert("y", y);
  io::save_safetensors(dir / (name + ".io.safetensors"), io);
}

}  // namespace

TEST_CASE("quantized layers export for bitsandbytes: files in its layout that load back identically") {
  const std::filesystem::path dir = export_dir();
  std::filesystem::create_directories(dir);
  manual_seed(31);
  struct Four {
    const char* name;
    QuantKind type;
    bool nested;
    int64_t blocksize;
  };
  for (const Four& f : {Four{"weft_linear4bit_nf4_dq", QuantKind::NF4, true, 64},
                        Four{"weft_linear4bit_fp4", QuantKind::FP4, false, 64},
                        Four{"weft_linear4bit_nf4_bs128", QuantKind::NF4, false, 128}}) {
    Linear4bit layer(192, 72, true, Linear4bitOptions{f.type, f.nested, f.blocksize, kFloat32});
    export_layer(dir, f.name, *layer,
                 {{"kind", "linear4bit"}, {"out_features", "72"}, {"bias", "true"},
                  {"quant_type", f.type == QuantKind::NF4 ? "nf4" : "fp4"}},
                 192, kFloat32);
    // Read back by weft: the same state, strictly.
    Linear4bit back(192, 72, true, Linear4bitOptions{QuantKind::FP4, false, 4096, kFloat32});
    back->load_state_dict(io::load_safetensors(dir / (std::string(f.name) + ".safetensors")).tensors);
    for (const auto& [key, tensor] : layer->state_dict()) quant_test::check_bitwise(back->state_dict().at(key), tensor, key);
  }
  for (const double threshold : {6.0, 0.0}) {
    const std::string name = threshold > 0 ? "weft_linear8bit_t6" : "weft_linear8bit_t0";
    Linear8bitLt layer(96, 40, true, Linear8bitLtOptions{false, threshold});
    export_layer(dir, name, *layer,
                 {{"kind", "linear8bit"}, {"out_features", "40"}, {"bias", "true"},
                  {"threshold", threshold > 0 ? "6.0" : "0.0"}},
                 96, kFloat16);
    Linear8bitLt back(96, 40, true, Linear8bitLtOptions{false, threshold});
    back->load_state_dict(io::load_safetensors(dir / (name + ".safetensors")).tensors);
    for (const auto& [key, tensor] : layer->state_dict()) quant_test::check_bitwise(back->state_dict().at(key), tensor, key);
  }
  if (std::getenv("WEFT_BNB_EXPORT_DIR") == nullptr) std::filesystem::remove_all(dir);
}
