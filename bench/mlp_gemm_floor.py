#!/usr/bin/env python3
"""The GEMM floor of the example MLP in PyTorch: one epoch's matrix products and nothing else.

Runs exactly the products one epoch of bench/mlp_torch.py makes (784-512-512-10, batch 128,
469 steps: three forward linears, the two input gradients the second and third layer need and
three weight gradients; then the evaluation forward over the 10000 test images) on PyTorch's
own BLAS with its default threads, and prints one JSON line with the seconds they take. No
program that makes these products through the same BLAS can train an epoch faster than this;
comparing it with mlp_torch.py's whole epoch shows how much of PyTorch's time is GEMM.
"""
import json
import time

import torch

from mlp_torch import openblas

STEPS, BATCH, TEST = 469, 128, 10000
SIZES = [784, 512, 512, 10]


def products(rows, backward):
    """The products of one step with `rows` rows, as calls (forward with its bias, as nn.Linear)."""
    calls = []
    for fan_in, fan_out in zip(SIZES, SIZES[1:]):
        x, w, b, g = torch.rand(rows, fan_in), torch.rand(fan_out, fan_in), torch.rand(fan_out), torch.rand(rows, fan_out)
        calls.append(lambda x=x, w=w, b=b: torch.addmm(b, x, w.t()))  # forward: b + x · wᵀ
        if backward:
            calls.append(lambda g=g, x=x: torch.mm(g.t(), x))            # weight gradient: gᵀ · x
            if fan_in != SIZES[0]:
                calls.append(lambda g=g, w=w: torch.mm(g, w))            # input gradient (not for layer 1)
    return calls


def seconds(calls, repeats):
    for call in calls:
        call()
    start = time.perf_counter()
    for _ in range(repeats):
        for call in calls:
            call()
    return (time.perf_counter() - start) / repeats


def main():
    blas = openblas()
    blas_threads = blas.openblas_get_num_threads() if blas is not None else None
    with torch.no_grad():
        train = seconds(products(BATCH, True), 100) * STEPS
        evaluation = seconds(products(TEST, False), 3)
    print(json.dumps({"bench": "mlp_gemm_floor", "version": torch.__version__, "threads": torch.get_num_threads(),
                      "blas_threads": blas_threads, "train_gemm_seconds_per_epoch": round(train, 3),
                      "eval_gemm_seconds_per_epoch": round(evaluation, 3),
                      "gemm_seconds_per_epoch": round(train + evaluation, 3)}))


if __name__ == "__main__":
    main()
