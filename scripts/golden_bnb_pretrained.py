#!/usr/bin/env python3
"""Makes the bitsandbytes-quantized Hugging Face folders of weft's loading tests, and their goldens.

Loads tests/models/data/tiny_llama with transformers + BitsAndBytesConfig on the CPU, saves the
quantized model with save_pretrained (the bytes weft must adopt as they are) beside tiny_llama's
tokenizer.json, and writes:

  tiny_llama_nf4_bnb/   NF4, double quantization, compute dtype float32
  tiny_llama_fp4_bnb/   FP4, no double quantization, compute dtype float32
  tiny_llama_int8_bnb/  LLM.int8() (threshold 6.0), llm_int8_skip_modules ["down_proj"]: the MLP's
                        down projections stay float and, the list being explicit, transformers
                        quantizes lm_head too
  bnb_goldens.json      per folder: a prompt, the logits of every position, and the greedy
                        continuation (generate(do_sample=False), 12 new tokens); for the NF4
                        folder also "logits_bfloat16": the same prompt with bnb_4bit_compute_dtype
                        bfloat16 (the compute dtype changes the product, not the stored bytes)

Where the goldens come from:
  int8  transformers' quantized model itself (bitsandbytes' CPU LLM.int8() product).
  4-bit the float LlamaForCausalLM holding each quantized layer's weight decoded from the saved
        bytes, with the compute dtype applied around every quantized projection (input and output
        rounded to it, weight decoded in it) — what bitsandbytes' 4-bit forward computes. The
        quantized model's own CPU forward cannot be used: bitsandbytes 0.50's CPU dequantize_4bit
        takes the blocks row by row (absmax index = row * ceil(cols / blocksize) + col / blocksize),
        while quantize_4bit wrote them over the flat tensor, so for rows shorter than a block (this
        model's 32 inputs, blocksize 64) it scales most values by another block's absmax. The
        decode here reads the blocks over the flat tensor, as they were written (it goes through
        bitsandbytes' dequantize with the shape given as one row, which makes the two readings
        agree), and the script checks that every decoded weight is within half an NF4/FP4 code
        step of the float weight it came from.

Needs torch, transformers, safetensors, bitsandbytes and accelerate (scripts only; CI never runs it):
    /work/venv/bin/python scripts/golden_bnb_pretrained.py
"""
import copy
import json
import os
import shutil

import torch
import bitsandbytes as bnb
import bitsandbytes.functional as F
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, BitsAndBytesConfig, LlamaForCausalLM

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models", "data")
FLOAT = os.path.join(ROOT, "tiny_llama")
PROMPT = [1, 2, 3, 4, 5, 6, 7, 8]
NEW_TOKENS = 12

FOLDERS = {
    "tiny_llama_nf4_bnb": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                             bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.float32),
    "tiny_llama_fp4_bnb": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="fp4",
                                             bnb_4bit_use_double_quant=False, bnb_4bit_compute_dtype=torch.float32),
    "tiny_llama_int8_bnb": BitsAndBytesConfig(load_in_8bit=True, llm_int8_threshold=6.0,
                                              llm_int8_skip_modules=["down_proj"]),
}


def flat_decode(param):
    """A Params4bit's weight decoded with its blocks over the flat tensor, in float32."""
    state = copy.copy(param.quant_state)
    if state.nested:
        state.absmax = F.dequantize_blockwise(state.absmax, state.state2) + state.offset
        state.nested = False
    rows, cols = state.shape
    state.shape = torch.Size([1, rows * cols])
    state.dtype = torch.float32
    return F.dequantize_4bit(param.data, state).reshape(rows, cols)


class ComputeDtypeLinear(torch.nn.Module):
    """bitsandbytes' 4-bit forward: x and the decoded weight in the compute dtype, the result too."""

    def __init__(self, weight, compute_dtype):
        super().__init__()
        self.weight, self.compute_dtype = weight, compute_dtype

    def forward(self, x):
        y = torch.nn.functional.linear(x.to(self.compute_dtype), self.weight.to(self.compute_dtype))
        return y.to(x.dtype)


def four_bit_reference(quantized, compute_dtype):
    """The float model with every Linear4bit replaced by its flat decode in the compute dtype."""
    reference = LlamaForCausalLM.from_pretrained(FLOAT).eval()
    floats = load_file(os.path.join(FLOAT, "model.safetensors"))
    for name, module in quantized.named_modules():
        if not isinstance(module, bnb.nn.Linear4bit):
            continue
        weight = flat_decode(module.weight)
        original = floats[name + ".weight"]
        step = {"nf4": 0.1519, "fp4": 0.1667}[module.weight.quant_state.quant_type]
        blocks = original.reshape(-1, 64).abs().amax(1, keepdim=True)
        assert ((weight.reshape(-1, 64) - original.reshape(-1, 64)).abs() <= step * blocks * 1.01 + 1e-6).all(), name
        parent, child = name.rsplit(".", 1)
        setattr(reference.get_submodule(parent), child, ComputeDtypeLinear(weight, compute_dtype))
    return reference


def goldens_of(model):
    with torch.no_grad():
        logits = model(torch.tensor([PROMPT])).logits[0].float()
        out = model.generate(torch.tensor([PROMPT]), max_new_tokens=NEW_TOKENS, do_sample=False,
                             attention_mask=torch.ones(1, len(PROMPT), dtype=torch.long), pad_token_id=0)
    return {"prompt": PROMPT, "logits": [[round(v, 7) for v in row] for row in logits.tolist()],
            "greedy": out[0, len(PROMPT):].tolist()}


def main():
    goldens = {}
    for name, config in FOLDERS.items():
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(FLOAT, quantization_config=config, device_map="cpu").eval()
        out = os.path.join(ROOT, name)
        shutil.rmtree(out, ignore_errors=True)
        model.save_pretrained(out)
        shutil.copy(os.path.join(FLOAT, "tokenizer.json"), out)  # so the folder runs through weft-generate
        if config.load_in_4bit:
            goldens[name] = goldens_of(four_bit_reference(model, config.bnb_4bit_compute_dtype))
            if name == "tiny_llama_nf4_bnb":
                goldens[name]["logits_bfloat16"] = goldens_of(four_bit_reference(model, torch.bfloat16))["logits"]
        else:
            goldens[name] = goldens_of(model)
    with open(os.path.join(ROOT, "bnb_goldens.json"), "w") as f:
        json.dump(goldens, f)
        f.write("\n")


if __name__ == "__main__":
    main()
