#!/usr/bin/env python3
"""The PyTorch peer of bench_distributed's step mode: the example MLP (784-512-512-10), global
batch 128 over N ranks on Gloo, one thread per rank, AdamW, random data. DDP, or FSDP2
(fully_shard on a CPU device mesh, one unit per Linear plus the root: PyTorch's FSDP1 refuses the
CPU). Prints rank 0's median and p90 step time over 20 steps after 3 warm-up steps, and the bytes
each step wrote (/proc/self/io wchar: Gloo's socket writes, counted as in weft's run). With
--cpu-bind each rank runs on its own share of the CPUs, split as `weft-run --cpu-bind` splits them.

Usage: python3 bench/distributed_torch.py --strategy ddp|fsdp [--ranks 2] [--steps 20] [--cpu-bind]
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def bytes_written():
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("wchar:"):
                return int(line.split()[1])
    return 0


def cpu_share(cpus, ranks, rank):
    """Contiguous shares differing by at most one, larger first (distributed::cpu_shares)."""
    cpus = sorted(cpus)
    base, extra = divmod(len(cpus), ranks)
    start = rank * base + min(rank, extra)
    return cpus[start:start + base + (1 if rank < extra else 0)]


def run(rank, world, args, port, results, cpus):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if args.cpu_bind:
        os.sched_setaffinity(0, cpu_share(cpus, world, rank))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 10))
    if args.strategy == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=args.bucket_view)
        if args.comm_hook != "none":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            hook = default_hooks.fp16_compress_hook if args.comm_hook == "fp16" else default_hooks.bf16_compress_hook
            model.register_comm_hook(state=None, hook=hook)
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh("cpu", (world,))
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1 + rank)
    x = torch.rand(128 // world, 784, generator=g)
    y = torch.randint(0, 10, (128 // world,), generator=g)
    times, written = [], 0
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            written = bytes_written()
        start = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if step >= args.warmup:
            times.append((time.perf_counter() - start) * 1000)
    written = (bytes_written() - written) // args.steps
    times.sort()
    if rank == 0:
        results.put({"program": "pytorch " + torch.__version__, "mode": "step", "strategy": args.strategy,
                     "ranks": world, "cpus_per_rank": len(os.sched_getaffinity(0)), "bucket_view": args.bucket_view,
                     "comm_hook": args.comm_hook,
                     "median_ms": times[len(times) // 2], "p90_ms": times[len(times) * 9 // 10],
                     "bytes_written_per_step": written})
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--strategy", choices=["ddp", "fsdp"], default="ddp")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--port", type=int, default=29611)
    p.add_argument("--cpu-bind", action="store_true")
    p.add_argument("--bucket-view", action="store_true", help="DDP's gradient_as_bucket_view")
    p.add_argument("--comm-hook", choices=["none", "fp16", "bf16"], default="none",
                   help="DDP's fp16_compress_hook or bf16_compress_hook")
    args = p.parse_args()
    if (args.bucket_view or args.comm_hook != "none") and args.strategy != "ddp":
        p.error("--bucket-view and --comm-hook are DDP options, got --strategy " + args.strategy)
    cpus = os.sched_getaffinity(0)
    if args.cpu_bind and len(cpus) < args.ranks:
        p.error(f"--cpu-bind needs at least one CPU per rank: {args.ranks} ranks, {len(cpus)} CPU(s)")
    os.environ["OMP_NUM_THREADS"] = "1"
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    mp.spawn(run, args=(args.ranks, args, args.port, results, cpus), nprocs=args.ranks, join=True)
    print(json.dumps(results.get()))


if __name__ == "__main__":
    main()
