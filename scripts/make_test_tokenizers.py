#!/usr/bin/env python3
"""Trains the two small byte-level BPE tokenizers the models tests load, and writes what the
`tokenizers` library makes of them (tests/models/data/):

  gpt2_tokenizer.json    GPT-2 style: ByteLevel pre-tokenizer (GPT-2's pattern), <|endoftext|>,
                         added tokens after the vocabulary (one lstrip/rstrip, one not normalized),
                         merges written as "a b" strings (the older format)
  llama3_tokenizer.json  Llama 3 style: Split by Llama 3's pattern then ByteLevel(use_regex=false),
                         ignore_merges with a few vocabulary words no merge makes, a template that
                         puts <|begin_of_text|> first, merges as [a, b] pairs
  tokenizer_goldens.json for each: crafted and random strings with their full ids (with and
                         without special tokens), decode cases (invalid UTF-8, special tokens),
                         and per-chunk FNV-1a hashes of the ids of two corpora of several MB:
                         the KJV Bible as `bible -l80 gen1:1-rev22:21` prints it (Debian's
                         bible-kjv) and a generated Unicode text (the splitmix64 generator below,
                         which the test repeats)

Both tokenizers are trained on the first books of the KJV text plus generated Unicode text.
The test regenerates both corpora, so only the hashes are committed.

    /work/venv/bin/python scripts/make_test_tokenizers.py
"""
import json
import pathlib
import subprocess

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "models" / "data"
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
MASK = (1 << 64) - 1
CHUNK_BYTES = 1 << 16  # the corpora are hashed in chunks of about this many bytes, cut after a newline

# The generated text: pools of code point ranges (or whole snippets), picked with these weights.
POOLS = [
    (12, [(0x41, 0x5A), (0x61, 0x7A)]),                                   # ASCII letters
    (6, [(0x20, 0x20)]),                                                  # spaces
    (3, [(0x30, 0x39)]),                                                  # digits
    (3, [(0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x2000, 0x200A), (0x2028, 0x2029),
         (0x3000, 0x3000)]),                                              # whitespace of all kinds
    (3, [(0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)]),        # ASCII punctuation
    (2, [(0xC0, 0x24F)]),                                                 # Latin-1 and Latin Extended
    (2, [(0x370, 0x4FF)]),                                                # Greek, Cyrillic
    (2, [(0x4E00, 0x9FFF), (0x3040, 0x30FF)]),                            # CJK, kana
    (1, [(0x1F300, 0x1FAFF)]),                                            # emoji
    (1, [(0x300, 0x36F)]),                                                # combining marks
    (1, [(0x660, 0x669), (0x966, 0x96F), (0xFF10, 0xFF19), (0xB2, 0xB3), (0x2160, 0x2188)]),  # other numbers
    (2, [(0x80, 0x10FFFF)]),                                              # anything (surrogates skipped)
    (3, None),                                                            # snippets
]
SNIPPETS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'Re", "'vE", "'\u017f", "'x",
            "<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>", "\r\n", "\n\n", " \n ", "  ", "\u2019s",
            " zq ", "<|endoftext", "Ġ"]


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


def generated_text(seed, size):
    """At least `size` UTF-8 bytes of mixed text; the test's generate_text is the same algorithm."""
    rng = SplitMix64(seed)
    total_weight = sum(w for w, _ in POOLS)
    parts, length = [], 0
    while length < size:
        pick = rng.next() % total_weight
        for weight, ranges in POOLS:
            if pick < weight:
                break
            pick -= weight
        if ranges is None:
            word = SNIPPETS[rng.next() % len(SNIPPETS)]
        else:
            chars = []
            for _ in range(1 + rng.next() % 6):
                lo, hi = ranges[rng.next() % len(ranges)]
                cp = lo + rng.next() % (hi - lo + 1)
                if 0xD800 <= cp <= 0xDFFF:
                    cp = 0xFFFD
                chars.append(chr(cp))
            word = "".join(chars)
        parts.append(word)
        length += len(word.encode("utf-8"))
    return "".join(parts)


def kjv_text():
    return subprocess.run(["bible", "-l80", "gen1:1-rev22:21"], capture_output=True, check=True).stdout.decode("utf-8")


def chunks(text):
    """Cuts text (UTF-8 bytes) after the first newline at or past each CHUNK_BYTES; the test cuts the same way."""
    data = text.encode("utf-8")
    out, start = [], 0
    while start < len(data):
        end = data.find(b"\n", start + CHUNK_BYTES)
        end = len(data) if end < 0 else end + 1
        out.append(data[start:end].decode("utf-8"))
        start = end
    return out


def fnv1a(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        for k in range(4):
            h ^= (i >> (8 * k)) & 0xFF
            h = (h * 0x100000001B3) & MASK
    return h


def byte_to_char():
    shown = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in shown:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + extra)
            extra += 1
    return table


def train(pre_tokenizer, special_tokens, text):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=special_tokens, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(text.splitlines(keepends=True), trainer)
    return tok


def make_gpt2(training):
    tok = train(pre_tokenizers.ByteLevel(add_prefix_space=False), ["<|endoftext|>"], training)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_tokens([AddedToken(" zq ", lstrip=True, rstrip=True, normalized=True),
                    AddedToken("Ġzq", normalized=False),
                    AddedToken("\u65e5\u672c", normalized=True)])
    tok.add_special_tokens([AddedToken("<|fim|>", special=True, normalized=False)])
    doc = json.loads(tok.to_str())
    doc["model"]["merges"] = [" ".join(pair) for pair in doc["model"]["merges"]]  # the older form
    return doc


def make_llama3(training):
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok = train(pre, specials, training)
    doc = json.loads(tok.to_str())
    vocab = doc["model"]["vocab"]
    assert isinstance(doc["model"]["merges"][0], list)
    # Words no merge makes, added to the vocabulary so that ignore_merges changes their ids.
    table = byte_to_char()
    extra = 0
    for word in ["wilderness", "Jerusalem", "commandments", "righteousness", "Nebuchadnezzar",
                 "everlasting", "tabernacle", "sanctuary", "congregation", "inheritance"]:
        for spelling in (word, " " + word):
            token = "".join(table[b] for b in spelling.encode("utf-8"))
            if token not in vocab:
                vocab[token] = len(vocab)
                extra += 1
    assert extra >= 10, extra
    doc["model"]["ignore_merges"] = True
    bos = vocab["<|begin_of_text|>"]
    doc["post_processor"] = json.loads(processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", bos)]),
    ]).__getstate__())
    tok = Tokenizer.from_str(json.dumps(doc))
    tok.add_special_tokens([AddedToken("<|reserved_special_token_0|>", special=True, normalized=False)])
    tok.add_tokens([AddedToken("<|tool|>", lstrip=True, normalized=False)])
    return json.loads(tok.to_str())


CRAFTED = [
    "", " ", "  ", "   ", "\n", "\n\n", " \n", "\t", "x", "Hello world", " Hello world", "Hello  world",
    "Hello   world  ", "hello\n\nworld", "a \n b", "  \n\n  x", "\t\tx", "x\r\ny", "x\r\n\r\n  y", "line one\nline two\n",
    "I'm here", "he's", "they'll", "we've", "I'd", "you're", "it't", "HE'S", "THEY'LL", "You'Re", "'\u017f", "x'\u017fy",
    "don't's", "'s'", "''s", "rock 'n' roll", "\u2019s curly", "123", "1234567", "12,345.67", "3.14159265",
    "\u0663\u0664\u0665", "\u00b2\u00b3", "\u216b", "\uff11\uff12\uff13\uff14", "version 2.0.1-beta",
    "caf\u00e9", "na\u00efve", "cafe\u0301", "\u0301x", " \u0301", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
    "\u4e2d\u6587 \u6587\u672c", "\ud55c\uad6d\uc5b4", "emoji \U0001F600\U0001F44D\U0001F3FD",
    "\U0001F468\u200d\U0001F469\u200d\U0001F467", "flags \U0001F1EB\U0001F1F7", "\u03a9\u2248\u00e7\u221a",
    "\u00a0nbsp", "a\u00a0b", "\u3000full", "line\u2028sep", "\u0085nel", "tab\tsep", "\u200b zero width",
    "\u01c4emo", "\U0001D400bold", "\U00010400 deseret", "\U000e0001 tag", "\U0010FFFD private",
    "<|endoftext|>", "a<|endoftext|>b", "<|endoftext|><|endoftext|>", " <|endoftext|> ", "<|endoftext",
    "<|endoftext|", "<|begin_of_text|>Hi", "Hi<|eot_id|>", "<|eot_id|><|end_of_text|>",
    "<|reserved_special_token_0|>", "x <|tool|>y", "x   <|tool|>", "<|fim|>", "a zq b", "a   zq   b", "xzqy",
    "xĠzqy", "Ġ", "ĠĠ", "\u65e5\u672c", "\u65e5\u672c\u8a9e", "In the beginning God created the heaven and the earth.",
    "And God said, Let there be light: and there was light.", "wilderness", " wilderness", "the wilderness",
    "Jerusalem's", " righteousness\n", "Nebuchadnezzar king", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "!!!???...",
    "x...y", " ...", "\u2014", "\u201cquoted\u201d", "\u017f", "((nested))", "a-b_c", "C:\\path\\to", "{\"json\": 1}",
    "tabs\t\tand  spaces", "trailing   ", "   leading", "\r", "\r\r\n", "\n \n", "1 2 3", "x1y2z3",
    "0.5x", "100%", "$5.00", "#hashtag", "@mention", "email@example.com", "http://example.com/a?b=c",
]


def encodings(tok, texts):
    """Each text's ids, and its ids with special tokens where the template makes them differ."""
    out = []
    for text in texts:
        case = {"text": text, "ids": tok.encode(text, add_special_tokens=False).ids}
        with_special = tok.encode(text, add_special_tokens=True).ids
        if with_special != case["ids"]:
            case["ids_with_special"] = with_special
        out.append(case)
    return out


def decode_cases(tok, doc):
    table = byte_to_char()
    byte_id = {b: tok.token_to_id(table[b]) for b in range(256)}
    sequences = [[b] for b in range(0x80, 0x100)] + [
        [0xE0, 0x80], [0xF0, 0x9F, 0x98], [0x61, 0xFF, 0x62], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
        [0xC0, 0xAF], [0xE2, 0x82], [0xE2, 0x82, 0x61], [0x80, 0x80], [0xF0, 0x9F, 0x98, 0x80],
        [0xF0, 0x9F, 0x98, 0x61], [0xF8, 0x88, 0x80, 0x80, 0x80], [0xEF, 0xBF, 0xBD], [0xE1, 0x80, 0xE1],
        [0xF1, 0x80, 0x80, 0xF1, 0x80], [0xC2, 0x41, 0xC2], [0xF5, 0x80],
    ]
    cases = [[byte_id[b] for b in seq] for seq in sequences]
    added = [t["id"] for t in doc["added_tokens"]]
    rng = SplitMix64(7)
    size = tok.get_vocab_size(with_added_tokens=True)
    for _ in range(100):
        ids = [rng.next() % size for _ in range(1 + rng.next() % 12)]
        if rng.next() % 2:
            ids.insert(rng.next() % (len(ids) + 1), added[rng.next() % len(added)])
        cases.append(ids)
    return [{"ids": ids, "text": tok.decode(ids, skip_special_tokens=False),
             "text_skipping_special": tok.decode(ids, skip_special_tokens=True)} for ids in cases]


def corpus_hashes(tok, text):
    parts = chunks(text)
    encoded = tok.encode_batch(parts, add_special_tokens=False)
    return [{"tokens": len(e.ids), "fnv1a": f"{fnv1a(e.ids):016x}"} for e in encoded]


def main():
    kjv = kjv_text()
    unicode_corpus = generated_text(2026, 1 << 20)
    training = kjv[: 1 << 20] + generated_text(1, 1 << 18)
    random_strings = [generated_text(100 + i, 1 + i % 40) for i in range(200)]
    DATA.mkdir(parents=True, exist_ok=True)
    goldens = {"tokenizers_version": tokenizers.__version__, "chunk_bytes": CHUNK_BYTES,
               "kjv_bytes": len(kjv.encode("utf-8")), "unicode_corpus_bytes": len(unicode_corpus.encode("utf-8"))}
    for name, make in (("gpt2", make_gpt2), ("llama3", make_llama3)):
        doc = make(training)
        path = DATA / f"{name}_tokenizer.json"
        path.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
        tok = Tokenizer.from_file(str(path))
        for t in doc["added_tokens"]:  # the ids in the file are the ids the library uses
            assert tok.token_to_id(t["content"]) == t["id"], t
        goldens[name] = {
            "vocab_size": tok.get_vocab_size(with_added_tokens=True),
            "encodings": encodings(tok, CRAFTED + random_strings),
            "decodings": decode_cases(tok, doc),
            "kjv": corpus_hashes(tok, kjv),
            "unicode_corpus": corpus_hashes(tok, unicode_corpus),
        }
        # The prefix-space variant of the GPT-2 tokenizer, on the crafted strings only.
        if name == "gpt2":
            doc["pre_tokenizer"]["add_prefix_space"] = True
            variant = Tokenizer.from_str(json.dumps(doc))
            goldens["gpt2_add_prefix_space"] = {"encodings": encodings(variant, CRAFTED + random_strings[:50])}
    (DATA / "tokenizer_goldens.json").write_text(json.dumps(goldens, ensure_ascii=False, separators=(",", ":")),
                                                 encoding="utf-8")
    for name in ("gpt2", "llama3"):
        print(name, sum(c["tokens"] for c in goldens[name]["kjv"]), "KJV tokens",
              sum(c["tokens"] for c in goldens[name]["unicode_corpus"]), "generated-text tokens")


if __name__ == "__main__":
    main()
