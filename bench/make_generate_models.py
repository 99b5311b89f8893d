#!/usr/bin/env python3
"""Writes the random-init Hugging Face folders that bench/compare_generate.sh runs, once:

  DIR/gpt2-124m   GPT2LMHeadModel of GPT-2 124M's shape (12 layers, 12 heads, 768 wide, V 50257)
  DIR/llama-1.1b  LlamaForCausalLM of a 1.1B Llama shape (22 layers, 2048 wide, 32 heads, 4 KV
                  heads, MLP 5632, V 32000, 2048 positions), float32 on disk (4.4 GB)

No weights are downloaded: transformers builds the models from their configs with seed 0.
Needs torch and transformers.   python3 bench/make_generate_models.py DIR
"""
import argparse
import os

import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM


def main():
    parser = argparse.ArgumentParser(description="Writes random-init GPT-2 124M and 1.1B Llama folders, once.")
    parser.add_argument("dir", help="where the model folders go")
    root = parser.parse_args().dir
    torch.manual_seed(0)
    path = os.path.join(root, "gpt2-124m")
    if not os.path.exists(os.path.join(path, "model.safetensors")):
        GPT2LMHeadModel(GPT2Config()).save_pretrained(path)
    path = os.path.join(root, "llama-1.1b")
    if not os.path.exists(os.path.join(path, "model.safetensors")) and \
            not os.path.exists(os.path.join(path, "model.safetensors.index.json")):
        config = LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                             num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048,
                             rms_norm_eps=1e-5, tie_word_embeddings=False)
        LlamaForCausalLM(config).save_pretrained(path)


if __name__ == "__main__":
    main()
