"""Writes a tokenizer.json for a random-init model folder: the tests' small GPT-2 byte-level BPE
(tests/models/data/gpt2_tokenizer.json) with its vocabulary padded by plain entries ("tok<id>", no
merges reach them) to the model's vocab_size, so that any id the random model picks decodes. Plain
vocabulary entries, not added tokens: a real GPT-2 tokenizer has one added token, and 49k of them
would measure the added-token matcher instead of the model.

usage: python3 bench/pad_tokenizer.py SMALL_TOKENIZER.json MODEL_FOLDER
"""
import json
import sys

tokenizer_path, folder = sys.argv[1], sys.argv[2]
tok = json.load(open(tokenizer_path))
vocab = tok["model"]["vocab"]
size = json.load(open(folder + "/config.json"))["vocab_size"]
used = set(vocab.values()) | {t["id"] for t in tok.get("added_tokens", [])}
for i in range(size):
    if i not in used:
        vocab[f"tok{i}"] = i
json.dump(tok, open(folder + "/tokenizer.json", "w"))
