#!/usr/bin/env python3
"""The PyTorch peer of bench/bench_gpt.cpp: one GPT training step, the same cases and settings.

nanoGPT's model (pre-LN blocks, F.scaled_dot_product_attention with is_causal=True, tanh GELU,
learned positions, lm_head tied to wte, nanoGPT's init), eager mode, AdamW lr 1e-3, betas
(0.9, 0.95), weight decay 0.1 on parameters of dim >= 2 (PyTorch's default implementation for CPU
tensors), a fixed random batch. bf16-mixed: the forward and the loss under
torch.autocast(device, torch.bfloat16), as Lightning's bf16-mixed does; fp32 weights and optimizer.
--device cuda runs it all on the GPU (AdamW's default implementation there), each phase timed to
torch.cuda.synchronize().

Prints one JSON line per case: median and fastest step over --steps after --warmup, and the
medians of forward, backward and the optimizer step.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CASES = {  # vocab, context (positions), layers, heads, width, batch
    "char": (65, 64, 4, 4, 128, 12),
    "gpt2": (50257, 1024, 12, 12, 768, 4),
}
CONTEXT = 64  # tokens per sequence in the timed batch, both cases


class Attention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(width, 4 * width), c_proj=nn.Linear(4 * width, width)))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, positions, layers, heads, width):
        super().__init__()
        self.vocab = vocab
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, width), wpe=nn.Embedding(positions, width),
            h=nn.ModuleList(Block(width, heads) for _ in range(layers)), ln_f=nn.LayerNorm(width)))
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * layers))

    def forward(self, idx, targets):
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, self.vocab), targets.view(-1))


def run(case, precision, steps, warmup, device):
    vocab, positions, layers, heads, width, batch = CASES[case]
    torch.manual_seed(1337)
    model = GPT(vocab, positions, layers, heads, width).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(7)
    x = torch.randint(0, vocab, (batch, CONTEXT), generator=g).to(device)
    y = torch.randint(0, vocab, (batch, CONTEXT), generator=g).to(device)
    # A GPU runs ahead of the host: each phase ends when the device has done its work.
    settled = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    total, fwd, bwd, stp = [], [], [], []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        with torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16-mixed"):
            loss = model(x, y)
        settled()
        t1 = time.perf_counter()
        loss.backward()
        settled()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        settled()
        t3 = time.perf_counter()
        if i >= warmup:
            total.append(t3 - t0)
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
            stp.append(t3 - t2)
    med = lambda v: sorted(v)[len(v) // 2] * 1e3
    return {"side": "torch", "config": case, "precision": precision, "device": device,
            "threads": torch.get_num_threads(),
            "steps": steps, "ms_median": round(med(total), 3), "ms_min": round(min(total) * 1e3, 3),
            "ms_forward": round(med(fwd), 3), "ms_backward": round(med(bwd), 3), "ms_adamw": round(med(stp), 3),
            "version": torch.__version__}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", default="both", choices=["char", "gpt2", "both"])
    p.add_argument("--precision", default="both", choices=["32-true", "bf16-mixed", "both"])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: expected a CUDA GPU, got none")
    torch.set_num_threads(args.threads)
    configs = ["char", "gpt2"] if args.config == "both" else [args.config]
    precisions = ["32-true", "bf16-mixed"] if args.precision == "both" else [args.precision]
    for case in configs:
        for precision in precisions:
            print(json.dumps(run(case, precision, args.steps, args.warmup, args.device)), flush=True)


if __name__ == "__main__":
    main()
