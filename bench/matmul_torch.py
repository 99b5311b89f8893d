#!/usr/bin/env python3
"""PyTorch's side of bench_matmul: the same products, layouts and dtypes, timed the same way.

C = A·B for the example MLP's products (forward and backward, in the layouts training uses:
x·Wᵀ with W stored (out, in), gᵀ·x with g stored (batch, out)) and for squares, in float32 and
with bfloat16 inputs (bfloat16 output, as torch.matmul gives). Each case: a warm-up call, then
three rounds of calls of at least --min-time / 3 seconds; the median call gives GFLOP/s =
2·M·N·K / t. Prints one JSON line: {"bench": "matmul_torch", "torch": version, ...}.

Runs with any PyTorch: the PyPI wheel (MKL / oneDNN) and Debian's python3-torch (OpenBLAS) alike.
"""
import argparse
import json
import statistics
import time

import torch

# name, M, K, N, A stored transposed, B stored transposed (as in bench/bench_matmul.cpp)
CASES = [
    ("mlp fwd1 x·W1t", 128, 784, 512, False, True), ("mlp fwd2 h·W2t", 128, 512, 512, False, True),
    ("mlp fwd3 h·W3t", 128, 512, 10, False, True), ("mlp dX3 g·W3", 128, 10, 512, False, False),
    ("mlp dW3 gt·h", 10, 128, 512, True, False), ("mlp dX2 g·W2", 128, 512, 512, False, False),
    ("mlp dW2 gt·h", 512, 128, 512, True, False), ("mlp dW1 gt·x", 512, 128, 784, True, False),
    ("gpt dW qkv gt·x", 384, 768, 128, True, False), ("gpt dW proj gt·y", 128, 768, 128, True, False),
    ("gpt dW fc gt·x", 512, 768, 128, True, False),
    ("square 512", 512, 512, 512, False, False), ("square 1024", 1024, 1024, 1024, False, False),
    ("square 2048", 2048, 2048, 2048, False, False),
]
ROUNDS = 3


def median_seconds(fn, min_time):
    fn()
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        while len(times) < 2 or time.perf_counter() - start < min_time / ROUNDS:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--min-time", type=float, default=0.6)
    p.add_argument("--dtype", choices=["fp32", "bf16", "both"], default="both")
    p.add_argument("--only", default="")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    dtypes = {"fp32": [torch.float32], "bf16": [torch.bfloat16], "both": [torch.float32, torch.bfloat16]}[args.dtype]
    results = []
    with torch.no_grad():
        for dtype in dtypes:
            for name, m, k, n, a_t, b_t in CASES:
                if args.only and args.only not in name:
                    continue
                a = (torch.randn(k, m).t() if a_t else torch.randn(m, k)).to(dtype)
                b = (torch.randn(n, k).t() if b_t else torch.randn(k, n)).to(dtype)
                t = median_seconds(lambda: torch.matmul(a, b), args.min_time)
                results.append({"name": name, "dtype": "fp32" if dtype == torch.float32 else "bf16",
                                "m": m, "k": k, "n": n, "gflops": round(2.0 * m * n * k / t * 1e-9, 2)})
    print(json.dumps({"bench": "matmul_torch", "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "backend": [line.strip(" -") for line in torch.__config__.show().splitlines()
                                  if any(w in line for w in ("Math Kernel", "OpenBLAS", "MKL-DNN", "capability"))],
                      "cases": results}, ensure_ascii=False))


if __name__ == "__main__":
    main()
