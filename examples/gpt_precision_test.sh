#!/usr/bin/env bash
# A quick run of gpt_train under one precision: a tiny model (1 layer, 32 wide) for 30 steps on
# Genesis 1-4 of the KJV text must print one JSON line whose fields name the run (program,
# precision, strategy, ranks, steps, kernel, attention: the fused kernel except in float64) and
# measure it (val_loss, ms_per_step, tokens_per_s), with a validation loss below log(vocabulary)
# (below guessing uniformly, which an untrained or broken model does not beat); under
# transformer-engine its checkpoint must hold the FP8 scales of every Linear. The long check,
# every precision within 0.05 of 32-true after the default run, is examples/gpt_precision_check.sh
# (not run by CTest).
# Usage: gpt_precision_test.sh GPT_TRAIN WORK_DIR PRECISION. Exits 77 (skipped) without `bible`.
set -euo pipefail
trainer=$1
work=$2
precision=$3
if ! command -v bible > /dev/null; then
  echo "bible-kjv is not installed; skipping"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work"
bible -f Gen1:1-Gen4:26 > "$work/text.txt"
"$trainer" --data "$work/text.txt" --n-layer 1 --n-head 2 --n-embd 32 --block-size 16 --batch-size 8 --steps 30 \
  --lr 0.01 --warmup-steps 0 --eval-interval 30 --eval-iters 2 --threads 1 --sample-tokens 20 --no-progress \
  --log "$work/log.csv" --plot "" --precision "$precision" --checkpoint "$work/model.safetensors" \
  > "$work/out.txt" 2> "$work/err.txt"
python3 - "$work/out.txt" "$work/log.csv" "$precision" "$work/model.safetensors" <<'PY'
import json, math, struct, sys
out, log, precision, checkpoint = sys.argv[1:]
lines = [l for l in open(out) if l.startswith("{")]
assert len(lines) == 1, f"expected one JSON line, got {len(lines)}"
r = json.loads(lines[0])
assert r["program"] == "weft gpt_train", r
aliases = {"16-mixed": "bf16-mixed"}  # on the cpu
assert r["precision"] == aliases.get(precision, precision), (r["precision"], precision)
assert r["strategy"] == "single_device" and r["ranks"] == 1 and r["steps"] == 30, r
assert isinstance(r["kernel"], str) and r["kernel"], r
# float64 attention is the composition of ops; the other dtypes take the fused kernel on the cpu.
assert r["attention"] == "unfused" if precision == "64-true" else r["attention"].startswith("fused "), r["attention"]
for key in ("ms_per_step", "tokens_per_s"):
    assert r[key] > 0, (key, r)
bound = math.log(r["vocab_size"])
assert math.isfinite(r["val_loss"]) and r["val_loss"] < bound, f"val_loss {r['val_loss']} not below log(V) = {bound:.3f}"
with open(checkpoint, "rb") as f:
    keys = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
# transformer-engine trains every Linear in FP8 (their scales are in the checkpoint); the tied
# head is the embedding, kept once.
fp8 = sorted(k for k in keys if k.endswith(".fp8_scale"))
expected = ["transformer.h.0.attn.c_attn.fp8_scale", "transformer.h.0.attn.c_proj.fp8_scale",
            "transformer.h.0.mlp.c_fc.fp8_scale", "transformer.h.0.mlp.c_proj.fp8_scale"]
assert fp8 == (expected if precision == "transformer-engine" else []), fp8
rows = open(log).read().splitlines()
assert rows[0] == "step,train_loss,val_loss,lr,ms" and len(rows) == 31, rows[:2]
print(f"{precision}: val_loss {r['val_loss']:.4f} (log V = {bound:.3f}), kernel {r['kernel']}, attention {r['attention']}")
PY
