#!/usr/bin/env bash
# weft-generate from the shell, as a user runs it, on the models floor's test folders (random-init
# GPT-2 and Llama models that scripts/golden_generate.py wrote with transformers):
# - every bad flag is refused with exit status 2, and a request the model cannot serve (too long
#   for its positions, a stop token outside its vocabulary) with status 1, each saying what was
#   expected and printing nothing on stdout;
# - greedy continuations of a text prompt are transformers' own token for token (the goldens in
#   generate_goldens.json, made by transformers' generate(do_sample=False)), in the JSON line and
#   in the streamed text;
# - sampling is reproducible from --seed, --stop ends the text, quantized and bitsandbytes folders
#   generate, and --device cuda runs where there is a GPU and says why not where there is none.
# Usage: weft_generate_test.sh WEFT_GENERATE MODELS_DATA_DIR WORK_DIR
set -euo pipefail
generate=$(realpath "$1")
data=$(realpath "$2")
work=$(realpath -m "$3")
rm -rf "$work" && mkdir -p "$work" && cd "$work"
gpt2=$data/tiny_gpt2
llama=$data/tiny_llama
prompt="The licenses for most software"
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# refuses STATUS EXPECTED ARGS...: that exit status, EXPECTED in stderr, nothing on stdout.
refuses() {
  local expected_status=$1 expected=$2
  shift 2
  local status=0
  "$generate" "$@" > out.txt 2> err.txt || status=$?
  if [ "$status" -ne "$expected_status" ] || ! grep -qF -- "$expected" err.txt || [ -s out.txt ]; then
    fail "weft-generate $* -> status $status, stdout '$(head -c 200 out.txt)', stderr:"
    sed 's/^/  /' err.txt
    echo "  expected status $expected_status and: $expected"
  fi
}

# Flags, checked before the model is read.
mkdir empty_dir
refuses 2 "--model is required" --prompt hi
refuses 2 "--model: '$work/missing' is not a directory" --model "$work/missing" --prompt hi
refuses 2 "has no config.json" --model "$work/empty_dir" --prompt hi
refuses 2 "--prompt is required" --model "$gpt2"
refuses 2 "--prompt needs a value" --model "$gpt2" --prompt
refuses 2 "unexpected argument 'hi' (every option is a --flag)" --model "$gpt2" hi
refuses 2 "unknown option '--bogus'" --model "$gpt2" --prompt hi --bogus 1
refuses 2 "--max-new-tokens expects at least 1, got 0" --model "$gpt2" --prompt hi --max-new-tokens 0
refuses 2 "--max-new-tokens expects an integer, got 'ten'" --model "$gpt2" --prompt hi --max-new-tokens ten
refuses 2 "--greedy excludes --temperature, --top-k and --top-p" --model "$gpt2" --prompt hi --greedy --top-k 5
refuses 2 "temperature must be a positive number, got 0" --model "$gpt2" --prompt hi --temperature 0
refuses 2 "--temperature expects a number, got 'warm'" --model "$gpt2" --prompt hi --temperature warm
refuses 2 "top-p must be in (0, 1], got 1.5" --model "$gpt2" --prompt hi --top-p 1.5
refuses 2 "--top-k expects an integer of at least 1, got -1" --model "$gpt2" --prompt hi --top-k -1
refuses 2 "--top-k expects an integer of at least 1, got 0" --model "$gpt2" --prompt hi --top-k 0
refuses 2 "--seed expects an integer of at least 0, got -3" --model "$gpt2" --prompt hi --seed -3
refuses 2 "--quantize expects nf4, nf4-dq, fp4, fp4-dq, int8, fp8 or fp8-channel, got 'int4'" \
  --model "$gpt2" --prompt hi --quantize int4
refuses 2 "--dtype expects float32 or bfloat16, got 'float16'" --model "$gpt2" --prompt hi --dtype float16
refuses 2 "--kv-cache expects float32 or bfloat16, got 'int8'" --model "$gpt2" --prompt hi --kv-cache int8
refuses 2 "--threads expects 1 to" --model "$gpt2" --prompt hi --threads 0
refuses 2 "--device expects cpu or cuda, got 'tpu'" --model "$gpt2" --prompt hi --device tpu

# Requests the model cannot serve, refused before anything is printed: the prompt (21 tokens) and
# the new tokens past the 64 positions, a stop token or top-k outside the 300-token vocabulary.
refuses 1 "prompt 0 of 21 tokens plus 44 new ones exceeds the model's 64 positions" \
  --model "$gpt2" --prompt "$prompt" --max-new-tokens 44
refuses 1 "stop token 300 is outside the vocabulary [0, 300)" --model "$gpt2" --prompt "$prompt" --max-new-tokens 8 \
  --stop 300
refuses 1 "top-k must be in [1, 300], got 301" --model "$llama" --prompt "$prompt" --top-k 301

# check_json FILE FIELD=PYTHON_EXPR...: each expression over the JSON line `j` and the goldens `g`
# is true.
check_json() {
  local file=$1
  shift
  python3 - "$file" "$data/generate_goldens.json" "$@" <<'PY' || fail "$file: $(cat "$file")"
import json, sys
j = json.loads(open(sys.argv[1]).read())
g = json.load(open(sys.argv[2]))
bad = [c for c in sys.argv[3:] if not eval(c)]
for c in bad:
    print(f"  not true: {c}")
sys.exit(1 if bad else 0)
PY
}

# Greedy, the default: transformers' continuation, and every field the JSON line promises.
for model in tiny_gpt2 tiny_llama; do
  "$generate" --model "$data/$model" --prompt "$prompt" --max-new-tokens 20 --json > "$model.json"
  check_json "$model.json" \
    "j['prompt_ids'] == g['$model']['text_prompt_ids']" \
    "j['completion_ids'] == g['$model']['text_completion_ids']" \
    "j['completion'] == g['$model']['text_completion']" \
    "all(k in j for k in ['prefill_tokens_per_s', 'decode_tokens_per_s', 'peak_rss_mb', 'quantize', 'kernel'])" \
    "j['quantize'] == 'none' and j['device'] == 'cpu' and j['prefill_tokens'] == 21 and j['decode_tokens'] == 19" \
    "j['prefill_tokens_per_s'] > 0 and j['decode_tokens_per_s'] > 0 and j['peak_rss_mb'] > 0"
  # The streamed text: the prompt, then the completion as it is made, then a newline.
  "$generate" --model "$data/$model" --prompt "$prompt" --max-new-tokens 20 --greedy > "$model.txt"
  python3 - "$model.txt" "$data/generate_goldens.json" "$model" "$prompt" <<'PY' || fail "$model: streamed text"
import json, sys
text = open(sys.argv[1], "rb").read().decode("utf-8")
expected = sys.argv[4] + json.load(open(sys.argv[2]))[sys.argv[3]]["text_completion"] + "\n"
sys.exit(0 if text == expected else f"  got {text!r}\n  expected {expected!r}")
PY
done

# Sampling: the same seed gives the same tokens, another seed others; --stop ends the text at the
# first stop token (here the greedy continuation's third).
sample=(--model "$llama" --prompt "$prompt" --max-new-tokens 20 --temperature 0.9 --top-k 50 --top-p 0.95 --json)
"$generate" "${sample[@]}" --seed 7 > seed7a.json
"$generate" "${sample[@]}" --seed 7 > seed7b.json
"$generate" "${sample[@]}" --seed 8 > seed8.json
check_json seed7a.json "j['completion_ids'] == json.load(open('seed7b.json'))['completion_ids']" \
  "j['completion_ids'] != json.load(open('seed8.json'))['completion_ids']" \
  "j['completion_ids'] != g['tiny_llama']['text_completion_ids']"
stop=$(python3 -c "import json; print(json.load(open('$data/generate_goldens.json'))['tiny_gpt2']['text_completion_ids'][2])")
"$generate" --model "$gpt2" --prompt "$prompt" --max-new-tokens 20 --stop "$stop" --json > stop.json
check_json stop.json "j['completion_ids'] == g['tiny_gpt2']['text_completion_ids'][:3]"

# Quantized on load, and a folder transformers saved through bitsandbytes, which names its own mode.
"$generate" --model "$llama" --prompt "$prompt" --max-new-tokens 8 --quantize nf4 --json > nf4.json
check_json nf4.json "j['quantize'] == 'nf4' and len(j['completion_ids']) == 8"
"$generate" --model "$data/tiny_llama_nf4_bnb" --prompt "$prompt" --max-new-tokens 8 --json > bnb.json
check_json bnb.json "j['quantize'].startswith('nf4') and len(j['completion_ids']) == 8"

# --device cuda: transformers' greedy tokens on a GPU, or a refusal that says which of build or
# machine lacks it.
status=0
"$generate" --model "$gpt2" --prompt "$prompt" --max-new-tokens 20 --device cuda --json > cuda.json 2> cuda_err.txt ||
  status=$?
if [ "$status" -eq 0 ]; then
  check_json cuda.json "j['device'] == 'cuda' and j['kernel'] == 'cuda' and j['peak_device_mb'] > 0" \
    "j['completion_ids'] == g['tiny_gpt2']['text_completion_ids']"
  "$generate" --model "$llama" --prompt "$prompt" --max-new-tokens 20 --device cuda --json > cuda_llama.json
  check_json cuda_llama.json "j['completion_ids'] == g['tiny_llama']['text_completion_ids']"
elif [ "$status" -ne 2 ] || ! grep -qE -- "--device cuda: (this build of weft has no CUDA backend|expected a CUDA GPU, got none)" cuda_err.txt ||
  [ -s cuda.json ]; then
  fail "--device cuda -> status $status, stderr: $(cat cuda_err.txt)"
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "weft-generate: every check passed"
