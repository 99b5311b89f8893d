#!/usr/bin/env python3
"""The `tokenizers` library's side of bench/compare_tokenizer.sh: the same measurements as
bench_tokenizer (load, encode and decode of the same 64 KiB chunks, add_special_tokens=False, one
tokenizer for every pass), on one thread (RAYON_NUM_THREADS=1, set before the import), median pass over --min-time seconds.

    tokenizer_peer.py --tokenizer FILE --text FILE [--min-time S]

Prints one line of JSON starting with {"bench":"tokenizer_peer".
"""
import argparse
import json
import os
import statistics
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
import tokenizers  # noqa: E402


def chunks(data):
    out, start = [], 0
    while start < len(data):
        end = data.find(b"\n", start + (1 << 16)) if start + (1 << 16) < len(data) else -1
        end = len(data) if end < 0 else end + 1
        out.append(data[start:end].decode("utf-8"))
        start = end
    return out


def median_time(fn, min_time):
    fn()
    times = []
    while sum(times) < min_time or len(times) < 5:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--text", required=True)
    parser.add_argument("--min-time", type=float, default=2.0)
    args = parser.parse_args()
    data = open(args.text, "rb").read()
    parts = chunks(data)
    load_s = median_time(lambda: tokenizers.Tokenizer.from_file(args.tokenizer), args.min_time / 4)
    tok = tokenizers.Tokenizer.from_file(args.tokenizer)
    state = {}

    def encode():
        state["ids"] = [e.ids for e in tok.encode_batch(parts, add_special_tokens=False)]

    encode_s = median_time(encode, args.min_time)
    decode_s = median_time(lambda: [tok.decode(ids, skip_special_tokens=False) for ids in state["ids"]], args.min_time)
    mb = len(data) / 1e6
    print(json.dumps({"bench": "tokenizer_peer", "tokenizers_version": tokenizers.__version__,
                      "tokens": sum(len(i) for i in state["ids"]), "load_s": load_s, "encode_s": encode_s,
                      "decode_s": decode_s, "encode_mb_s": mb / encode_s, "decode_mb_s": mb / decode_s}))


if __name__ == "__main__":
    main()
