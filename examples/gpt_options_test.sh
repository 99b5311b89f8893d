#!/usr/bin/env bash
# Checks that gpt_train refuses every bad flag, path and text before it trains, with exit status 2
# and a message that says what was expected (check_options in gpt_train.cpp). Writes its own
# small texts, so it needs neither the KJV text nor much time.
# Usage: gpt_options_test.sh GPT_TRAIN WORK_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
program=$(realpath "$1")
work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work"
python3 - <<'PY'
import random
random.seed(1)
words = ["in", "the", "beginning", "was", "light", "and", "darkness", "upon", "face", "of", "waters"]
lines = [" ".join(random.choice(words) for _ in range(12)) + "." for _ in range(200)]
open("text.txt", "w").write("\n".join(lines) + "\n")
# The same words with one more character, 'Z': another vocabulary.
open("other.txt", "w").write("Z" + "\n".join(lines) + "\n")
open("short.txt", "w").write("in the beginning\n" * 4)  # 68 characters
open("empty.txt", "w").write("")
open("oneline.txt", "w").write("the cat sat on the mat. " * 30)  # 11 characters, no newline
open("latin1.txt", "wb").write(("caf" + "e" * 400).encode() + b"\xe9 au lait\n" + b"x" * 400)
open("overlong.txt", "wb").write(b"ab\xc0\xafcd" + b"y" * 400)
PY
common=(--data text.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 8 --batch-size 4 --steps 2
        --eval-interval 2 --eval-iters 1 --sample-tokens 0 --no-progress --plot "")
started='^step '
source "$here/refuses.sh"

mkfifo pipe
mkdir adir
touch afile
refuses "unknown option --step" --step 3
refuses "unknown option --bogus" --bogus
refuses "--steps needs a value" --steps
refuses "unexpected argument 'kjv.txt': gpt_train takes options only" kjv.txt
refuses "--steps expects a whole number, got 'ten'" --steps ten
refuses "--steps expects at least 1, got 0" --steps 0
refuses "--batch-size expects at least 1, got 0" --batch-size 0
refuses "--block-size expects a whole number, got '1.5'" --block-size 1.5
refuses "--n-layer expects at least 1, got 0" --n-layer 0
refuses "--n-embd expects at least 1, got -4" --n-embd -4
refuses "--n-head 3 does not divide --n-embd 16; expected a head count that divides the width" --n-head 3
refuses "--dropout expects 0 <= p < 1, got 1.000000" --dropout 1
refuses "--lr expects a positive number, got -0.001000" --lr -0.001
refuses "--lr expects a number, got 'inf'" --lr inf
refuses "--lr expects a number, got 'nan'" --lr nan
refuses "--min-lr expects 0 to --lr" --min-lr 0.1
refuses "--weight-decay expects 0 or more" --weight-decay -1
refuses "--grad-clip expects 0 (off) or more" --grad-clip -1
refuses "--seed expects a non-negative whole number, got '-1'" --seed -1
refuses "--threads expects 1 to" --threads 0
refuses "--threads expects 1 to" --threads 100000
refuses "--eval-interval expects at least 1, got 0" --eval-interval 0
refuses "--eval-iters expects at least 1, got 0" --eval-iters 0
refuses "--warmup-steps expects 0 or more" --warmup-steps -1
refuses "--lr-decay-steps expects at least 1, got 0" --lr-decay-steps 0
refuses "--precision: [precision] " --precision 8-true
refuses "--strategy expects auto, ddp or fsdp, got 'zero'" --strategy zero
refuses "--device expects cpu or cuda, got 'gpu0'" --device gpu0
refuses "--device cuda trains in one process" --device cuda --strategy ddp
refuses "--temperature expects a positive number, got 0.000000" --temperature 0
refuses "--temperature expects a positive number, got -1.000000" --temperature -1
refuses "--top-k expects 1 to the vocabulary size" --top-k 0
refuses "--top-k expects 1 to the vocabulary size" --top-k 1000
refuses "--sample-tokens expects 0 or more" --sample-tokens -5
refuses "--prompt: the character 'Q' is not in the text's vocabulary" --prompt "Queen"
refuses "--prompt expects at least one character" --prompt ""
refuses "--prompt: the character U+0009 is not in the text's vocabulary" --prompt "$(printf 'in\tthe')"
# The text: missing, a pipe, empty, too short, not UTF-8.
refuses "--data: 'nowhere.txt': cannot open: No such file or directory; expected a UTF-8 text file" --data nowhere.txt
refuses "--data: 'pipe' is a named pipe (FIFO); expected a regular file" --data pipe
refuses "--data: 'empty.txt' is empty; expected a UTF-8 text" --data empty.txt
refuses "--data: 'short.txt' has 68 characters; expected at least 90" --data short.txt
refuses "expected UTF-8 text, got an invalid byte sequence at byte offset 403 (byte 0xe9)" --data latin1.txt
refuses "expected UTF-8 text, got an invalid byte sequence at byte offset 2 (byte 0xc0)" --data overlong.txt
# The files to write.
refuses "--log: cannot create a file in directory 'missing'" --log missing/log.csv
refuses "--log: 'adir' is a directory; expected a regular file or a new path" --log adir
refuses "--checkpoint: cannot create a file in directory 'missing'" --checkpoint missing/model.safetensors
refuses "--checkpoint: cannot create a file in directory 'afile' to write 'afile/x': Not a directory" --checkpoint afile/x
refuses "--plot draws the CSV log, which --log '' turned off" --log "" --plot plot.png
# QLoRA flags.
refuses "--finetune: 'none.safetensors': cannot open: No such file or directory" --finetune none.safetensors
refuses "--quantize expects nf4, nf4-dq, fp4 or fp4-dq, got 'int3'" --finetune none.safetensors --quantize int3
refuses "--lora-rank expects at least 1, got 0" --finetune none.safetensors --lora-rank 0
refuses "--lora-rank sets up QLoRA fine-tuning; expected it with --finetune CHECKPOINT" --lora-rank 4
refuses "--quantize sets up QLoRA fine-tuning; expected it with --finetune CHECKPOINT" --quantize fp4
refuses "--finetune computes in the 4-bit plugin's bfloat16; expected no --precision, got 'bf16-mixed'" \
  --finetune none.safetensors --precision bf16-mixed

# Checkpoints: missing, not one of this program's, finished, another vocabulary or shape.
refuses "--resume: 'none.safetensors': cannot open: No such file or directory" --resume none.safetensors
refuses "--resume: 'pipe' is a named pipe (FIFO); expected a regular file" --resume pipe
python3 -c "open('plain.safetensors', 'wb').write((2).to_bytes(8, 'little') + b'{}')"
refuses "--resume: 'plain.safetensors' has no 'step' entry; expected a checkpoint saved by gpt_train --checkpoint" \
  --resume plain.safetensors
"$program" "${common[@]}" --log "" --checkpoint two.safetensors > /dev/null
refuses "--resume: 'two.safetensors' was saved after step 2 and --steps is 2, so there is nothing left to train" \
  --resume two.safetensors
refuses "--resume: 'two.safetensors' was trained on a text with another vocabulary" --steps 4 --resume two.safetensors \
  --data other.txt
refuses "--resume: 'two.safetensors' holds a model with --n-embd 16, not 32" --steps 4 --resume two.safetensors \
  --n-embd 32
refuses "--resume: 'two.safetensors' holds a model with --n-layer 1, not 2" --steps 4 --resume two.safetensors \
  --n-layer 2
refuses "--block-size 16 is longer than the 8 positions of the model in 'two.safetensors'; expected at most 8" \
  --steps 4 --resume two.safetensors --block-size 16
refuses "--finetune: 'two.safetensors' was trained on a text with another vocabulary" --finetune two.safetensors \
  --data other.txt
refuses "--finetune starts new adapters from a trained model; expected no --resume" --finetune two.safetensors \
  --resume two.safetensors

# --help lists every flag this test passes, and exits 0.
"$program" --help > help.txt
for flag in --data --steps --batch-size --block-size --n-layer --n-head --n-embd --dropout --lr --min-lr --warmup-steps \
            --lr-decay-steps --weight-decay --grad-clip --seed --threads --eval-interval --eval-iters --precision \
            --strategy --devices --device --checkpoint --resume --log --plot --sample-tokens --temperature --top-k \
            --prompt --finetune --quantize --lora-rank --lora-alpha --no-progress; do
  grep -q -- "^  $flag " help.txt || { echo "FAIL: --help does not list $flag"; failures=$((failures + 1)); }
done

# A text of one line and fewer than 20 characters samples with the defaults: from its first
# character (there is no newline to start from), among all of its 11 characters.
"$program" "${common[@]}" --data oneline.txt --log "" --sample-tokens 12 > oneline_out.txt ||
  { echo "FAIL: the defaults refused a one-line text of 11 characters"; failures=$((failures + 1)); }
grep -qx -- '---- sample ----' oneline_out.txt || { echo "FAIL: no sample of the one-line text"; failures=$((failures + 1)); }

# ... and a good resume still runs, with a shorter context than the model's positions.
"$program" "${common[@]}" --steps 4 --log log.csv --resume two.safetensors --block-size 6 > resumed.txt
grep -q '^step 4: train loss' resumed.txt || { echo "FAIL: the valid resume did not train to step 4"; failures=$((failures + 1)); }
[ -f log.csv ] || { echo "FAIL: no log.csv"; failures=$((failures + 1)); }

[ "$failures" -eq 0 ] && echo "every bad option was refused before training"
exit "$failures"
