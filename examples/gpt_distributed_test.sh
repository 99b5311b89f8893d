#!/usr/bin/env bash
# Checks that gpt_train trains under `weft-run -n 2` as one process does at the same global
# batch: every rank draws the same windows and trains on its half of them, so after 20 steps the
# validation loss (and every logged train loss) must match the one-process run but for the order
# of summation. STRATEGIES: ddp (default) and/or fsdp. A tiny model on Genesis 1-4 of the KJV text.
# Usage: gpt_distributed_test.sh GPT_TRAIN WEFT_RUN WORK_DIR [STRATEGY...]. Exits 77 without `bible`.
set -euo pipefail
trainer=$1
launcher=$2
work=$3
shift 3
strategies=("${@:-ddp}")
if ! command -v bible > /dev/null; then
  echo "bible-kjv is not installed; skipping"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work"
bible -f Gen1:1-Gen4:26 > "$work/text.txt"
common=(--data "$work/text.txt" --n-layer 2 --n-head 2 --n-embd 32 --block-size 16 --batch-size 8 --steps 20
        --lr 0.005 --warmup-steps 2 --eval-interval 10 --eval-iters 2 --threads 1 --sample-tokens 0 --no-progress
        --plot "")
# A hung rank must fail the test, not CI: every run is bounded (weft-run passes SIGTERM on).
run() { timeout -k 5 120 "$@"; }
run "$trainer" "${common[@]}" --log "$work/one.csv" > "$work/one.txt"
for strategy in "${strategies[@]}"; do
  run "$launcher" -n 2 "$trainer" "${common[@]}" --strategy "$strategy" --log "$work/$strategy.csv" \
    > "$work/$strategy.txt"
  grep -q "strategy: $strategy, ranks: 2" "$work/$strategy.txt" ||
    { echo "FAIL: the $strategy run did not have 2 ranks"; exit 1; }
  # Train losses per step and the validation losses to 1e-4: far below what another batch split
  # or a wrong gradient average moves them by, far above summation-order noise.
  python3 - "$work/one.csv" "$work/$strategy.csv" "$strategy" <<'PY'
import csv, sys
one, many, strategy = sys.argv[1:]
a, b = list(csv.DictReader(open(one))), list(csv.DictReader(open(many)))
assert len(a) == len(b) == 20, (len(a), len(b))
worst = 0.0
for x, y in zip(a, b):
    for key in ("train_loss", "val_loss"):
        if x[key] or y[key]:
            worst = max(worst, abs(float(x[key]) - float(y[key])))
assert worst < 1e-4, f"{strategy}: the losses differ from one process's by up to {worst:.2e}"
print(f"{strategy} x 2 ranks: val loss {b[-1]['val_loss']} (one process {a[-1]['val_loss']}), largest difference {worst:.1e}")
PY
done
