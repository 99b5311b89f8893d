#!/usr/bin/env bash
# The long accuracy check of gpt_train (minutes per run; CTest does not run it): the default run
# on the KJV text under every precision the Fabric offers, each of whose validation loss must come
# within 0.05 of 32-true's; then, with --distributed, 32-true under `weft-run -n 2` with ddp and
# fsdp, within 0.02 of one process at the same global batch. Prints a table and one JSON line.
# Usage: gpt_precision_check.sh GPT_TRAIN KJV_TEXT [--distributed [WEFT_RUN]] [-- extra gpt_train flags]
# (scripts/train-gpt.sh writes the text to data/kjv.txt; one process uses 2 threads, each of two
# ranks 1.)
set -euo pipefail
trainer=$1
text=$2
shift 2
distributed=""
launcher=$(dirname "$trainer")/../weft-run
if [ "${1:-}" = "--distributed" ]; then
  distributed=1
  shift
  if [ $# -gt 0 ] && [ "$1" != "--" ]; then launcher=$1; shift; fi
fi
[ "${1:-}" = "--" ] && shift
extra=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
precisions=(32-true 64-true bf16-true 16-true bf16-mixed 16-mixed transformer-engine)

# run NAME THREADS ARGS...: one default run with THREADS threads per process; prints
# "NAME val_loss ms_per_step seconds".
run() {
  local name=$1 threads=$2
  shift 2
  "$@" --data "$text" --threads "$threads" --no-progress --log "$work/$name.csv" --plot "" --sample-tokens 0 "${extra[@]}" \
    > "$work/$name.txt" 2> "$work/$name.err" || { echo "FAIL: $name"; cat "$work/$name.err"; exit 1; }
  python3 -c "
import json, sys
r = json.loads([l for l in open('$work/$name.txt') if l.startswith('{')][-1])
print('$name', r['val_loss'], r['ms_per_step'], r['seconds'])"
}

results=()
for p in "${precisions[@]}"; do
  results+=("$(run "$p" 2 "$trainer" --precision "$p")")
  echo "${results[-1]}"
done
if [ -n "$distributed" ]; then
  for s in ddp fsdp; do
    results+=("$(run "$s" 1 "$launcher" -n 2 "$trainer" --strategy "$s")")
    echo "${results[-1]}"
  done
fi
printf '%s\n' "${results[@]}" | python3 -c "
import json, sys
rows = [l.split() for l in sys.stdin if l.strip()]
base = float(rows[0][1])
ok, out = True, {}
print(f'{\"run\":<20} {\"val loss\":>9} {\"vs 32-true\":>10} {\"ms/step\":>8} {\"seconds\":>8}  limit')
for name, val, ms, seconds in rows:
    d = float(val) - base
    limit = 0.02 if name in ('ddp', 'fsdp') else 0.05
    good = abs(d) <= limit
    ok &= good
    out[name] = {'val_loss': float(val), 'delta': round(d, 4), 'ms_per_step': float(ms), 'seconds': float(seconds)}
    print(f'{name:<20} {float(val):9.4f} {d:+10.4f} {float(ms):8.1f} {float(seconds):8.1f}  {limit} {\"ok\" if good else \"FAIL\"}')
print(json.dumps({'program': 'gpt_precision_check', 'runs': out, 'ok': ok}))
sys.exit(0 if ok else 1)"
