#!/usr/bin/env bash
# Checks that mlp_train resumes exactly: 2 epochs, then a resumed third, must leave the same
# checkpoint bytes (model weights, optimizer state, epoch) as 3 straight epochs. Uses the
# 10,000-image Fashion-MNIST test split as a small training set so it runs in seconds.
# With PRECISION transformer-engine the checkpoint must also carry the FP8 layers' scales and
# amax histories, and resuming must continue their scaling exactly.
# Usage: resume_test.sh MLP_TRAIN WORK_DIR [PRECISION]. Exits 77 (skipped) when the dataset is
# missing.
set -euo pipefail
trainer=$1
work=$2
precision=${3:-32-true}
source=/usr/share/datasets/fashion-mnist
if [ ! -f "$source/t10k-images-idx3-ubyte.gz" ]; then
  echo "dataset-fashion-mnist is not installed; skipping"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work/data"
for kind in images-idx3 labels-idx1; do
  ln -s "$source/t10k-$kind-ubyte.gz" "$work/data/train-$kind-ubyte.gz"
  ln -s "$source/t10k-$kind-ubyte.gz" "$work/data/t10k-$kind-ubyte.gz"
done
common=(--data-dir "$work/data" --hidden 64 --batch-size 256 --seed 7 --no-progress --log "" --plot ""
        --precision "$precision")
"$trainer" "${common[@]}" --epochs 3 --checkpoint "$work/straight.safetensors" > "$work/straight.txt"
"$trainer" "${common[@]}" --epochs 2 --checkpoint "$work/resumed.safetensors" > "$work/first.txt"
"$trainer" "${common[@]}" --epochs 3 --checkpoint "$work/resumed.safetensors" \
           --resume "$work/resumed.safetensors" > "$work/resumed.txt"
if ! cmp "$work/straight.safetensors" "$work/resumed.safetensors"; then
  echo "FAIL: the resumed run's checkpoint differs from the straight run's"
  exit 1
fi
grep -q "resumed from" "$work/resumed.txt" || { echo "FAIL: the second run did not resume"; exit 1; }
if [[ $precision == transformer-engine* ]]; then
  # The safetensors header (plain JSON at the start of the file) names every tensor. It is cut
  # to a file first: `head | grep -q` fails under pipefail whenever grep's early exit kills head.
  head -c 65536 "$work/resumed.safetensors" > "$work/header.bin"
  for key in 0.fp8_scale 0.fp8_scale_inv 0.fp8_amax_history; do
    grep -aq "\"$key\"" "$work/header.bin" ||
      { echo "FAIL: the checkpoint has no $key"; exit 1; }
  done
fi
straight=$(grep '^epoch 3' "$work/straight.txt")
resumed=$(grep '^epoch 3' "$work/resumed.txt")
# Same loss and accuracy (the fields before the timing, which differs).
[ "$(echo "$straight" | cut -d, -f1-2)" = "$(echo "$resumed" | cut -d, -f1-2)" ] ||
  { echo "FAIL: '$straight' vs '$resumed'"; exit 1; }
echo "resume is exact: $resumed"
