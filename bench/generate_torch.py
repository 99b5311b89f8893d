#!/usr/bin/env python3
"""transformers' side of bench/compare_generate.sh: the same folder, prompt length, new tokens,
greedy decoding with the KV cache, batch 1, eos ignored, torch.set_num_threads(THREADS).

  python3 bench/generate_torch.py --model DIR --mode float32|bf16|int8|nf4 [--prompt 128] [--new 128]
                                  [--threads 2] [--repeat 3] [--device cpu|cuda]

Prefill tokens/s: the prompt's forward and the first token (generate with max_new_tokens=1);
decode tokens/s: the remaining new tokens over the time a full generate takes beyond that. int8
and nf4 load through bitsandbytes' quantization_config (its CPU backend, or its CUDA kernels with
--device cuda, where every generate is timed to torch.cuda.synchronize()). Prints one JSON line.
"""
import argparse
import json
import statistics
import time

import torch
from transformers import AutoModelForCausalLM


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--mode", default="float32")
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--new", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    a = p.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: expected a CUDA GPU, got none")
    torch.set_num_threads(a.threads)
    kwargs = {"dtype": torch.bfloat16 if a.mode == "bf16" else torch.float32}
    if a.mode in ("int8", "nf4"):
        from transformers import BitsAndBytesConfig
        kwargs["quantization_config"] = (BitsAndBytesConfig(load_in_8bit=True) if a.mode == "int8" else
                                         BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                            bnb_4bit_compute_dtype=torch.float32))
    if a.device == "cuda":  # bitsandbytes' layers are placed as they load, not moved after
        kwargs["device_map"] = "cuda"
    model = AutoModelForCausalLM.from_pretrained(a.model, **kwargs).eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (1, a.prompt), generator=g).to(a.device)
    mask = torch.ones_like(ids)
    settled = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)

    def timed(new):
        settled()
        start = time.perf_counter()
        with torch.inference_mode():
            model.generate(ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new, do_sample=False,
                           pad_token_id=0)
        settled()
        return time.perf_counter() - start

    timed(2)  # warm-up
    prefill, decode = [], []
    for _ in range(a.repeat):
        first = timed(1)
        full = timed(a.new)
        prefill.append(a.prompt / first)
        decode.append((a.new - 1) / max(full - first, 1e-9))
    print(json.dumps({"program": "transformers", "mode": a.mode, "device": a.device, "threads": a.threads,
                      "prompt": a.prompt,
                      "new_tokens": a.new, "prefill_tokens_per_s": statistics.median(prefill),
                      "decode_tokens_per_s": statistics.median(decode), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
