// A 4-bit QuantState in a state dict, under the keys and in the layout bitsandbytes uses
// (bitsandbytes' QuantState.as_dict(packed=True) / from_dict), so checkpoints move both ways:
//
//   <prefix>absmax                          float32 (blocks,), or uint8 codes when nested
//   <prefix>quant_map                       float32 (16,): the NF4 / FP4 table
//   <prefix>nested_absmax                   float32 (nested blocks,)        nested only
//   <prefix>nested_quant_map                float32 (256,): the dynamic map nested only
//   <prefix>quant_state.bitsandbytes__nf4   uint8: the UTF-8 bytes of a JSON object
//       {"quant_type": "nf4", "blocksize": 64, "dtype": "float32", "shape": [40, 96],
//        "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.1004...}
//
// where <prefix> is the parameter's key plus '.' ("fc1.weight."). The JSON text is written
// exactly as Python's json.dumps writes it (", " and ": " separators, floats as repr()), so a
// checkpoint loaded and saved again is byte-identical.
#pragma once

#include <string>

#include "nn/state_loader.h"
#include "nn/tensor_dict.h"
#include "precision/quant/blockwise.h"

namespace weft::precision::quant {

void save_quant_state(const QuantState& state, const std::string& prefix, nn::TensorDict& out);

// True when the dict holds a quant_state entry under `prefix`.
bool has_quant_state(const nn::StateLoader& loader, const std::string& prefix);
// Takes the keys above from the loader and rebuilds the state; throws weft::Error naming the key
// and the problem (the caller reports it through the loader). The state is checked against
// `codes` (check_quant_state) before it is returned.
QuantState load_quant_state(nn::StateLoader& loader, const std::string& prefix, const Tensor& codes);

// The JSON of the quant_state entry, and its inverse (which fills the non-tensor fields).
std::string quant_state_json(const QuantState& state);
void parse_quant_state_json(const std::string& text, QuantState& state);

// A double as Python's repr() writes it: the shortest digits that read back to the same value,
// fixed-point for exponents -4 .. 15, else scientific ("0.1", "1e-05", "1.5e+16").
std::string python_float_repr(double value);

}  // namespace weft::precision::quant
