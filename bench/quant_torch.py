#!/usr/bin/env python3
"""Peers of bench/bench_quant.cpp, measured by bench/run_quant.sh in the same run.

  torch._int_mm      int8 -> int32 GEMM at bench_quant's shapes (shapes torch._int_mm refuses,
                     such as N = 10, are reported as null)
  fp32 linear        torch.nn.functional.linear at the 4-bit GEMV's shapes (batch 1) and at the
                     Linear4bit case (batch 1, 8 and 32): what an unquantized layer costs
  bnb Linear4bit     bitsandbytes.nn.Linear4bit (NF4, double quantization, float32 compute) on
                     the CPU at batch 1, 8 and 32
  bnb Linear8bitLt   bitsandbytes.nn.Linear8bitLt (int8 inference, threshold 6) on the CPU, a
                     float16 batch of 128 without outliers and with 8 outlier columns (x10), beside
                     PyTorch's fp32 linear of the batch
  training step      forward + backward to the input at batch 128: both bitsandbytes layers (the
                     Linear8bitLt in float16) and PyTorch's fp32 linear. A layer whose backward
                     leaves the input without a gradient is reported as null, with the reason:
                     bitsandbytes 0.50's CPU 4-bit product on AVX-512 BF16 CPUs (its gemv_4bit
                     kernel) has no autograd formula, so its backward returns at once and computes
                     nothing (PyTorch warns "an autograd kernel was not registered").
  bnb_linear4bit.batchN_error  the largest |y - x·Wdqᵀ| / max |x·Wdqᵀ| of bitsandbytes' output
                     against the float32 product with its own dequantized weight (taken before the
                     first forward, which on some CPUs repacks the weight): how exact its "float32
                     compute" is (weft's layer computes that product in float32)

Timing as bench_quant: a warm-up call, then calls until --min-time seconds and at least 6 calls;
the median call. Prints a table, then one line of JSON starting with {"bench":"quant_torch".

Usage: quant_torch.py [--threads N] [--min-time S] [--quick]   (torch 2.15, bitsandbytes 0.50)
"""
import argparse
import json
import time

import torch


SLOW_GOPS = 20.0          # below this, torch._int_mm is taken to be its scalar fallback
SLOW_CALL_SECONDS = 10.0  # the longest single call measured on that fallback


def median_seconds(fn, min_time):
    fn()
    calls, total = [], 0.0
    while total < min_time or len(calls) < 6:
        t0 = time.perf_counter()
        fn()
        calls.append(time.perf_counter() - t0)
        total += calls[-1]
    return sorted(calls)[len(calls) // 2]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--min-time", type=float, default=0.5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    out = {"bench": "quant_torch", "torch": torch.__version__, "threads": torch.get_num_threads(),
           "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    print(f"quant_torch: torch {torch.__version__} ({out['cpu_capability']}), {out['threads']} threads")

    shapes = [(128, 512, 784), (128, 512, 512), (128, 10, 512), (512, 512, 512), (1024, 1024, 1024)]
    if not args.quick:
        shapes += [(2048, 2048, 2048), (4096, 4096, 4096)]
    out["int_mm"] = []
    print(f"\ntorch._int_mm\n{'M':>6} {'N':>6} {'K':>6} | {'GOP/s':>10}")
    # Without AVX-512 VNNI, torch._int_mm falls back to a scalar loop (about 1 GOP/s on an AVX2
    # EPYC): once a shape runs that slowly, larger shapes whose one call would take over
    # SLOW_CALL_SECONDS are reported as skipped instead of taking many minutes each.
    slow_gops = None
    for m, n, k in shapes:
        projected = None if slow_gops is None else 2 * m * n * k / (slow_gops * 1e9)
        if projected is not None and projected > SLOW_CALL_SECONDS:
            out["int_mm"].append({"m": m, "n": n, "k": k, "gops": None,
                                  "skipped": f"one call would take ~{projected:.0f} s at the {slow_gops:.1f} GOP/s "
                                             "measured on a smaller shape"})
            print(f"{m:>6} {n:>6} {k:>6} | {'skipped':>10}  (~{projected:.0f} s per call at {slow_gops:.1f} GOP/s)")
            continue
        a = torch.randint(-127, 128, (m, k), dtype=torch.int8)
        b = torch.randint(-127, 128, (k, n), dtype=torch.int8)
        try:
            t = median_seconds(lambda: torch._int_mm(a, b), args.min_time)
            gops = 2 * m * n * k / t / 1e9
        except RuntimeError:
            gops = None
        if gops is not None and gops < SLOW_GOPS:
            slow_gops = gops
        out["int_mm"].append({"m": m, "n": n, "k": k, "gops": gops})
        print(f"{m:>6} {n:>6} {k:>6} | {gops if gops is None else round(gops, 1)!s:>10}")

    gemv_shapes = [(4096, 4096)] + ([] if args.quick else [(8192, 8192), (16384, 32768)])
    out["linear_gemv"] = []
    print(f"\nfp32 linear, batch 1\n{'N':>6} {'K':>6} | {'ms':>10}")
    with torch.no_grad():
        for n, k in gemv_shapes:
            w = torch.empty(n, k).uniform_(-1, 1)
            x = torch.randn(1, k)
            t = median_seconds(lambda: torch.nn.functional.linear(x, w), args.min_time)
            out["linear_gemv"].append({"n": n, "k": k, "seconds": t})
            print(f"{n:>6} {k:>6} | {t * 1e3:>10.3f}")
            del w

        features = 1024 if args.quick else 4096
        w = torch.empty(features, features).uniform_(-1, 1)
        out["linear_fp32"] = {"features": features}
        out["bnb_linear4bit"] = {"features": features}
        try:
            import bitsandbytes as bnb
        except ImportError:
            bnb = None
        layer = layer_bf16 = None
        if bnb is not None:
            def bnb_layer(compute_dtype):
                made = bnb.nn.Linear4bit(features, features, bias=False, compute_dtype=compute_dtype,
                                         compress_statistics=True, quant_type="nf4")
                made.load_state_dict({"weight": w})
                return made.to("cpu").eval()
            layer, layer_bf16 = bnb_layer(torch.float32), bnb_layer(torch.bfloat16)
            # Before the first forward: on some CPUs that repacks the weight for bitsandbytes' kernel.
            dequantized = bnb.functional.dequantize_4bit(layer.weight.data, layer.weight.quant_state).float()
            out["bnb_linear4bit"]["version"] = bnb.__version__
        print(f"\n{features} x {features} layer\n{'batch':>6} | {'fp32 ms':>10} {'bnb nf4 ms':>11} {'bnb bf16 ms':>11}")
        for batch in (1, 8, 32):
            x = torch.randn(batch, features)
            t = median_seconds(lambda: torch.nn.functional.linear(x, w), args.min_time)
            out["linear_fp32"][f"batch{batch}_ms"] = t * 1e3
            tb = median_seconds(lambda: layer(x), args.min_time) if layer is not None else None
            out["bnb_linear4bit"][f"batch{batch}_ms"] = None if tb is None else tb * 1e3
            # The same layer with a bfloat16 compute dtype on a bfloat16 batch.
            x_bf16 = x.to(torch.bfloat16)
            tb16 = median_seconds(lambda: layer_bf16(x_bf16), args.min_time) if layer_bf16 is not None else None
            out["bnb_linear4bit"][f"bf16_batch{batch}_ms"] = None if tb16 is None else tb16 * 1e3
            error = None
            if layer is not None:
                exact = x @ dequantized.t()
                error = ((layer(x).float() - exact).abs().max() / exact.abs().max()).item()
            out["bnb_linear4bit"][f"batch{batch}_error"] = error
            print(f"{batch:>6} | {t * 1e3:>10.3f} {'n/a' if tb is None else f'{tb * 1e3:.3f}':>11}"
                  f" {'n/a' if tb16 is None else f'{tb16 * 1e3:.3f}':>11}"
                  f"  (relative error {'n/a' if error is None else f'{error:.1e}'})")

        out["linear8bit"] = {"features": features, "batch": 128, "cases": []}
        layer8 = None
        if bnb is not None:
            layer8 = bnb.nn.Linear8bitLt(features, features, bias=False, has_fp16_weights=False, threshold=6.0)
            layer8.load_state_dict({"weight": w.half()})
            layer8 = layer8.to("cpu").eval()
        x = torch.randn(128, features)
        out["linear8bit"]["fp32_ms"] = median_seconds(lambda: torch.nn.functional.linear(x, w), args.min_time) * 1e3
        print(f"\nLinear8bitLt, float16 batch of 128 (fp32 linear: {out['linear8bit']['fp32_ms']:.3f} ms)\n"
              f"{'outliers':>9} | {'bnb ms':>10}")
        for outliers in (0, 8):
            x = torch.randn(128, features)
            for c in range(outliers):
                x[:, c * 7] *= 10
            xh = x.half()
            tb = median_seconds(lambda: layer8(xh), args.min_time) if layer8 is not None else None
            out["linear8bit"]["cases"].append({"outliers": outliers, "bnb_ms": None if tb is None else tb * 1e3})
            print(f"{outliers:>9} | {'n/a' if tb is None else f'{tb * 1e3:.3f}':>10}")

    # Forward + backward to the input (autograd on, the weights frozen), batch 128.
    g = torch.randn(128, features)
    x = torch.randn(128, features, requires_grad=True)
    xh = torch.randn(128, features).half().requires_grad_(True)

    def step(module, inp, grad):
        inp.grad = None
        module(inp).backward(grad)

    def timed_step(module, inp, grad, name):
        step(module, inp, grad)
        if inp.grad is None:
            print(f"{name}: backward left the input without a gradient; not timed")
            return None
        return median_seconds(lambda: step(module, inp, grad), args.min_time) * 1e3

    out["train_step"] = {"batch": 128,
                         "fp32_ms": median_seconds(lambda: step(lambda v: torch.nn.functional.linear(v, w), x, g),
                                                   args.min_time) * 1e3,
                         "bnb_linear4bit_ms": None, "bnb_linear8bit_ms": None}
    if layer is not None:
        out["train_step"]["bnb_linear4bit_ms"] = timed_step(layer, x, g, "bnb Linear4bit")
        out["train_step"]["bnb_linear8bit_ms"] = timed_step(layer8, xh, g.half(), "bnb Linear8bitLt")
    ts = out["train_step"]
    print(f"\nforward + backward to the input, batch 128: fp32 linear {ts['fp32_ms']:.3f} ms, bnb Linear4bit "
          f"{ts['bnb_linear4bit_ms'] or float('nan'):.3f} ms, bnb Linear8bitLt {ts['bnb_linear8bit_ms'] or float('nan'):.3f} ms")
    print(json.dumps(out, separators=(",", ":")))


if __name__ == "__main__":
    main()
