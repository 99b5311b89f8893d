// FP8 scaling recipes, after TransformerEngine's (quantization-fp8.md §B.2): which FP8 format each
// tensor of a layer is cast to, and how its scale is chosen.
//
//   DelayedScaling        the scale used at step t comes from the amaxes of steps before t: each
//                         tensor keeps a window of past amaxes (precision/fp8/fp8_meta.h), and
//                         after each step scale = (fp8_max / amax) / 2^margin, with amax the
//                         window's max ("max") or the latest one ("most_recent").
//   Float8CurrentScaling  the scale comes from this tensor's own amax, computed before the cast:
//                         scale = fp8_max / max(amax, amax_epsilon), optionally rounded down to a
//                         power of two.
//
// fp8_format E4M3 casts every tensor to E4M3; HYBRID (the default) casts the forward tensors
// (input, weight) to E4M3 and the gradients to E5M2, which has the range gradients need. Pure
// E5M2 training is refused, as in the reference.
//
// A recipe can also be written as a mapping of field names to values, as Lightning accepts a dict
// ({"fp8_format": "HYBRID", "amax_history_len": 16}); the format is then a name.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>

#include "tensor/dtype.h"

namespace weft::precision {

enum class Fp8Format { E4M3, E5M2, HYBRID };
enum class AmaxComputeAlgo { Max, MostRecent };
// The tensors of an FP8 GEMM layer that are cast, each with its own scale and amax history.
enum class Fp8Role { Input = 0, Weight = 1, GradOutput = 2 };
inline constexpr int kNumFp8Roles = 3;
// The longest amax history a layer keeps: 2^20 steps (TransformerEngine's default is 1024), 12 MiB
// a layer; beyond it a typo would ask for terabytes.
inline constexpr int64_t kMaxAmaxHistoryLen = int64_t{1} << 20;

struct DelayedScaling {
  int margin = 0;
  Fp8Format fp8_format = Fp8Format::HYBRID;
  int64_t amax_history_len = 1024;
  AmaxComputeAlgo amax_compute_algo = AmaxComputeAlgo::Max;
  // All-reduce (max) the amaxes over the ranks before each update, through the fp8_autocast's
  // amax reducer (precision/fp8/fp8_autocast.h); without a reducer there is nothing to reduce.
  bool reduce_amax = true;
};

struct Float8CurrentScaling {
  Fp8Format fp8_format = Fp8Format::HYBRID;
  float amax_epsilon = 0.0f;
  bool power_2_scale = false;
};

using Fp8Recipe = std::variant<DelayedScaling, Float8CurrentScaling>;

// Throws weft::Error naming the field when a recipe cannot be used: E5M2 as fp8_format, a value
// outside an enum, a history shorter than 1 or longer than kMaxAmaxHistoryLen, a margin outside
// [-100, 100] (2^margin must be a normal float), a negative or non-finite amax_epsilon.
void validate(const Fp8Recipe& recipe);

Fp8Format fp8_format_of(const Fp8Recipe& recipe);
// float8_e4m3fn, or float8_e5m2 for the gradient under HYBRID.
DType fp8_dtype_for(Fp8Format format, Fp8Role role);

std::string_view to_string(Fp8Format format);        // "E4M3", "E5M2", "HYBRID"
std::string_view to_string(AmaxComputeAlgo algo);    // "max", "most_recent"
std::string_view to_string(Fp8Role role);            // "input", "weight", "grad_output"
// Parses the names above (as Python's getattr(Format, name)); throws listing them otherwise.
Fp8Format fp8_format_from_name(std::string_view name);

// A recipe written as field -> value (Lightning's dict recipe). Keys: margin (int), fp8_format
// (a name), amax_history_len (int), amax_compute_algo ("max" or "most_recent"), reduce_amax
// (bool). The mapping is read, never changed; unknown keys and wrong types are errors.
using RecipeValue = std::variant<bool, int64_t, double, std::string>;
using RecipeMapping = std::map<std::string, RecipeValue>;
DelayedScaling delayed_scaling_from_mapping(const RecipeMapping& mapping);

}  // namespace weft::precision
