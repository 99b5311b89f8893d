#!/usr/bin/env bash
# Checks that gpt_train resumes exactly: 12 steps saved at step 6 and resumed must leave the same
# checkpoint bytes (model, AdamW state, step, vocabulary) as 12 straight steps, and the same losses.
# The learning-rate schedule is pinned with --lr-decay-steps so both runs follow one curve. A tiny
# model (2 layers, 32 wide) on Genesis 1-4 of the KJV text (14 KB), with dropout on so that the
# dropout masks are resumed too. Optional PRECISION (default 32-true).
# Usage: gpt_resume_test.sh GPT_TRAIN WORK_DIR [PRECISION]. Exits 77 (skipped) when the `bible`
# program (Debian's bible-kjv) is missing.
set -euo pipefail
trainer=$1
work=$2
precision=${3:-32-true}
if ! command -v bible > /dev/null; then
  echo "bible-kjv is not installed; skipping"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work"
bible -f Gen1:1-Gen4:26 > "$work/text.txt"
common=(--data "$work/text.txt" --n-layer 2 --n-head 2 --n-embd 32 --block-size 16 --batch-size 4 --dropout 0.1
        --lr-decay-steps 12 --warmup-steps 3 --eval-interval 6 --eval-iters 2 --seed 11 --threads 1
        --sample-tokens 40 --no-progress --plot "" --precision "$precision")
"$trainer" "${common[@]}" --steps 12 --log "$work/straight.csv" --checkpoint "$work/straight.safetensors" \
  > "$work/straight.txt"
"$trainer" "${common[@]}" --steps 6 --log "$work/resumed.csv" --checkpoint "$work/resumed.safetensors" \
  > "$work/first.txt"
"$trainer" "${common[@]}" --steps 12 --log "$work/resumed.csv" --checkpoint "$work/resumed.safetensors" \
  --resume "$work/resumed.safetensors" > "$work/resumed.txt"
grep -q "resumed from" "$work/resumed.txt" || { echo "FAIL: the second run did not resume"; exit 1; }
if ! cmp "$work/straight.safetensors" "$work/resumed.safetensors"; then
  echo "FAIL: the resumed run's checkpoint differs from the straight run's"
  exit 1
fi
# The logs agree in every column but the step time; so do the samples.
if ! diff <(cut -d, -f1-4 "$work/straight.csv") <(cut -d, -f1-4 "$work/resumed.csv"); then
  echo "FAIL: the logs differ"
  exit 1
fi
sample() { sed -n '/^---- sample ----$/,/^----------------$/p' "$1"; }
[ -n "$(sample "$work/straight.txt")" ] || { echo "FAIL: no sample"; exit 1; }
[ "$(sample "$work/straight.txt")" = "$(sample "$work/resumed.txt")" ] || { echo "FAIL: the samples differ"; exit 1; }
echo "resume is exact: $(grep '^step 12:' "$work/resumed.txt")"
