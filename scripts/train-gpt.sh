#!/usr/bin/env bash
# Trains the example character-level GPT on the King James Bible: installs what is missing
# (Debian's bible-kjv, whose `bible` program holds the text, among weft's build packages), writes
# the whole text to data/kjv.txt if it is not there — one verse per line, each after its reference
# ("Ge1:1 In the beginning ..."), 4.4 MB, 73 distinct characters — builds weft in Release and runs
# gpt_train on it. Extra arguments go to the trainer (see `build/examples/gpt_train --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh  # bible-kjv among them
text=data/kjv.txt
if [ ! -s "$text" ]; then
  mkdir -p data
  # -f turns the pretty-printing off: a verse per line with its reference, no line wrapping.
  bible -f Gen1:1-Rev22:21 > "$text.tmp"
  mv "$text.tmp" "$text"
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build --target gpt_train
./build/examples/gpt_train --data "$text" "$@"
