#!/usr/bin/env bash
# Checks that mlp_train trains under `weft-run -n 2` as it does in one process: with --strategy
# ddp and with --strategy fsdp, each epoch's train loss and test accuracy must match a
# one-process run on the same global batches (the distributed sampler splits every batch of the
# one-process shuffle between the ranks, so only the order of summation differs). The FSDP run
# saves a full checkpoint from rank 0 after its first epoch, and one fsdp process (a group of one)
# resumes it for the second: the run moves from 2 ranks to 1, and the second epoch still matches.
# (An fsdp checkpoint keys the optimizer state by parameter name, so it resumes under fsdp.)
# Uses the 10,000-image Fashion-MNIST test split as the training set so it runs in seconds.
# Usage: distributed_test.sh MLP_TRAIN_DIST WEFT_RUN WORK_DIR (mlp_train_dist: mlp_train with the ddp
# and fsdp strategies linked in). Exits 77 (skipped) when the dataset is
# missing.
set -euo pipefail
trainer=$1
launcher=$2
work=$3
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
common=(--data-dir "$work/data" --hidden 64 --batch-size 128 --seed 5 --threads 1 --no-progress --log "" --plot "")
# A hung rank must fail the test, not CI: every run is bounded (weft-run passes SIGTERM on).
run() { timeout -k 5 120 "$@"; }

run "$trainer" "${common[@]}" --epochs 2 > "$work/one.txt"
run "$launcher" -n 2 "$trainer" "${common[@]}" --epochs 2 --strategy ddp > "$work/ddp.txt"
run "$launcher" -n 2 "$trainer" "${common[@]}" --epochs 1 --strategy fsdp --checkpoint "$work/fsdp.safetensors" \
    > "$work/fsdp.txt"
run "$trainer" "${common[@]}" --epochs 2 --strategy fsdp --resume "$work/fsdp.safetensors" > "$work/resumed.txt"

grep -q "strategy: ddp, ranks: 2" "$work/ddp.txt" || { echo "FAIL: the ddp run did not have 2 ranks"; exit 1; }
grep -q "strategy: fsdp, ranks: 2" "$work/fsdp.txt" || { echo "FAIL: the fsdp run did not have 2 ranks"; exit 1; }
grep -q "resumed from" "$work/resumed.txt" || { echo "FAIL: the one-process run did not resume"; exit 1; }

# "epoch E: train loss L, test accuracy A%, ..." -> "L A" for epoch E of a run's output.
figures() { sed -n "s/^epoch $2: train loss \([0-9.]*\), test accuracy \([0-9.]*\)%.*/\1 \2/p" "$1"; }
# Loss to 2e-3 and accuracy to 0.3 points: far below what another data order or a wrong
# gradient average moves them by, far above summation-order noise.
same() {  # same LABEL "L A" "L A"
  echo "$1: one process $2, this run $3"
  awk -v a="$2" -v b="$3" 'BEGIN { split(a, x, " "); split(b, y, " ");
    if (a == "" || b == "" || (x[1] - y[1]) ^ 2 > 4e-6 || (x[2] - y[2]) ^ 2 > 0.09) exit 1 }' ||
    { echo "FAIL: $1 differs"; exit 1; }
}
same "ddp epoch 1" "$(figures "$work/one.txt" 1)" "$(figures "$work/ddp.txt" 1)"
same "ddp epoch 2" "$(figures "$work/one.txt" 2)" "$(figures "$work/ddp.txt" 2)"
same "fsdp epoch 1" "$(figures "$work/one.txt" 1)" "$(figures "$work/fsdp.txt" 1)"
same "fsdp epoch 2, resumed in one process" "$(figures "$work/one.txt" 2)" "$(figures "$work/resumed.txt" 2)"
echo "two ranks train as one process does"
