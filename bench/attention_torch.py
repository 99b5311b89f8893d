#!/usr/bin/env python3
"""Peer of bench/bench_attention.cpp, measured by bench/compare_attention.sh in the same run.

PyTorch's torch.nn.functional.scaled_dot_product_attention on the CPU (its flash-attention kernel
for float32 and bfloat16) at bench_attention's cases: causal, batch 1, 12 heads x 64, contexts
256, 1024 and 4096, float32 and bfloat16; q, k, v are (1, T, 12, 64) leaves viewed as
(1, 12, T, 64). Columns as bench_attention's: median forward (no grad) and forward + backward in
ms, and the forward's peak extra memory (VmHWM growth over the case's first forward, after resetting
it through /proc/self/clear_refs), in MiB.

Prints a table, then one line of JSON starting with {"bench":"attention_torch".

Usage: attention_torch.py [--threads N] [--min-time S] [--quick]   (torch 2.15)
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F


def median_ms(fn, min_time):
    fn()
    calls, total = [], 0.0
    while total < min_time or len(calls) < 5:
        t0 = time.perf_counter()
        fn()
        calls.append(time.perf_counter() - t0)
        total += calls[-1]
    return sorted(calls)[len(calls) // 2] * 1e3


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return -1


def peak_extra_mib(fn):
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return -1.0
    before = status_kib("VmRSS:")
    fn()
    return (status_kib("VmHWM:") - before) / 1024.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--min-time", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    heads, head_size = 12, 64
    contexts = [256, 1024] if args.quick else [256, 1024, 4096]
    out = {"bench": "attention_torch", "torch": torch.__version__, "threads": torch.get_num_threads(),
           "cpu_capability": torch.backends.cpu.get_cpu_capability(), "cases": []}
    print(f"torch {torch.__version__} SDPA (causal, batch 1, {heads} heads x {head_size}), {args.threads} threads")
    print(f"{'dtype':<9} {'T':>6} {'forward ms':>12} {'fwd+bwd ms':>16} {'peak extra MiB':>14}")
    for dtype in (torch.float32, torch.bfloat16):
        for T in contexts:
            gen = torch.Generator().manual_seed(T)
            leaves = [torch.randn(1, T, heads, head_size, generator=gen).to(dtype).requires_grad_() for _ in range(3)]
            grad = torch.randn(1, heads, T, head_size, generator=gen).to(dtype)

            def forward():
                q, k, v = (t.transpose(1, 2) for t in leaves)
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)

            def forward_no_grad():
                with torch.no_grad():
                    forward()

            def forward_backward():
                for t in leaves:
                    t.grad = None
                forward().backward(grad)

            peak = peak_extra_mib(forward_no_grad)  # first, before timings leave freed memory to reuse
            fwd = median_ms(forward_no_grad, args.min_time)
            fwd_bwd = median_ms(forward_backward, args.min_time)
            name = "float32" if dtype == torch.float32 else "bfloat16"
            print(f"{name:<9} {T:>6} {fwd:>12.3f} {fwd_bwd:>16.3f} {peak:>14.1f}")
            out["cases"].append({"dtype": name, "T": T, "forward_ms": round(fwd, 4), "fwd_bwd_ms": round(fwd_bwd, 4),
                                 "peak_extra_mib": round(peak, 2)})
    print(json.dumps(out, separators=(",", ":")))


if __name__ == "__main__":
    main()
