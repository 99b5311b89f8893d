#!/usr/bin/env bash
# Checks that mlp_train refuses every bad flag and path before it trains, with exit status 2 and
# a message that says what was expected (check_options in mlp_train.cpp). Builds a tiny
# Fashion-MNIST-shaped dataset (64 images) so it needs neither the real one nor much time.
# Usage: options_test.sh MLP_TRAIN WORK_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
program=$(realpath "$1")
work=$2
rm -rf "$work" && mkdir -p "$work/data" && cd "$work"
python3 "$here/tiny_fashion_mnist.py" data 64 64
common=(--data-dir data --hidden 8 --batch-size 32 --no-progress --plot "")
started='^epoch '
source "$here/refuses.sh"

mkfifo pipe
mkdir adir
touch afile
refuses "--seed expects a non-negative whole number, got '-1'" --seed -1
refuses "--threads expects 1 to" --threads 100000
refuses "--threads expects 1 to" --threads -3
refuses "--threads expects 1 to" --threads 0
refuses "--epochs expects at least 1, got 0" --epochs 0
refuses "--batch-size expects at least 1, got 0" --batch-size 0
refuses "--lr expects a positive number, got -0.100000" --lr -0.1
refuses "--lr expects a number, got 'inf'" --lr inf
refuses "--lr expects a number, got 'fast'" --lr fast
refuses "--gemm expects weft, eigen or openblas, got 'mkl'" --gemm mkl
# mlp_train links the core library only (mlp_train_dist adds weft_distributed).
refuses "(linked without weft_distributed) cannot run; use mlp_train_dist" --strategy ddp
refuses "(linked without weft_distributed) cannot run; use mlp_train_dist" --devices 2
refuses "--precision: [precision] " --precision 8-true
refuses "--data-dir: 'nowhere/train-images-idx3-ubyte.gz': cannot open: No such file or directory; expected a folder with the Fashion-MNIST IDX .gz files" --data-dir nowhere
refuses "--log: cannot create a file in directory 'missing'" --log missing/log.csv
refuses "--log: 'adir' is a directory; expected a regular file or a new path" --log adir
refuses "--log: 'pipe' is a named pipe (FIFO); expected a regular file or a new path" --log pipe
refuses "--checkpoint: cannot create a file in directory 'missing'" --checkpoint missing/model.safetensors
refuses "--checkpoint: cannot create a file in directory 'afile' to write 'afile/x': Not a directory" --checkpoint afile/x
refuses "--resume: 'none.safetensors': cannot open: No such file or directory" --resume none.safetensors
refuses "--resume: 'pipe' is a named pipe (FIFO); expected a regular file" --resume pipe
refuses "--plot draws the CSV log, which --log '' turned off" --log "" --plot plot.png
refuses "unknown option --epoch" --epoch 3
refuses "unknown option --bogus" --bogus
refuses "unexpected argument 'extra': mlp_train takes options only (--help lists them)" extra
refuses "unexpected argument 'extra'" --epochs 2 extra
refuses "--epochs needs a value" --epochs
refuses "--device expects cpu or cuda, got 'gpu0'" --device gpu0
refuses "--device cuda trains in one process; expected no --strategy, --devices, --num-nodes or launcher" --device cuda --strategy ddp
refuses "--device cuda trains in one process" --device cuda --devices 2
refuses "--gemm chooses the CPU's matrix library; with --device cuda the products run on cuBLAS" --device cuda --gemm eigen
refuses "--cuda-graph captures the training step on a GPU; expected --device cuda" --cuda-graph
refuses "--cuda-graph captures the training step on a GPU; expected --device cuda" --device cpu --cuda-graph
refuses "--cuda-graph cannot capture --precision 16-mixed: its loss scaler decides on the host whether a step is applied; expected 32-true, 64-true, 16-true, bf16-true or bf16-mixed" --device cuda --cuda-graph --precision 16-mixed
refuses "--cuda-graph cannot capture --precision 16: its loss scaler" --device cuda --cuda-graph --precision 16
# Without a GPU (every CPU-only build, and a CUDA build on a machine without one) cuda is refused up front.
if ! nvidia-smi -L > /dev/null 2>&1; then
  refuses "--device cuda: " --device cuda
fi

# Resuming at or past the epoch count: a real checkpoint after epoch 1.
"$program" "${common[@]}" --epochs 1 --log "" --checkpoint one.safetensors > /dev/null
refuses "--resume: 'one.safetensors' was saved after epoch 1 and --epochs is 1, so there is nothing left to train; expected --epochs above 1" --epochs 1 --resume one.safetensors
python3 -c "open('plain.safetensors', 'wb').write((2).to_bytes(8, 'little') + b'{}')"
refuses "--resume: 'plain.safetensors' has no 'epoch' entry" --epochs 2 --resume plain.safetensors
# ... and a good resume still runs.
"$program" "${common[@]}" --epochs 2 --log log.csv --resume one.safetensors > resumed.txt
grep -q '^epoch 2' resumed.txt || { echo "FAIL: the valid resume did not train epoch 2"; failures=$((failures + 1)); }
[ -f log.csv ] || { echo "FAIL: no log.csv"; failures=$((failures + 1)); }

[ "$failures" -eq 0 ] && echo "every bad option was refused before training"
exit "$failures"
