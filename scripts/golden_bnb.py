#!/usr/bin/env python3
"""Writes the bitsandbytes golden files under tests/precision/data/, and checks weft's exports.

weft's quantized formats and layers (precision/quant/) must equal bitsandbytes 0.50's CPU output
bit for bit. This script runs bitsandbytes' CPU backend on small fixed inputs and saves inputs and
results as safetensors files, so the C++ tests need neither Python nor torch:

  bnb_4bit.safetensors      quantize_4bit / dequantize_4bit: NF4 and FP4, every block size
                            32..4096, odd lengths, partial and all-zero blocks, double quantization,
                            float32 / bfloat16 / float16 inputs
  bnb_8bit.safetensors      the signed dynamic map; quantize_blockwise / dequantize_blockwise at
                            every block size 64..4096, nested statistics
  bnb_int8.safetensors      LLM.int8(): int8_vectorwise_quant with and without outliers,
                            int8_linear_matmul, int8_mm_dequant, int8_mixed_scaled_mm,
                            int8_vectorwise_dequant
  bnb_linear_*.safetensors  state dicts of bnb.nn.Linear4bit / Linear8bitLt, saved exactly as
                            bitsandbytes saves them (load direction: bitsandbytes -> weft)
  bnb_linear_io.safetensors each layer's float weights, an input, the layer's eval output and the
                            input gradient of sum(output)

Determinism: torch runs on one thread. The mean that double quantization subtracts is torch's
float32 sum, whose rounding depends on the summation order of torch's kernel (vector width,
threads); weft reproduces the single-thread AVX2 order, so regenerate on a machine where
torch.backends.cpu.get_cpu_capability() is "AVX2" (the script checks).

Where bitsandbytes' CPU backend differs from the algorithm in the reference notes, the golden
files record what the library does; the differences are listed in precision/quant/README.md.

The other direction (weft -> bitsandbytes) is checked by hand, since CI has no torch:

  WEFT_BNB_EXPORT_DIR=/tmp/weft_bnb build/tests/test_precision -tc='*export for bitsandbytes*'
  /work/venv/bin/python scripts/golden_bnb.py --verify /tmp/weft_bnb

loads every layer weft saved there into bitsandbytes and compares bitsandbytes' output with the
output weft computed and stored beside it.

Usage (repository root):  /work/venv/bin/python scripts/golden_bnb.py
Needs torch 2.15 and bitsandbytes 0.50 (pip install torch bitsandbytes safetensors).
"""
import argparse
import json
import os
import sys

import torch
from safetensors.torch import load_file, save_file

import bitsandbytes as bnb
import bitsandbytes.functional as F

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "precision", "data")
BLOCKSIZES_4BIT = [32, 64, 128, 256, 512, 1024, 2048, 4096]
BLOCKSIZES_8BIT = [64, 128, 256, 512, 1024, 2048, 4096]


def seeded(seed):
    return torch.Generator().manual_seed(seed)


def long_input():
    # 5123 values (odd; a partial last block at every block size), mixed scales, with a zero
    # stretch that makes whole blocks zero at every block size up to 1024.
    x = torch.randn(5123, generator=seeded(1)) * torch.linspace(0.1, 4.0, 5123)
    x[1024:2048] = 0.0
    x[10:20] = 0.0
    x[100] = 37.5  # one large value dominates its block
    return x


def dense_input():
    # 2050 values (even, so dequantize takes the native CPU kernel), every block non-zero, with
    # signed zeros, tiny values and exact powers of two at the start.
    x = torch.randn(2050, generator=seeded(2))
    x[:8] = torch.tensor([1.0, -1.0, 0.5, -0.5, 0.0, -0.0, 1e-30, -1e-30])
    return x


def small_input():
    return torch.randn(301, generator=seeded(3)) * 3.0


def four_bit(out):
    inputs = {"x_long": long_input(), "x_dense": dense_input(), "x_small": small_input()}
    out.update(inputs)
    for quant_type in ("nf4", "fp4"):
        for bs in BLOCKSIZES_4BIT:
            for name, x in inputs.items():
                key = f"{quant_type}.bs{bs}.{name}"
                packed, state = F.quantize_4bit(x, blocksize=bs, quant_type=quant_type, compress_statistics=False)
                out[key + ".packed"] = packed.reshape(-1)
                out[key + ".absmax"] = state.absmax
                if name == "x_small" or (name == "x_dense" and bs == 64):
                    out[key + ".dequant"] = F.dequantize_4bit(packed, state).reshape(-1)
        # A 2-D weight whose row length is odd: dequantize takes the generic path there.
        w = torch.randn(6, 37, generator=seeded(4))
        packed, state = F.quantize_4bit(w, blocksize=64, quant_type=quant_type)
        out[f"{quant_type}.w_odd"] = w
        out[f"{quant_type}.w_odd.packed"] = packed.reshape(-1)
        out[f"{quant_type}.w_odd.dequant"] = F.dequantize_4bit(packed, state)

    # Double quantization: 290 absmax values (two nested blocks of 256, the last partial), a
    # bfloat16 input (so the dequantized output is bfloat16 too), a zero block and one outlier
    # block that stretches the nested range.
    x = (torch.randn(32 * 290, generator=seeded(5)) * 0.05).to(torch.bfloat16)
    x[32 * 3 : 32 * 4] = 0.0
    x[32 * 200 : 32 * 201] *= 80.0
    out["dq.x"] = x
    for quant_type in ("nf4", "fp4"):
        packed, state = F.quantize_4bit(x, blocksize=32, quant_type=quant_type, compress_statistics=True)
        key = f"dq.{quant_type}"
        out[key + ".packed"] = packed.reshape(-1)
        out[key + ".absmax"] = state.absmax
        out[key + ".offset"] = state.offset.reshape(1)
        out[key + ".nested_absmax"] = state.state2.absmax
        out[key + ".nested_quant_map"] = state.state2.code
        if quant_type == "nf4":
            out[key + ".dequant"] = F.dequantize_4bit(packed, state).reshape(-1)

    # float16 input at the default block size.
    x = (torch.randn(515, generator=seeded(6)) * 2).to(torch.float16)
    out["half.x"] = x
    packed, state = F.quantize_4bit(x, blocksize=64, quant_type="nf4")
    out["half.nf4.packed"] = packed.reshape(-1)
    out["half.nf4.absmax"] = state.absmax
    out["half.nf4.dequant"] = F.dequantize_4bit(packed, state).reshape(-1)


def eight_bit(out):
    x = long_input()
    out["x_long"] = x
    out["dynamic_map"] = F.create_dynamic_map()
    for bs in BLOCKSIZES_8BIT:
        codes, state = F.quantize_blockwise(x, blocksize=bs)
        out[f"bs{bs}.codes"] = codes
        out[f"bs{bs}.absmax"] = state.absmax
        if bs == 64:
            out[f"bs{bs}.dequant"] = F.dequantize_blockwise(codes, state)
    # Nested statistics (quantize_blockwise(nested=True) quantizes the absmax in blocks of the
    # same size): 130 blocks of 64 give 130 absmax values, three nested blocks. bfloat16 input.
    y = (torch.randn(64 * 130, generator=seeded(7)) * torch.linspace(0.01, 3.0, 64 * 130)).to(torch.bfloat16)
    out["nested.x"] = y
    codes, state = F.quantize_blockwise(y, blocksize=64, nested=True)
    out["nested.codes"] = codes
    out["nested.absmax"] = state.absmax
    out["nested.offset"] = state.offset.reshape(1)
    out["nested.nested_absmax"] = state.state2.absmax
    out["nested.dequant"] = F.dequantize_blockwise(codes, state)
    # bfloat16 input.
    z = (torch.randn(1000, generator=seeded(8)) * 5).to(torch.bfloat16)
    out["bf16.x"] = z
    codes, state = F.quantize_blockwise(z, blocksize=256)
    out["bf16.codes"] = codes
    out["bf16.absmax"] = state.absmax
    out["bf16.dequant"] = F.dequantize_blockwise(codes, state)


def activations(rows, cols, seed, outlier_cols=()):
    a = torch.randn(rows, cols, generator=seeded(seed))
    for c in outlier_cols:
        a[rows // 3, c] = 9.5 if c % 2 else -8.25  # above the 6.0 threshold
        a[rows // 2, c] = 6.0  # exactly on it: an outlier (>=)
    return a.to(torch.float16)


def int8(out):
    a = activations(16, 96, 9, outlier_cols=(5, 17, 60))
    a[3] = 0.0  # a zero row: its scale is 0 and its codes must still come out 0
    w = (torch.randn(24, 96, generator=seeded(10)) * 0.2).to(torch.float16)
    bias = torch.randn(24, generator=seeded(11)).to(torch.float16)
    out["a"], out["w"], out["bias"] = a, w, bias
    for threshold in (0.0, 6.0):
        key = f"t{threshold:g}"
        ca, sca, cols = F.int8_vectorwise_quant(a.clone(), threshold=threshold)
        out[key + ".ca"], out[key + ".sca"] = ca, sca
        out[key + ".outlier_cols"] = (cols if cols is not None else torch.empty(0, dtype=torch.int64)).to(torch.int64)
    cb, scb, _ = F.int8_vectorwise_quant(w.clone())
    out["cb"], out["scb"] = cb, scb
    ca, sca, cols = F.int8_vectorwise_quant(a.clone(), threshold=6.0)
    c = F.int8_linear_matmul(ca, cb)
    out["c_int32"] = c
    out["dequant_f16"] = F.int8_mm_dequant(c, sca, scb, bias=bias)
    out["dequant_f32"] = torch.ops.bitsandbytes.int8_mm_dequant(c, sca, scb, dtype=torch.float32)
    out["vectorwise_dequant"] = F.int8_vectorwise_dequant(cb, scb)
    for dtype, name in ((torch.float16, "f16"), (torch.float32, "f32")):
        mixed, _ = torch.ops.bitsandbytes.int8_mixed_scaled_mm(a.to(dtype), ca, cb, sca, scb, cols, bias.to(dtype))
        out["mixed_" + name] = mixed
    # One row: outlier columns are not zeroed across rows (there is only one).
    a1 = activations(1, 40, 12)
    a1[0, 7] = 11.0
    ca1, sca1, cols1 = F.int8_vectorwise_quant(a1.clone(), threshold=6.0)
    out["a1"], out["a1.ca"], out["a1.sca"], out["a1.outlier_cols"] = a1, ca1, sca1, cols1.to(torch.int64)


def linear_cases():
    """(name, bnb layer factory, in, out, bias, input dtype)."""

    def four(quant_type, dq):
        return lambda i, o, b: bnb.nn.Linear4bit(i, o, bias=b, compute_dtype=torch.float32,
                                                 compress_statistics=dq, quant_type=quant_type)

    def eight(threshold):
        return lambda i, o, b: bnb.nn.Linear8bitLt(i, o, bias=b, has_fp16_weights=False, threshold=threshold)

    return [
        ("linear4bit_nf4_dq", four("nf4", True), 96, 40, True, torch.float32),
        ("linear4bit_nf4", four("nf4", False), 64, 24, False, torch.float32),
        ("linear4bit_fp4", four("fp4", False), 50, 7, True, torch.float32),
        ("linear4bit_fp4_dq", four("fp4", True), 130, 136, True, torch.float32),  # 2 nested blocks
        ("linear8bit_t6", eight(6.0), 48, 20, True, torch.float16),
        ("linear8bit_t0", eight(0.0), 40, 12, False, torch.float32),
    ]


def layers(io):
    for index, (name, make, fin, fout, bias, in_dtype) in enumerate(linear_cases()):
        torch.manual_seed(100 + index)
        reference = torch.nn.Linear(fin, fout, bias=bias)
        # Weights rounded to bfloat16 values (stored as bfloat16 to keep the files small).
        float_state = {k: v.detach().to(torch.bfloat16).float() for k, v in reference.state_dict().items()}
        layer = make(fin, fout, bias)
        layer.load_state_dict(float_state)
        layer = layer.to("cpu")  # bitsandbytes quantizes when the layer moves to a device
        layer.eval()
        x = torch.randn(5, fin, generator=seeded(200 + index)).to(in_dtype)
        if name == "linear8bit_t6":
            x[1, 3], x[2, 30] = 7.5, -12.0  # outlier columns for the decomposition
        x.requires_grad_(True)
        y = layer(x)
        y.float().sum().backward()
        save_file({k: v.detach().contiguous() for k, v in layer.state_dict().items()},
                  os.path.join(DATA, f"bnb_{name}.safetensors"))
        for k, v in float_state.items():
            io[f"{name}.float.{k}"] = v.to(torch.bfloat16)
        io[f"{name}.x"] = x.detach()
        io[f"{name}.y"] = y.detach()
        io[f"{name}.x_grad"] = x.grad.detach()


def write_all():
    if torch.backends.cpu.get_cpu_capability() != "AVX2":
        sys.exit("run on an AVX2 machine: torch's float32 sum order (used by double quantization) depends on it")
    torch.set_num_threads(1)
    os.makedirs(DATA, exist_ok=True)
    for name, fill in (("bnb_4bit", four_bit), ("bnb_8bit", eight_bit), ("bnb_int8", int8), ("bnb_linear_io", layers)):
        tensors = {}
        fill(tensors)
        save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(DATA, name + ".safetensors"),
                  metadata={"torch": torch.__version__, "bitsandbytes": bnb.__version__})
    total = sum(os.path.getsize(os.path.join(DATA, f)) for f in os.listdir(DATA) if f.startswith("bnb_"))
    print(f"wrote {DATA} ({total / 1024:.0f} KiB of bnb_* files)")


def load_layer_into_bnb(state, meta):
    """A bitsandbytes layer holding the quantized state weft saved."""
    fin, fout, bias = int(meta["in_features"]), int(meta["out_features"]), meta["bias"] == "true"
    if meta["kind"] == "linear4bit":
        qs = {k[len("weight."):]: v for k, v in state.items() if k.startswith("weight.")}
        quant_type = json.loads(bytes(qs["quant_state.bitsandbytes__" + meta["quant_type"]].tolist()))["quant_type"]
        layer = bnb.nn.Linear4bit(fin, fout, bias=bias, compute_dtype=torch.float32, quant_type=quant_type)
        layer.weight = bnb.nn.Params4bit.from_prequantized(state["weight"], qs, device="cpu", module=layer)
        if bias:
            layer.bias = torch.nn.Parameter(state["bias"])
        return layer
    layer = bnb.nn.Linear8bitLt(fin, fout, bias=bias, has_fp16_weights=False, threshold=float(meta["threshold"]))
    layer = layer.to("cpu")  # makes the int8 weight and its SCB, which load_state_dict then overwrites
    layer.load_state_dict(state)
    return layer


def verify(directory):
    failures = 0
    names = sorted(f for f in os.listdir(directory) if f.endswith(".safetensors") and not f.endswith(".io.safetensors"))
    if not names:
        sys.exit(f"no weft exports in {directory}")
    for name in names:
        from safetensors import safe_open

        with safe_open(os.path.join(directory, name), "pt") as f:
            meta = f.metadata()
        state = load_file(os.path.join(directory, name))
        io = load_file(os.path.join(directory, name.replace(".safetensors", ".io.safetensors")))
        layer = load_layer_into_bnb(state, meta).eval()
        with torch.no_grad():
            y = layer(io["x"]).float()
        expected = io["y"].float()
        err = (y - expected).abs().max().item()
        scale = expected.abs().max().item() + 1e-12
        ok = err <= 2e-2 * scale
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: max |bnb - weft| = {err:.3g} (max |y| {scale:.3g})")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--verify", metavar="DIR", help="load the layers weft exported to DIR into bitsandbytes")
    args = parser.parse_args()
    if args.verify:
        torch.set_num_threads(1)
        verify(args.verify)
    else:
        write_all()
