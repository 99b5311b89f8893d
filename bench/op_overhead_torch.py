#!/usr/bin/env python3
"""Per-op overhead of PyTorch on the op sequence of bench/bench_op_overhead.cpp.

Same tensors (x: (4,) randn, w: (4,) 0.25, both requiring grad), same blocks
(h = x; K/4 times h = sum(relu(mul(add(h, w), w))); optionally h.backward()), same three modes
and the same median over repeats, so its figures sit next to weft's as a ratio. The Python
interpreter's cost per op is part of PyTorch's figure: that is what a PyTorch user pays.

Output: a table, then one line of JSON starting with {"bench":"op_overhead".
"""
import argparse
import json
import statistics
import time

import torch


def run(mode, x, w, ops, every):
    add, mul, relu, tsum = torch.add, torch.mul, torch.relu, torch.sum
    t0 = time.perf_counter()
    for _ in range(0, ops, every):
        with torch.set_grad_enabled(mode != "no_grad"):
            h = x
            for _ in range(0, every, 4):
                h = tsum(relu(mul(add(h, w), w)))
            if mode == "with_backward":
                h.backward()
    return time.perf_counter() - t0


def median_us_per_op(mode, x, w, args):
    run(mode, x, w, max(args.ops // 10, args.every), args.every)  # warm-up
    ops = args.ops // args.every * args.every
    return statistics.median(run(mode, x, w, ops, args.every) / ops * 1e6 for _ in range(args.repeats))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=200000, help="ops per timed run (default 200000)")
    p.add_argument("--every", type=int, default=16, help="ops per graph, then backward; multiple of 4")
    p.add_argument("--repeats", type=int, default=5, help="timed runs; the median is reported")
    args = p.parse_args()
    if args.every < 4 or args.every % 4 or args.ops < args.every or args.repeats < 1:
        p.error("need --every a positive multiple of 4, --ops >= --every, --repeats >= 1")

    torch.manual_seed(1234)
    x = torch.randn(4, dtype=torch.float32, requires_grad=True)
    w = torch.full((4,), 0.25, dtype=torch.float32, requires_grad=True)
    figures = {mode: median_us_per_op(mode, x, w, args) for mode in ("no_grad", "forward", "with_backward")}

    print(f"op_overhead_torch: PyTorch {torch.__version__}, 4-element float32 ops (add, mul, relu, sum), "
          f"backward every {args.every} ops")
    print(f"median of {args.repeats} runs of {args.ops} ops\n")
    print(f"{'mode':36s} {'us/op':>10s}")
    print(f"{'no_grad (op only)':36s} {figures['no_grad']:10.3f}")
    print(f"{'forward (op + graph recording)':36s} {figures['forward']:10.3f}")
    print(f"{'with_backward (forward + backward)':36s} {figures['with_backward']:10.3f}\n")
    print(json.dumps({"bench": "op_overhead", "impl": "torch", "version": torch.__version__, "ops": args.ops,
                      "every": args.every, "repeats": args.repeats,
                      **{f"us_per_op_{m}": round(v, 4) for m, v in figures.items()}}, separators=(",", ":")))


if __name__ == "__main__":
    main()
