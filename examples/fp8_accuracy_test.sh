#!/usr/bin/env bash
# Checks that FP8 training learns as well as bf16: mlp_train under "transformer-engine" must end
# within 1 point of test accuracy of the same run under "bf16-true" (the acceptance, in
# small: a 784-64-10 MLP, 3 epochs on the 10,000-image Fashion-MNIST test split, so it runs in
# seconds). The full-size comparison is `mlp_train --precision P` for both P, 3 epochs.
# Usage: fp8_accuracy_test.sh MLP_TRAIN WORK_DIR. Exits 77 (skipped) when the dataset is missing.
set -euo pipefail
trainer=$1
work=$2
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
accuracy() {  # the last epoch's test accuracy in percent
  "$trainer" --data-dir "$work/data" --hidden 64 --batch-size 128 --epochs 3 --seed 3 --no-progress --log "" \
             --plot "" --precision "$1" 2> /dev/null | sed -n 's/^epoch 3: .*test accuracy \([0-9.]*\)%.*/\1/p'
}
bf16=$(accuracy bf16-true)
fp8=$(accuracy transformer-engine)
echo "test accuracy: bf16-true $bf16 %, transformer-engine $fp8 %"
awk -v a="$bf16" -v b="$fp8" 'BEGIN { d = a - b; if (a == "" || b == "" || d > 1) exit 1 }' ||
  { echo "FAIL: FP8 training is not within 1 point of bf16-true"; exit 1; }
