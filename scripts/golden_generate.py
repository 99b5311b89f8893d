#!/usr/bin/env python3
"""Makes the Hugging Face folders and goldens of weft's loading and generation tests.

Writes, under tests/models/data/ (small enough to commit):
  tiny_gpt2/      GPT2LMHeadModel  (vocab 300, 2 layers, 4 heads, 32 wide, 64 positions)
  tiny_llama/     LlamaForCausalLM (vocab 300, 2 layers, 4 heads / 2 KV heads, 32 wide, MLP 64,
                  llama3 rope scaling, untied head)
  tiny_llama_tied/ LlamaForCausalLM (tied embeddings, linear rope scaling, attention biases, 1 KV head)
  generate_goldens.json  per model: the prompts, the logits of the first prompt (every position),
                  and transformers' greedy continuation of every prompt (generate(do_sample=False))

Each folder is what save_pretrained writes (config.json, generation_config.json,
model.safetensors) plus a tokenizer.json: a byte-level BPE of 300 tokens ("<|endoftext|>" = 0, the
256 bytes, 43 merges) trained with `tokenizers` on /usr/share/common-licenses/GPL-3, so the
folders also run end to end through weft-generate and the C API. The weights are random (seed 0),
drawn with a larger spread than a trained model's initialisation (initializer_range 0.4) so that
greedy choices are far from ties and float32 rounding cannot flip them. eos_token_id is 0.

The bitsandbytes-quantized folders made from tiny_llama come from scripts/golden_bnb_pretrained.py.

Needs torch, transformers and safetensors (scripts only; CI never runs this):
    /work/venv/bin/python scripts/golden_generate.py
"""
import json
import os

import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models", "data")
PROMPTS = [[1, 2, 3, 4, 5, 6, 7, 8], [42], [290, 17, 17, 3]]
NEW_TOKENS = 20
TEXT_PROMPT = "The licenses for most software"


def models():
    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=300, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                      initializer_range=0.4, bos_token_id=0, eos_token_id=0))
    llama = LlamaForCausalLM(LlamaConfig(
        vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, initializer_range=0.4,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 16},
        bos_token_id=0, eos_token_id=0, tie_word_embeddings=False))
    tied = LlamaForCausalLM(LlamaConfig(
        vocab_size=300, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=1, max_position_embeddings=64, rms_norm_eps=1e-6, initializer_range=0.4,
        rope_theta=500.0, rope_scaling={"rope_type": "linear", "factor": 2.0}, attention_bias=True,
        bos_token_id=0, eos_token_id=0, tie_word_embeddings=True))
    return {"tiny_gpt2": gpt2, "tiny_llama": llama, "tiny_llama_tied": tied}


def tokenizer():
    t = ByteLevelBPETokenizer()
    t.train(["/usr/share/common-licenses/GPL-3"], vocab_size=300, min_frequency=2, special_tokens=["<|endoftext|>"])
    return t


def main():
    goldens = {}
    tok = tokenizer()
    for name, model in models().items():
        model.eval()
        # Norm weights and biases random too, so a loader that skips them fails the logits check.
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if p.dim() == 1:
                    p.copy_(1.0 + 0.2 * torch.randn_like(p) if "weight" in pname else 0.2 * torch.randn_like(p))
        model.save_pretrained(os.path.join(ROOT, name))
        tok.save(os.path.join(ROOT, name, "tokenizer.json"))
        with torch.no_grad():
            logits = model(torch.tensor([PROMPTS[0]])).logits[0]
        continuations = []
        for prompt in PROMPTS:
            out = model.generate(torch.tensor([prompt]), max_new_tokens=NEW_TOKENS, do_sample=False,
                                 attention_mask=torch.ones(1, len(prompt), dtype=torch.long), pad_token_id=0)
            continuations.append(out[0, len(prompt):].tolist())
        # End to end through the tokenizer: the text prompt's ids, and the greedy text.
        text_ids = tok.encode(TEXT_PROMPT).ids
        out = model.generate(torch.tensor([text_ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                             attention_mask=torch.ones(1, len(text_ids), dtype=torch.long), pad_token_id=0)
        completion = out[0, len(text_ids):].tolist()
        goldens[name] = {"prompts": PROMPTS, "logits": [[round(v, 7) for v in row] for row in logits.tolist()],
                         "greedy": continuations, "new_tokens": NEW_TOKENS, "text_prompt": TEXT_PROMPT,
                         "text_prompt_ids": text_ids, "text_completion_ids": completion,
                         "text_completion": tok.decode(completion, skip_special_tokens=True)}
    with open(os.path.join(ROOT, "generate_goldens.json"), "w") as f:
        json.dump(goldens, f)
        f.write("\n")


if __name__ == "__main__":
    main()
