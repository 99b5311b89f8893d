#!/usr/bin/env bash
# QLoRA on gpt_train's model: train a tiny GPT (2 layers, 32 wide) for 10 steps (short of what
# its embedding can learn, so that adapters have something to add), then --finetune it with its linears frozen as NF4 and rank-4 LoRA adapters for 100 steps: the JSON line must
# report the validation loss before and after, the adapters must have lowered it, and only they
# train (the count of trainable values is the adapters').
# Usage: gpt_qlora_test.sh GPT_TRAIN WORK_DIR. Exits 77 without `bible`.
set -euo pipefail
trainer=$1
work=$2
if ! command -v bible > /dev/null; then
  echo "bible-kjv is not installed; skipping"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work"
bible -f Gen1:1-Gen4:26 > "$work/text.txt"
common=(--data "$work/text.txt" --block-size 16 --batch-size 8 --eval-iters 8 --threads 1 --no-progress --plot ""
        --log "" --sample-tokens 20)
"$trainer" "${common[@]}" --n-layer 2 --n-head 2 --n-embd 32 --steps 10 --lr 0.01 --warmup-steps 0 \
  --eval-interval 10 --checkpoint "$work/base.safetensors" > "$work/base.txt"
"$trainer" "${common[@]}" --finetune "$work/base.safetensors" --quantize nf4 --lora-rank 4 --steps 100 --lr 0.02 \
  --min-lr 0.02 --warmup-steps 0 --eval-interval 100 > "$work/qlora.txt"
python3 - "$work/qlora.txt" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
r = json.loads(lines[-1])
assert r["mode"] == "qlora" and r["quantize"] == "nf4" and r["lora_rank"] == 4, r
# rank-4 adapters on c_attn (32 -> 96), attn c_proj (32 -> 32), c_fc (32 -> 128), mlp c_proj (128 -> 32)
expected = 2 * 4 * ((32 + 96) + (32 + 32) + (32 + 128) + (128 + 32))  # 2 blocks
assert r["trainable"] == expected, (r["trainable"], expected)
assert r["val_loss"] < r["val_loss_before"], f"QLoRA did not lower the loss: {r['val_loss_before']} -> {r['val_loss']}"
print(f"QLoRA nf4: val loss {r['val_loss_before']:.4f} -> {r['val_loss']:.4f}, {r['trainable']} trainable values")
PY
