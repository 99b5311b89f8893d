// FP8 metadata: the per-tensor state a scaling recipe keeps for one FP8 layer, and the scale rules.
//
// Each layer casts three tensors (Fp8Role: input, weight, grad_output) and keeps, per role, a
// scale (q = cast(x · scale)), its inverse (x ≈ q · scale_inv) and a history of amaxes (max |x|),
// laid out as TransformerEngine lays them out: scale and scale_inv are (3,) float32 tensors and
// amax_history is (amax_history_len, 3). Row 0 of the history is the current step's running amax
// (every cast of the role maxes into it); rows 1.. are the window of finished steps, oldest first.
//
// The DelayedScaling update of a role (quantization-fp8.md §B.2), in this order:
//   1. amax = max over the whole column, row 0 included ("max"), or row 0 alone ("most_recent");
//   2. the column rolls up by one: row 0 becomes the newest finished entry (the last row), the
//      oldest one (row 1) drops out, and row 0 starts again from 0;
//   3. scale = (fp8_max · 2^-margin) / amax when amax is finite and > 0 (FLT_MAX where that
//      overflows); otherwise the old scale is kept (a zero or broken step must not blow it up);
//      scale_inv = 1 / scale.
// A NaN in the window makes the amax NaN (Note [FP8 amax] in fp8_kernels.h), so the old scale is
// kept until the NaN has left the window.
//
// The tensors are the layer's keep_dtype buffers (nn/module.h): they go into checkpoints, follow
// the layer across devices, and stay float32 when the model is cast to bfloat16.
//
// On a GPU the per-step bookkeeping stays there: a cast reads the scale and maxes its amax into
// row 0 where they live (the *_element views and fp8_cast_scaled), and update and
// set_scale_from_amax run as kernels of that device (precision/fp8/fp8_scaling_kernels.h), so the
// host never waits. The float accessors read from or write to the device element by element;
// each read waits for the device, so they are for tests, checkpoints and the amax reducer.
#pragma once

#include <cstdint>

#include "precision/fp8/fp8_recipe.h"
#include "tensor/tensor.h"

namespace weft::precision {

// DelayedScaling's rule (step 3 above).
float delayed_scaling_scale(float amax, float old_scale, float fp8_max, int margin);
// Float8CurrentScaling's rule: fp8_max / max(amax, amax_epsilon); 1 when that is 0 or not finite;
// FLT_MAX where the quotient overflows; rounded down to a power of two when power_2_scale.
float current_scaling_scale(float amax, float fp8_max, const Float8CurrentScaling& recipe);

class Fp8Metadata {
 public:
  explicit Fp8Metadata(int64_t amax_history_len = 1024);

  Tensor scale;         // (3,) float32, starts at 1
  Tensor scale_inv;     // (3,) float32, starts at 1
  Tensor amax_history;  // (amax_history_len, 3) float32, starts at 0

  float scale_of(Fp8Role role) const;
  float scale_inv_of(Fp8Role role) const;
  int64_t amax_history_len() const { return amax_history.size(0); }

  // Row 0 of the role's column: the amax collected since the last update.
  float current_amax(Fp8Role role) const;
  // Maxes `amax` into row 0 (NaN wins).
  void record_amax(Fp8Role role, float amax);
  // Overwrites row 0 (with the all-reduced amax before an update).
  void set_current_amax(Fp8Role role, float amax);
  // Sets the scale and its inverse (current scaling records the scale it used).
  void set_scale(Fp8Role role, float scale);

  // One-element views of the role's scale and of row 0 of its amax column, on the metadata's
  // device, for the casts to read and max into there.
  Tensor scale_element(Fp8Role role) const;
  Tensor current_amax_element(Fp8Role role) const;

  // One DelayedScaling update of the role (the three steps above), on the metadata's device.
  void update(Fp8Role role, const DelayedScaling& recipe);
  // Float8CurrentScaling: the role's scale (and inverse) from `amax`, one float32 element on the
  // metadata's device, computed there.
  void set_scale_from_amax(Fp8Role role, const Tensor& amax, float fp8_max, const Float8CurrentScaling& recipe);

  // Makes the history `len` rows long, keeping row 0 and the newest finished rows (at the end);
  // new rows are 0. Used when a recipe with another amax_history_len meets the layer.
  void resize_amax_history(int64_t len);

 private:
  Tensor scale_inv_element(Fp8Role role) const;
  // The device of the three tensors; throws if they are apart (or not contiguous).
  Device device() const;
};

}  // namespace weft::precision
