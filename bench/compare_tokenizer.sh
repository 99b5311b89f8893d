#!/usr/bin/env bash
# weft's tokenizer against the `tokenizers` library on the same text and tokenizer files, both on
# one thread: load time, and encode and decode MB/s, with weft / library ratios. The text is the
# KJV Bible (`bible -l80 gen1:1-rev22:21`, Debian's bible-kjv, 4.3 MB); the tokenizers are the
# GPT-2-style and Llama-3-style test tokenizers (tests/models/data/), unless --tokenizer names one.
# The token counts of both sides are printed too: they must be equal.
#
#   bench/compare_tokenizer.sh [--build-dir DIR] [--python PY] [--tokenizer FILE] [--min-time S]
#
# DIR (default build, or $WEFT_BUILD_DIR) is a build configured with -DWEFT_BUILD_BENCH=ON; PY
# (default /work/venv/bin/python when it exists, else python3) needs `tokenizers`.
# Output: a table, then one line of JSON starting with {"bench":"tokenizer_summary".
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir="${WEFT_BUILD_DIR:-build}"
python="python3"
[ -x /work/venv/bin/python ] && python=/work/venv/bin/python
tokenizers=(tests/models/data/gpt2_tokenizer.json tests/models/data/llama3_tokenizer.json)
min_time=2
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --tokenizer) tokenizers=("$2"); shift 2 ;;
    --min-time) min_time="$2"; shift 2 ;;
    *) echo "usage: $0 [--build-dir DIR] [--python PY] [--tokenizer FILE] [--min-time S]" >&2; exit 2 ;;
  esac
done
text="$(mktemp)"
trap 'rm -f "$text"' EXIT
bible -l80 gen1:1-rev22:21 > "$text"

printf '%-24s %8s %10s %10s %7s %10s %10s %7s %9s %9s\n' tokenizer tokens "weft enc" "lib enc" ratio \
  "weft dec" "lib dec" ratio "weft ms" "lib ms"
summary='{"bench":"tokenizer_summary","rows":['
first=1
for tok in "${tokenizers[@]}"; do
  weft_json="$("$build_dir/bench/bench_tokenizer" --tokenizer "$tok" --text "$text" --min-time "$min_time" | tail -1)"
  peer_json="$("$python" bench/tokenizer_peer.py --tokenizer "$tok" --text "$text" --min-time "$min_time")"
  row="$("$python" - "$tok" "$weft_json" "$peer_json" <<'PY'
import json, sys
name, w, p = sys.argv[1].rsplit("/", 1)[-1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
tokens = f'{w["tokens"]}' if w["tokens"] == p["tokens"] else f'{w["tokens"]}!={p["tokens"]}'
print(f'{name:<24} {tokens:>8} {w["encode_mb_s"]:10.2f} {p["encode_mb_s"]:10.2f} '
      f'{w["encode_mb_s"] / p["encode_mb_s"]:7.1f} {w["decode_mb_s"]:10.2f} {p["decode_mb_s"]:10.2f} '
      f'{w["decode_mb_s"] / p["decode_mb_s"]:7.1f} {w["load_s"] * 1e3:9.1f} {p["load_s"] * 1e3:9.1f}')
print(json.dumps({"tokenizer": name, "tokens_equal": w["tokens"] == p["tokens"],
                  "encode_ratio": w["encode_mb_s"] / p["encode_mb_s"], "decode_ratio": w["decode_mb_s"] / p["decode_mb_s"],
                  "weft": w, "tokenizers": p}))
PY
)"
  echo "$row" | head -1
  [ $first -eq 1 ] || summary+=','
  summary+="$(echo "$row" | tail -1)"
  first=0
done
echo "$summary]}"
