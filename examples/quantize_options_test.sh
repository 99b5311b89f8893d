#!/usr/bin/env bash
# Checks that quantize_mlp refuses every bad flag and path before it reads the data or trains,
# with exit status 2 and a message that says what was expected (check_options in
# quantize_mlp.cpp), and that a model it saves with --save-model loads back with --model. Builds a
# tiny Fashion-MNIST-shaped dataset (64 training and 256 test images) so it needs neither the real
# one nor much time.
# Usage: quantize_options_test.sh QUANTIZE_MLP WORK_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
program=$(realpath "$1")
work=$2
rm -rf "$work" && mkdir -p "$work/data" && cd "$work"
python3 "$here/tiny_fashion_mnist.py" data 64 256  # the test split: two batches of the throughput test
common=(--data-dir data --epochs 1 --qlora-epochs 0 --batch-size 32 --modes nf4)
started='model trained'
source "$here/refuses.sh"

refuses "--epochs expects 1 or more, got 0" --epochs 0
refuses "--qlora-epochs expects 0 or more, got -1" --qlora-epochs -1
refuses "--batch-size expects 1 or more, got 0" --batch-size 0
refuses "--rank expects 1 or more, got 0" --rank 0
refuses "--train-limit expects 0 or more, got -5" --train-limit -5
refuses "--lr expects a positive number, got 0.000000" --lr 0
refuses "--alpha expects a positive number, got -1.000000" --alpha -1
refuses "--threads expects 1 to" --threads 0
refuses "--modes: [BitsandbytesPrecision] unsupported mode 'nf5'" --modes nf4,nf5
refuses "--modes: [BitsandbytesPrecision] unsupported mode ''" --modes nf4,
refuses "--modes lists 'nf4' twice; expected each mode once" --modes nf4,int8,nf4
refuses "--modes expects at least one mode" --modes ""
refuses "--model: 'missing.safetensors': cannot open: No such file or directory" --model missing.safetensors
refuses "--save-model: cannot create a file in directory 'missing'" --save-model missing/model.safetensors

# --save-model writes the trained model, --model loads it instead of training, and the two runs
# report the same float32 accuracy; both together are refused.
"$program" "${common[@]}" --save-model model.safetensors > trained.txt
"$program" "${common[@]}" --model model.safetensors > loaded.txt
grep -q '^float32 model loaded from model.safetensors' loaded.txt ||
  { echo "FAIL: --model did not load the saved model"; failures=$((failures + 1)); }
accuracy() { grep -o '"float32":{"accuracy":[0-9.]*' "$1"; }
[ -n "$(accuracy trained.txt)" ] && [ "$(accuracy trained.txt)" = "$(accuracy loaded.txt)" ] ||
  { echo "FAIL: the loaded model's accuracy differs from the trained one's"; failures=$((failures + 1)); }
refuses "--save-model saves the model a run trains; expected no --model" --model model.safetensors \
  --save-model again.safetensors

[ "$failures" -eq 0 ] && echo "every bad option was refused before training"
exit "$failures"
