"""Writes a tiny Fashion-MNIST-shaped dataset for the example programs' option tests: the four IDX
.gz files of the real one, with TRAIN and TEST images of made-up pixels and labels 0-9 in turn.

    python3 tiny_fashion_mnist.py DIR TRAIN TEST
"""
import gzip
import struct
import sys

folder, counts = sys.argv[1], {"train": int(sys.argv[2]), "t10k": int(sys.argv[3])}
for split, n in counts.items():
    with gzip.open(f"{folder}/{split}-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes((i * 7) % 256 for i in range(n * 784)))
    with gzip.open(f"{folder}/{split}-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))
