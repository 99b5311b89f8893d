#!/usr/bin/env python3
"""Turns the outputs that bench/report.sh kept (DIR/NAME.txt, DIR/commands.tsv, DIR/date) into one
Markdown table in docs/PERFORMANCE.md's format: benchmark, command, weft, peer (same run), ratio,
date. Each benchmark's figures come from its JSON line(s); a benchmark without them gets a row
that says where its output is. Ratios are printed as the benchmarks print them (time ratios
weft/peer for training steps, speed ratios for kernels; docs/PERFORMANCE.md says which is which).

Usage: report_rows.py DIR CLASS
"""
import json
import os
import sys

MLP_LARGE = ("mlp fwd1", "mlp fwd2", "mlp dX2", "mlp dW2", "mlp dW1")  # the five without a dimension of 10
SQUARES = ("square 512", "square 1024", "square 2048")


def json_lines(text, key=None, value=None):
    """Every line of text that parses as a JSON object (and has key == value, when asked)."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if key is None or obj.get(key) == value:
            found.append(obj)
    return found


def last(text, key, value):
    found = json_lines(text, key, value)
    if not found:
        raise ValueError(f"no JSON line with {key} = {value}")
    return found[-1]


def span(values, fmt="{:.0f}"):
    """'a' when every value prints alike, else 'min–max'."""
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def each(values, fmt="{:.2f}"):
    return " / ".join("—" if v is None else fmt.format(v) for v in values)


def gemm_rows(cases, dtype, peak, label):
    """One row per dtype: the MLP's five large products as a span, the squares one by one. peak is
    used where a case does not carry its own weft_percent_of_peak (bench_matmul's own JSON)."""
    by = {c["name"].split(" ")[0] + " " + c["name"].split(" ")[1]: c for c in cases if c["dtype"] == dtype}
    large = [by[n] for n in MLP_LARGE if n in by]
    squares = [by[n] for n in SQUARES if n in by]
    if not large and not squares:
        return []

    def best(c):
        peers = c.get("peers") or {"Eigen": c.get("eigen_gflops"), "OpenBLAS": c.get("openblas_gflops")}
        measured = [p for p in peers.values() if p]
        return max(measured) if measured else None

    def ratio(c):
        b = best(c)
        return c["weft_gflops"] / b if b else None

    percent = lambda c: c["weft_percent_of_peak"] if "weft_percent_of_peak" in c else 100 * c["weft_gflops"] / peak
    weft = (f"{span([c['weft_gflops'] for c in large])} GFLOP/s "
            f"({span([percent(c) for c in large])} % of peak); "
            f"squares {each([c['weft_gflops'] for c in squares], '{:.0f}')}")
    peer = f"best peer {span([best(c) for c in large])}; squares {each([best(c) for c in squares], '{:.0f}')}"
    ratios = f"{span([ratio(c) for c in large], '{:.2f}')}; {each([ratio(c) for c in squares])}"
    return [(f"{label}, MLP large / 512³ / 1024³ / 2048³", weft, peer, ratios)]


def matmul(text):
    j = last(text, "bench", "compare_matmul")
    return (gemm_rows(j["cases"], "fp32", j["peak_gflops"], "fp32 GEMM")
            + gemm_rows(j["cases"], "bf16", None, "bf16 GEMM"))  # each case carries its own % of peak


def matmul_fp64(text):
    j = last(text, "bench", "matmul")
    return gemm_rows(j["cases"], "fp64", j["peak_gflops"] / 2, "fp64 GEMM")


def mlp(text):
    j = last(text, "bench", "mlp")
    rows = []
    for precision in dict.fromkeys(r["precision"] for r in j["runs"]):
        runs = [r for r in j["runs"] if r["precision"] == precision]
        envs = " / ".join(r["openblas_coretype"] for r in runs)
        rows.append((f"example MLP, 3 epochs, {precision} (`OPENBLAS_CORETYPE` {envs})",
                     each([r["weft"]["seconds"] for r in runs]) + f" s, {100 * runs[0]['weft']['test_accuracy']:.2f} %",
                     "PyTorch " + each([r["pytorch"]["seconds"] for r in runs]) + " s",
                     each([r["time_ratio_weft_over_pytorch"] for r in runs], "{:.3f}")))
    return rows


def contention(text):
    j = last(text, "bench", "contention_mlp")
    peer = f"PyTorch {j['pytorch']['ratio']:.2f}×" if j.get("pytorch") else "—"
    return [("one epoch beside one busy process: busy / idle",
             f"{j['weft']['idle_s']:.2f} s idle, {j['weft']['busy_s']:.2f} s busy: {j['weft']['ratio']:.2f}×", peer, "—")]


def quant(text):
    j = last(text, "bench", "quant_summary")
    i8, gv, ex = j["int8_gemm"], j["gemv_4bit"], j["gemv_4bit_exact"]
    l4 = [j["linear4bit"][f"batch{b}"] for b in (1, 8, 32)]
    l4b = [j["linear4bit_bf16"][f"batch{b}"] for b in (1, 8, 32)]
    l8, ts = j["linear8bit"], j["train_step"]
    shapes = " / ".join(f"{c['m']}×{c['n']}×{c['k']}" for c in i8)
    return [
        (f"int8 GEMM {shapes}", each([c["weft_gops"] for c in i8], "{:.0f}") + " GOP/s",
         "`torch._int_mm` " + each([c["torch_gops"] for c in i8], "{:.0f}"), each([c["ratio"] for c in i8])),
        ("NF4 GEMV, batch 1: " + " / ".join(f"{c['n']}×{c['k']}" for c in gv),
         each([c["gbps"] for c in gv], "{:.1f}") + " GB/s (" + each([c["of_memcpy"] for c in gv]) + " of memcpy)",
         "PyTorch fp32 linear", each([c["torch_fp32_over_weft"] for c in gv], "{:.1f}") + "×"),
        ("exact 4-bit GEMV, batch 1: " + " / ".join(f"{c['n']}×{c['k']}" for c in ex),
         each([c["gbps"] for c in ex], "{:.1f}") + " GB/s (int8 activations " + each([c["int8_gbps"] for c in ex], "{:.1f}") + ")",
         "read-only stream of the same bytes", each([c["of_stream"] for c in ex])),
        ("Linear4bit NF4-dq 4096², batch 1 / 8 / 32, fp32 compute", each([c["weft_ms"] for c in l4], "{:.3f}") + " ms",
         "bitsandbytes " + each([c["bnb_ms"] for c in l4], "{:.3f}") + " ms", each([c["bnb_over_weft"] for c in l4]) + "×"),
        ("the same, bf16 compute", each([c["weft_ms"] for c in l4b], "{:.3f}") + " ms",
         "bitsandbytes " + each([c["bnb_ms"] for c in l4b], "{:.3f}") + " ms", each([c["bnb_over_weft"] for c in l4b]) + "×"),
        ("Linear8bitLt 4096², fp16 batch 128, " + " / ".join(str(c["outliers"]) for c in l8) + " outlier columns",
         each([c["weft_ms"] for c in l8]) + " ms", "bitsandbytes " + each([c["bnb_ms"] for c in l8]) + " ms",
         each([c["bnb_over_weft"] for c in l8]) + "×"),
        ("training step (fwd + bwd to input), batch 128: Linear4bit / Linear8bitLt",
         each([ts["linear4bit"]["weft_ms"], ts["linear8bit"]["weft_ms"]], "{:.1f}") + " ms",
         f"PyTorch fp32 linear {ts['linear4bit']['torch_fp32_ms']:.1f} ms",
         each([ts["linear4bit"]["fp32_over_weft"], ts["linear8bit"]["fp32_over_weft"]]) + "×"),
    ]


def distributed(text):
    steps = json_lines(text, "mode", "step")
    if not steps:
        raise ValueError("no step lines")
    cells = {}
    for strategy in ("ddp", "fsdp"):
        for bound in (False, True):
            pairs = []
            for repeat in sorted({r["repeat"] for r in steps}):
                same = [r for r in steps if r["strategy"] == strategy and r["cpu_bind"] == bound and r["repeat"] == repeat]
                w = [r for r in same if r["program"].startswith("weft")]
                t = [r for r in same if r["program"].startswith("pytorch")]
                if w and t:
                    pairs.append((w[0]["median_ms"] / t[0]["median_ms"], w[0]["median_ms"], t[0]["median_ms"]))
            if pairs:
                pairs.sort()
                cells[(strategy, bound)] = pairs[len(pairs) // 2]
    pick = lambda s, i: each([cells[(s, b)][i] if (s, b) in cells else None for b in (False, True)])
    return [("DDP / FSDP step, example MLP, 2 ranks × 1 thread, unbound / bound (median pair)",
             f"DDP {pick('ddp', 1)} ms; FSDP {pick('fsdp', 1)} ms",
             f"PyTorch (Gloo): DDP {pick('ddp', 2)}, FSDP2 {pick('fsdp', 2)} ms",
             f"DDP {pick('ddp', 0)}; FSDP {pick('fsdp', 0)}")]


def gpt(text):
    j = last(text, "bench", "gpt")
    rows = []
    for config in dict.fromkeys(r["config"] for r in j["runs"]):
        runs = [r for r in j["runs"] if r["config"] == config]
        rows.append((f"GPT training step, {config}, " + " / ".join(r["precision"] for r in runs),
                     each([r["weft"]["ms_median"] for r in runs], "{:.1f}") + " ms",
                     "PyTorch eager " + each([r["pytorch"]["ms_median"] for r in runs], "{:.1f}") + " ms",
                     each([r["time_ratio_weft_over_pytorch"] for r in runs], "{:.3f}")))
    return rows


def tokenizer(text):
    j = last(text, "bench", "tokenizer_summary")
    rows = j["rows"]
    names = " / ".join(r["tokenizer"].removesuffix(".json") for r in rows)
    return [(f"tokenizer encode; decode, {names}",
             each([r["weft"]["encode_mb_s"] for r in rows], "{:.1f}") + "; "
             + each([r["weft"]["decode_mb_s"] for r in rows], "{:.1f}") + " MB/s",
             "`tokenizers` " + each([r["tokenizers"]["encode_mb_s"] for r in rows], "{:.2f}") + "; "
             + each([r["tokenizers"]["decode_mb_s"] for r in rows], "{:.2f}") + " MB/s",
             each([r["encode_ratio"] for r in rows], "{:.1f}") + "; " + each([r["decode_ratio"] for r in rows], "{:.1f}") + "×")]


def generate(text):
    lines = json_lines(text)
    rows = []
    for w, t in zip(lines[0::2], lines[1::2]):
        if w.get("program") != "bench_generate":
            raise ValueError("expected bench_generate and transformers lines in turn")
        mode = w["quantize"] if w["quantize"] != "none" else w["dtype"]
        tp, td = t.get("prefill_tokens_per_s"), t.get("decode_tokens_per_s")
        rows.append((f"generation, {os.path.basename(w['model'])}, {mode}: prefill / decode tokens/s",
                     each([w["prefill_tokens_per_s"], w["decode_tokens_per_s"]], "{:.1f}")
                     + f" ({w['bandwidth_fraction']:.2f} of the read-only stream)",
                     "transformers " + each([tp, td], "{:.1f}"),
                     each([w["prefill_tokens_per_s"] / tp if tp else None, w["decode_tokens_per_s"] / td if td else None]) + "×"))
    if not rows:
        raise ValueError("no generation lines")
    return rows


def attention(text):
    j = last(text, "bench", "attention_summary")
    rows = []
    for dtype in dict.fromkeys(c["dtype"] for c in j["cases"]):
        cases = [c for c in j["cases"] if c["dtype"] == dtype]
        rows.append((f"causal attention fwd + bwd, {dtype}, T = " + " / ".join(str(c["T"]) for c in cases),
                     each([c["weft_fwd_bwd_ms"] for c in cases]) + " ms",
                     "PyTorch SDPA " + each([c["torch_fwd_bwd_ms"] for c in cases]) + " ms",
                     each([c["ratio"] for c in cases], "{:.3f}")))
    return rows


def load_safetensors(text):
    j = last(text, "bench", "load_safetensors")
    return [(f"loading a {j['bytes'] / 1e6:.0f} MB safetensors file ({j['tensors']} tensors, pages cached)",
             f"{j['mmap_view_ms']:.2f} ms", f"mmap + copy {j['mmap_copy_ms']:.0f} ms; `read()` + copy {j['read_copy_ms']:.0f} ms",
             f"{j['speedup_vs_mmap_copy']:.0f}×; {j['speedup_vs_read_copy']:.0f}×")]


def checkpoint_load(text):
    j = last(text, "bench", "checkpoint_load")
    return [(f"checkpoint of {j['tensors']} tensors: load; ratio to a tenth (10 = linear)",
             f"{j['load_s']:.2f} s; {j['load_ratio']:.1f}", "—", "—")]


def fp8_weight(text):
    j = last(text, "bench", "fp8_weight")
    cases = j["cases"]
    return [("FP8 weight-only GEMV (`Fp8WeightLinear`), " + " / ".join(f"{c['out']}×{c['in']}" for c in cases),
             each([c["gemv_gbs"] for c in cases], "{:.1f}") + " GB/s",
             "read-only stream " + each([c["stream_gbs"] for c in cases], "{:.1f}") + " GB/s",
             each([c["gemv_vs_stream"] for c in cases]))]


def op_overhead(text):
    w, t = last(text, "impl", "weft"), last(text, "impl", "torch")
    modes = ("no_grad", "forward", "with_backward")
    return [("tiny op: no grad / recorded / with backward",
             each([w[f"us_per_op_{m}"] for m in modes]) + " µs",
             f"PyTorch {t.get('version', '')} " + each([t[f"us_per_op_{m}"] for m in modes]) + " µs",
             each([t[f"us_per_op_{m}"] / w[f"us_per_op_{m}"] for m in modes], "{:.1f}") + "×")]


ROWS = {"matmul": matmul, "matmul_fp64": matmul_fp64, "mlp": mlp, "mlp_fp64": mlp, "contention": contention,
        "quant": quant, "distributed": distributed, "gpt": gpt, "tokenizer": tokenizer, "generate": generate,
        "attention": attention, "fp8_weight": fp8_weight, "load_safetensors": load_safetensors, "checkpoint_load": checkpoint_load,
        "op_overhead": op_overhead}


def main():
    folder, cpu_class = sys.argv[1], sys.argv[2]
    with open(os.path.join(folder, "date"), encoding="utf-8") as f:
        date = f.read().strip()
    with open(os.path.join(folder, "commands.tsv"), encoding="utf-8") as f:
        commands = [line.rstrip("\n").split("\t", 1) for line in f if line.strip()]
    print(f"## {cpu_class}\n")
    print("| benchmark | command | weft | peer (same run) | ratio | date |")
    print("|---|---|---|---|---|---|")
    for name, command in commands:
        path = os.path.join(folder, name + ".txt")
        try:
            with open(path, encoding="utf-8") as f:
                rows = ROWS[name](f.read())
        except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError) as e:
            rows = [(name, f"no result ({type(e).__name__}: {e}; output in {path})", "—", "—")]
        for label, weft, peer, ratio in rows:
            print(f"| {label} | `{command}` | {weft} | {peer} | {ratio} | {date} |")


if __name__ == "__main__":
    main()
