#!/usr/bin/env bash
# QLoRA-FSDP on gpt_train's model: train a tiny GPT (2 layers, 32 wide) for 10 steps, then
# --finetune it (linears frozen as NF4, rank-4 LoRA adapters) for 20 steps in one process and under
# `weft-run -n 2 --strategy fsdp` at the same global batch. Under fsdp every LoRA layer is a unit
# whose 4-bit bytes are sharded across the ranks beside its adapters; the two runs must report the
# same validation loss before fine-tuning (the same frozen model) and after it within 0.02, and
# the same count of trainable values. Exits 77 without `bible`.
# Usage: gpt_qlora_fsdp_test.sh GPT_TRAIN WEFT_RUN WORK_DIR [QUANTIZE (nf4)].
set -euo pipefail
trainer=$1
launcher=$2
work=$3
quantize=${4:-nf4}
if ! command -v bible > /dev/null; then
  echo "bible-kjv is not installed; skipping"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work"
bible -f Gen1:1-Gen4:26 > "$work/text.txt"
common=(--data "$work/text.txt" --block-size 16 --batch-size 8 --eval-iters 4 --threads 1 --no-progress --plot ""
        --sample-tokens 0)
# A hung rank must fail the test, not CI: every run is bounded (weft-run passes SIGTERM on).
run() { timeout -k 5 120 "$@"; }
run "$trainer" "${common[@]}" --n-layer 2 --n-head 2 --n-embd 32 --steps 10 --lr 0.01 --warmup-steps 0 \
  --eval-interval 10 --log "" --checkpoint "$work/base.safetensors" > "$work/base.txt"
finetune=(--finetune "$work/base.safetensors" --quantize "$quantize" --lora-rank 4 --steps 20 --lr 0.02
          --min-lr 0.02 --warmup-steps 0 --eval-interval 20)
run "$trainer" "${common[@]}" "${finetune[@]}" --log "$work/one.csv" > "$work/one.txt"
run "$launcher" -n 2 "$trainer" "${common[@]}" "${finetune[@]}" --strategy fsdp --log "$work/fsdp.csv" \
  > "$work/fsdp.txt"
python3 - "$work/one.txt" "$work/fsdp.txt" "$work/one.csv" "$work/fsdp.csv" <<'PY'
import csv, json, sys
def last_json(path):
    return json.loads([l for l in open(path) if l.startswith("{")][-1])
one, fsdp = last_json(sys.argv[1]), last_json(sys.argv[2])
assert fsdp["mode"] == "qlora" and fsdp["strategy"] == "fsdp" and fsdp["ranks"] == 2, fsdp
assert one["trainable"] == fsdp["trainable"], (one["trainable"], fsdp["trainable"])
assert abs(one["val_loss_before"] - fsdp["val_loss_before"]) < 1e-3, (one["val_loss_before"], fsdp["val_loss_before"])
assert fsdp["val_loss"] < fsdp["val_loss_before"], f"QLoRA-FSDP did not lower the loss: {fsdp}"
gap = abs(one["val_loss"] - fsdp["val_loss"])
assert gap < 0.02, f"QLoRA-FSDP val loss {fsdp['val_loss']} vs one process {one['val_loss']}"
a, b = list(csv.DictReader(open(sys.argv[3]))), list(csv.DictReader(open(sys.argv[4])))
assert len(a) == len(b) == 20, (len(a), len(b))
worst = max(abs(float(x["train_loss"]) - float(y["train_loss"])) for x, y in zip(a, b))
print(f"QLoRA-FSDP x 2 ranks: val loss {fsdp['val_loss_before']:.4f} -> {fsdp['val_loss']:.4f} "
      f"(one process {one['val_loss']:.4f}, gap {gap:.1e}); train losses differ by up to {worst:.1e}")
PY
