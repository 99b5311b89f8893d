#!/usr/bin/env python3
"""The peer for examples/mlp_train: the same MLP, data, optimiser and schedule in PyTorch.

Loads Fashion-MNIST from the same IDX.gz files, keeps the whole set in memory as float32 (no
DataLoader, so PyTorch is timed at its fastest), trains 784-512-512-10 with AdamW for the given
epochs and prints one JSON line: wall time of training (data loading excluded, evaluation
included, as in weft's example), final test accuracy, and the settings.

Threads: Debian's PyTorch runs its own ops on torch.get_num_threads() threads but hands matrix
products to the system OpenBLAS, whose pthread pool has its own size (all cores by default,
whatever torch says). Both counts are reported; --threads N sets both.
"""
import argparse
import ctypes
import gzip
import json
import time

import numpy as np
import torch


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def openblas():
    """The OpenBLAS that PyTorch's BLAS calls land in, or None when it is not OpenBLAS."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_num_threads.restype = ctypes.c_int
        return lib
    except OSError:
        return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--precision", default="32-true", choices=["32-true", "bf16-mixed", "64-true"])
    args = p.parse_args()
    blas = openblas()
    if args.threads:
        torch.set_num_threads(args.threads)
        if blas is not None:
            blas.openblas_set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    d = args.data_dir
    x_train = torch.from_numpy(read_idx(f"{d}/train-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255.0)
    y_train = torch.from_numpy(read_idx(f"{d}/train-labels-idx1-ubyte.gz").astype(np.int64))
    x_test = torch.from_numpy(read_idx(f"{d}/t10k-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255.0)
    y_test = torch.from_numpy(read_idx(f"{d}/t10k-labels-idx1-ubyte.gz").astype(np.int64))

    h = args.hidden
    model = torch.nn.Sequential(torch.nn.Linear(784, h), torch.nn.ReLU(), torch.nn.Linear(h, h), torch.nn.ReLU(),
                                torch.nn.Linear(h, 10))
    if args.precision == "64-true":  # as weft's 64-true: float64 weights, inputs and products
        model = model.double()
        x_train, x_test = x_train.double(), x_test.double()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    mixed = args.precision == "bf16-mixed"

    start = time.perf_counter()
    n = x_train.shape[0]
    for _ in range(args.epochs):
        order = torch.randperm(n)
        model.train()
        for i in range(0, n, args.batch_size):
            idx = order[i:i + args.batch_size]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed):
                loss = torch.nn.functional.cross_entropy(model(x_train[idx]), y_train[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed):
            correct = (model(x_test).argmax(1) == y_test).sum().item()
    elapsed = time.perf_counter() - start
    print(json.dumps({"peer": "pytorch", "version": torch.__version__, "threads": torch.get_num_threads(),
                      "blas_threads": blas.openblas_get_num_threads() if blas is not None else None,
                      "precision": args.precision, "epochs": args.epochs, "seconds": round(elapsed, 3),
                      "test_accuracy": correct / x_test.shape[0]}))


if __name__ == "__main__":
    main()
