#!/usr/bin/env bash
# The main job: installs what is missing, builds weft in Release and trains the example MLP on
# Fashion-MNIST. Extra arguments go to the trainer (see `build/examples/mlp_train --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build --target mlp_train
./build/examples/mlp_train "$@"
