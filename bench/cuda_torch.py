#!/usr/bin/env python3
"""PyTorch's figures for bench/bench_cuda.cpp, measured the same way on the same GPU.

  mlp    784-512-512-10, batch 128, AdamW, cross-entropy: fp32 eager, fp32 whole-step CUDA graph
         (torch.cuda.graphs, capturable AdamW), bf16-mixed eager (autocast); microseconds per
         step, CUDA events over --steps steps after 20 warm-up steps.
  gemm   n³ at 4096 and 8192: float32 (allow_tf32 off), tf32, bfloat16, and FP8 E4M3 × E4M3
         through torch._scaled_mm with tensorwise scales and a bfloat16 result; TFLOP/s.
  alloc  torch.empty of 1 MiB on the GPU, allocate + free pairs per second (host time), and
         torch.cuda.max_memory_reserved during the fp32 eager MLP run.

Prints a table, then one JSON line starting with {"bench":"cuda". Exits with status 2 without a
CUDA GPU.
"""
import argparse
import json
import sys
import time

BATCH = 128


def gpu_ms(torch, calls, fn):
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / calls


def mlp(torch, mode, steps):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=(mode == "fp32_graph"))
    x = torch.rand(BATCH, 784, device="cuda")
    y = torch.randint(0, 10, (BATCH,), device="cuda")

    def step():
        optimizer.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=(mode == "bf16_mixed")):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as torch.cuda.graphs asks
        for _ in range(20):
            step()
    torch.cuda.current_stream().wait_stream(side)
    run = step
    if mode == "fp32_graph":
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        run = graph.replay
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    ms = gpu_ms(torch, steps, run)
    return ms * 1e3, torch.cuda.max_memory_reserved() / 1e6


def gemm_tflops(torch, kind, n):
    torch.backends.cuda.matmul.allow_tf32 = kind == "tf32"
    calls = 10 if n >= 8192 else 30
    if kind == "fp8":
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        w = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda")
        fn = lambda: torch._scaled_mm(a, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    else:
        dtype = torch.bfloat16 if kind == "bf16" else torch.float32
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        fn = lambda: torch.matmul(a, b)
    fn()
    ms = gpu_ms(torch, calls, fn)
    torch.backends.cuda.matmul.allow_tf32 = False
    return 2.0 * n ** 3 / (ms * 1e-3) / 1e12


def alloc_pairs_per_second(torch):
    for _ in range(100):
        torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    pairs = 100000
    t0 = time.perf_counter()
    for _ in range(pairs):
        torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    return pairs / (time.perf_counter() - t0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args()
    if args.steps < 1:
        parser.error(f"--steps expects at least 1, got {args.steps}")
    try:
        import torch
    except ImportError:
        print("cuda_torch.py: needs PyTorch with CUDA (pip install torch)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("cuda_torch.py: needs a CUDA GPU, got none (torch.cuda.is_available() is False); nothing measured",
              file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    mlp_us, peak = {}, None
    for mode in ("fp32_eager", "fp32_graph", "bf16_mixed"):
        us, reserved = mlp(torch, mode, args.steps)
        mlp_us[mode] = round(us, 2)
        if mode == "fp32_eager":
            peak = reserved
    print(f"PyTorch {torch.__version__} on {gpu}\n")
    print(f"{'MLP step (784-512-512-10)':<28} {'us/step':>12}")
    for mode, us in mlp_us.items():
        print(f"{mode:<28} {us:12.1f}")
    gemm = {}
    print(f"\n{'GEMM':<10} {'4096³':>12} {'8192³':>12}")
    for kind in ("f32", "tf32", "bf16", "fp8"):
        row = [gemm_tflops(torch, kind, n) for n in (4096, 8192)]
        for n, value in zip((4096, 8192), row):
            gemm[f"{kind}_{n}"] = value
        print(f"{kind:<10} {row[0]:12.1f} {row[1]:12.1f}   TFLOP/s")
    pairs = alloc_pairs_per_second(torch)
    print(f"\nallocator: {pairs:.0f} alloc+free pairs/s (1 MiB), max_memory_reserved on the fp32 MLP run {peak:.1f} MB")
    print(json.dumps({"bench": "cuda", "program": "pytorch", "version": torch.__version__, "gpu": gpu,
                      "mlp_us": mlp_us, "gemm_tflops": gemm, "alloc_pairs_per_s": round(pairs),
                      "mlp_peak_reserved_mb": round(peak, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
