#!/usr/bin/env python3
"""Golden safetensors files for weft's loader tests, written by Python, and an interop checker.

    python3 scripts/safetensors_interop.py write          # (re)writes the files in tests/io/data/
    python3 scripts/safetensors_interop.py verify FILE..  # checks any safetensors file (e.g. one weft wrote)
    python3 scripts/safetensors_interop.py check-tied FILE  # loads a tied model's file with load_model

The golden_* files are built with plain struct + json, so writing them needs nothing beyond the
standard library. reference_writer.safetensors is written by the `safetensors` package itself
(skipped, keeping the committed file, where it is not installed): weft must save the same
tensors to the same bytes. Every file written or verified is then checked three ways where the tools exist: by this
script's own strict reader, by the `safetensors` package (pip install safetensors), and by
torch (1.13 has no float8, so F8 tensors are checked by this script only). The expected values
below are repeated literally in tests/io/test_safetensors_golden.cpp; change both together.

Weight tying: tied_save_model.safetensors is what safetensors.torch.save_model writes for a tiny
model whose LM head is its token embedding (tests/nn/tied_model.h's TiedLM, values from
tied_values(), repeated in tests/io/test_tied_checkpoint.cpp): the tensor once, under the
alphabetically first name, the other recorded in the metadata. `check-tied FILE` loads a file weft
wrote for that model (io::save_checkpoint) with load_model and checks the tie and the values.
"""
import json
import math
import struct
import sys
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "tests" / "io" / "data"

# dtype -> (struct format of one element or None for raw bytes, size in bytes)
DTYPES = {
    "F64": ("d", 8), "F32": ("f", 4), "F16": ("e", 2), "BF16": (None, 2),
    "F8_E4M3": (None, 1), "F8_E5M2": (None, 1),
    "I8": ("b", 1), "U8": ("B", 1), "I32": ("i", 4), "I64": ("q", 8), "BOOL": ("?", 1),
}


def bf16_bytes(values):
    """bfloat16 is the top half of a float32; the golden values are exact, so no rounding."""
    out = b""
    for v in values:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        assert bits & 0xFFFF == 0, f"{v} is not exactly representable in bfloat16"
        out += struct.pack("<H", bits >> 16)
    return out


def encode(dtype, values):
    fmt, _ = DTYPES[dtype]
    if dtype == "BF16":
        return bf16_bytes(values)
    if fmt is None:  # float8: the values are given as their bit patterns
        return bytes(values)
    return struct.pack("<" + fmt * len(values), *values)


def decode(dtype, raw):
    fmt, size = DTYPES[dtype]
    n = len(raw) // size
    if dtype == "BF16":
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in struct.unpack(f"<{n}H", raw)]
    if fmt is None:
        return list(raw)
    return list(struct.unpack("<" + fmt * n, raw))


# name -> (dtype, shape, values). Float8 values are bit patterns: E4M3 0x38 = 1, 0xC0 = -2,
# 0x7E = 448 (max); E5M2 0x3C = 1, 0xC0 = -2, 0x7B = 57344 (max).
GOLDEN_DTYPES = {
    "f64": ("F64", [3], [1.0 / 3.0, -0.0, 1e300]),
    "f32": ("F32", [2, 2], [1.5, -2.25, 3.4028234663852886e38, 1.401298464324817e-45]),
    "f16": ("F16", [5], [1.0, -2.5, 65504.0, 6.103515625e-05, 5.960464477539063e-08]),
    "bf16": ("BF16", [2, 2], [1.0, -3.140625, 3.3895313892515355e38, 9.183549615799121e-41]),
    "i64": ("I64", [3], [-9223372036854775808, 9223372036854775807, 42]),
    "i32": ("I32", [2], [-2147483648, 7]),
    "i8": ("I8", [3], [-128, 127, 0]),
    "u8": ("U8", [3], [0, 255, 17]),
    "bool": ("BOOL", [4], [True, False, False, True]),
    "f8_e4m3": ("F8_E4M3", [3], [0x38, 0xC0, 0x7E]),
    "f8_e5m2": ("F8_E5M2", [3], [0x3C, 0xC0, 0x7B]),
}

# Laid out in the data region in this order, but listed in the header in LAYOUT_HEADER_ORDER.
GOLDEN_LAYOUT = {
    "a.bias": ("I64", [2], [-1, 1 << 40]),
    "empty": ("F16", [0, 3], []),
    "scalar": ("F32", [], [2.5]),
    "z.weight.\u00fc": ("BF16", [2, 3], [0.5, -1.0, 2.0, 256.0, -0.0078125, 12884901888.0]),
}
LAYOUT_HEADER_ORDER = ["z.weight.\u00fc", "scalar", "__metadata__", "a.bias", "empty"]
LAYOUT_METADATA = {"format": "pt", "note": "na\u00efve \u2603 \U0001F980 \"quoted\"\n"}


def write_golden_dtypes(path):
    """Compact JSON padded with spaces to a multiple of 8: what the reference writer produces."""
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, (dtype, shape, values) in GOLDEN_DTYPES.items():
        raw = encode(dtype, values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def write_golden_layout(path):
    """Python's default json.dumps (spaces, \\u escapes incl. a surrogate pair), metadata in the
    middle, header order unlike data order, an empty and a 0-d tensor, and no padding, so the
    data region starts unaligned."""
    entries, data = {}, b""
    for name, (dtype, shape, values) in GOLDEN_LAYOUT.items():
        raw = encode(dtype, values)
        entries[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header = {k: (LAYOUT_METADATA if k == "__metadata__" else entries[k]) for k in LAYOUT_HEADER_ORDER}
    text = json.dumps(header).encode()
    assert b"\\ud83e\\udd80" in text and len(text) % 8 != 0
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def write_reference_writer(path):
    """One metadata key only: the reference writer emits metadata in hash-map order, which
    changes from run to run. Tensors are given in the order it lays them out (by dtype, then name)."""
    try:
        import safetensors.torch
    except ImportError:
        print(f"{path}: safetensors not installed; keeping the committed file")
        return False
    import torch
    tensors = {
        "step": torch.tensor(7, dtype=torch.int64),
        "weight": torch.tensor([[1.0, -2.0, 0.5], [4.0, 0.25, -8.0]]),
        "bias": torch.tensor([0.5, -0.5, 1.5], dtype=torch.bfloat16),
        "mask": torch.tensor([True, False]),
    }
    safetensors.torch.save_file(tensors, str(path), metadata={"format": "pt"})
    return True


VOCAB, WIDTH = 7, 5


def tied_model():
    """TiedLM of tests/nn/tied_model.h: wte Embedding(V, C), fc Linear(C, C), head Linear(C, V) = wte."""
    import torch

    class TiedLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = torch.nn.Embedding(VOCAB, WIDTH)
            self.fc = torch.nn.Linear(WIDTH, WIDTH)
            self.head = torch.nn.Linear(WIDTH, VOCAB, bias=False)
            self.head.weight = self.wte.weight

    return TiedLM()


def tied_values():
    """Exact in float32: wte k/8 - 2, fc.weight k/32 - 0.375, fc.bias k/4 - 0.5 (k the flat index)."""
    import torch
    return {
        "wte.weight": (torch.arange(VOCAB * WIDTH, dtype=torch.float32) / 8 - 2).view(VOCAB, WIDTH),
        "fc.weight": (torch.arange(WIDTH * WIDTH, dtype=torch.float32) / 32 - 0.375).view(WIDTH, WIDTH),
        "fc.bias": torch.arange(WIDTH, dtype=torch.float32) / 4 - 0.5,
    }


def write_tied_model(path):
    try:
        import safetensors.torch
        import torch
    except ImportError:
        print(f"{path}: torch or safetensors not installed; keeping the committed file")
        return False
    model = tied_model()
    with torch.no_grad():
        for name, value in tied_values().items():
            model.get_parameter(name).copy_(value)
    safetensors.torch.save_model(model, str(path))
    tensors, metadata = read(path)
    assert sorted(tensors) == ["fc.bias", "fc.weight", "head.weight"], sorted(tensors)
    assert metadata == {"wte.weight": "head.weight"}, metadata
    check_tied(path)
    return True


def check_tied(path):
    """load_model restores both names of the tie from the one the file holds."""
    import safetensors.torch
    import torch
    model = tied_model()
    missing, unexpected = safetensors.torch.load_model(model, str(path))
    assert not missing and not unexpected, (missing, unexpected)
    assert model.head.weight is model.wte.weight
    for name, value in tied_values().items():
        assert torch.equal(model.get_parameter(name), value), name
    print(f"{path}: load_model OK, head.weight is wte.weight, values as tied_values()")


def read(path):
    """A strict reader mirroring weft's checks; returns ({name: (dtype, shape, raw)}, metadata)."""
    blob = Path(path).read_bytes()
    assert len(blob) >= 8, "shorter than the length prefix"
    (n,) = struct.unpack("<Q", blob[:8])
    assert n <= len(blob) - 8, "header length past the end"
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    region = blob[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors, spans = {}, []
    for name, info in header.items():
        assert set(info) == {"dtype", "shape", "data_offsets"}, f"{name}: keys {sorted(info)}"
        begin, end = info["data_offsets"]
        size = DTYPES[info["dtype"]][1] * math.prod(info["shape"])
        assert end - begin == size and end <= len(region), f"{name}: bad data_offsets"
        spans.append((begin, end))
        tensors[name] = (info["dtype"], info["shape"], region[begin:end])
    cursor = 0
    for begin, end in sorted(spans):
        assert begin == cursor, "overlap or gap in the data region"
        cursor = end
    assert cursor == len(region), "trailing bytes after the data"
    return tensors, metadata


def check_with_safetensors(path, tensors, metadata):
    try:
        from safetensors import safe_open
    except ImportError:
        return "safetensors not installed"
    import torch
    with safe_open(str(path), framework="pt") as f:
        assert (f.metadata() or {}) == metadata, f"metadata {f.metadata()} != {metadata}"
        assert sorted(f.keys()) == sorted(tensors)
        for name, (dtype, shape, raw) in tensors.items():
            if dtype.startswith("F8") and not hasattr(torch, "float8_e4m3fn"):
                continue
            t = f.get_tensor(name)
            assert list(t.shape) == shape, name
            assert t.reshape(-1).contiguous().view(torch.uint8).numpy().tobytes() == raw, name
    return "safetensors OK"


def check_with_torch(tensors):
    import torch
    dtypes = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
              "I8": torch.int8, "U8": torch.uint8, "I32": torch.int32, "I64": torch.int64, "BOOL": torch.bool}
    for name, (dtype, shape, raw) in tensors.items():
        if dtype not in dtypes or not raw:
            continue
        t = torch.frombuffer(bytearray(raw), dtype=dtypes[dtype]).reshape(shape)
        expected = decode(dtype, raw)
        got = t.to(torch.float64 if t.is_floating_point() else torch.int64).flatten().tolist()
        same = [(a == b) or (math.isnan(a) and math.isnan(b)) for a, b in zip(got, expected)]
        assert all(same) and len(got) == len(expected), f"{name}: torch {got} != {expected}"
    return "torch OK"


def verify(path, expected=None, expected_metadata=None):
    tensors, metadata = read(path)
    if expected is not None:
        assert metadata == expected_metadata, f"{path}: metadata {metadata}"
        assert set(tensors) == set(expected), f"{path}: names {sorted(tensors)}"
        for name, (dtype, shape, values) in expected.items():
            assert tensors[name][:2] == (dtype, shape), name
            assert tensors[name][2] == encode(dtype, values), name
    print(f"{path}: {len(tensors)} tensors; own reader OK; {check_with_safetensors(path, tensors, metadata)}; "
          f"{check_with_torch(tensors)}")


def main(argv):
    if len(argv) >= 2 and argv[1] == "verify":
        for path in argv[2:]:
            verify(path)
        return
    if len(argv) == 3 and argv[1] == "check-tied":
        check_tied(argv[2])
        return
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    dtypes_path, layout_path = DATA_DIR / "golden_dtypes.safetensors", DATA_DIR / "golden_layout.safetensors"
    write_golden_dtypes(dtypes_path)
    write_golden_layout(layout_path)
    verify(dtypes_path, GOLDEN_DTYPES, {"format": "pt"})
    verify(layout_path, GOLDEN_LAYOUT, LAYOUT_METADATA)
    reference_path = DATA_DIR / "reference_writer.safetensors"
    if write_reference_writer(reference_path):
        verify(reference_path)
    tied_path = DATA_DIR / "tied_save_model.safetensors"
    if write_tied_model(tied_path):
        verify(tied_path)


if __name__ == "__main__":
    main(sys.argv)
