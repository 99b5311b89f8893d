#!/usr/bin/env python3
"""Golden values for weft's GPT fidelity test (tests/models/test_gpt.cpp), made with PyTorch.

Builds a tiny nanoGPT-structured model (its own definition below: pre-LN blocks, tanh GELU,
F.scaled_dot_product_attention with is_causal=True, learned positions, lm_head tied to wte,
nanoGPT's init), and writes to tests/models/data/:

  gpt_tiny_init.safetensors    the initial weights under the checkpoint keys, nn.Linear layout
                               [out, in]; lm_head.weight is stored as a copy of
                               transformer.wte.weight so a strict load sees every key
  gpt_tiny_golden.safetensors  x, y: (steps, B, T) int64 batches; losses: (steps,) float64, the
                               loss of each batch before its step

The training run, float32 on the CPU: AdamW(lr 1e-2, betas (0.9, 0.95), eps 1e-8, weight decay
0.1 on parameters of dim >= 2 and 0 on the others, nanoGPT's grouping, decayed group first), no
gradient clipping, no dropout; PyTorch's single-tensor AdamW (foreach=False).

Run with /work/venv/bin/python (torch, safetensors). CI never runs it; its outputs are committed.
"""
import math
import pathlib

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

VOCAB, BLOCK, LAYERS, HEADS, WIDTH = 65, 16, 2, 2, 32
BATCH, STEPS = 4, 10
LR = 1e-2  # large enough that ten steps move the loss well beyond float32 noise
# The batches are windows of this text (Genesis 1:1-5, KJV, public domain), one id per character
# (its index in the sorted character set), so the model has something to learn in ten steps.
TEXT = ("In the beginning God created the heaven and the earth. And the earth was without form, and "
        "void; and darkness was upon the face of the deep. And the Spirit of God moved upon the face "
        "of the waters. And God said, Let there be light: and there was light. And God saw the light, "
        "that it was good: and God divided the light from the darkness. And God called the light Day, "
        "and the darkness he called Night. And the evening and the morning were the first day.")
OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "models" / "data"


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(WIDTH, 3 * WIDTH)
        self.c_proj = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, HEADS, C // HEADS).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(WIDTH, 4 * WIDTH)
        self.c_proj = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(WIDTH)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(WIDTH)
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(VOCAB, WIDTH),
            wpe=nn.Embedding(BLOCK, WIDTH),
            h=nn.ModuleList(Block() for _ in range(LAYERS)),
            ln_f=nn.LayerNorm(WIDTH),
        ))
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * LAYERS))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def main():
    torch.manual_seed(1337)
    torch.set_num_threads(1)
    model = GPT()
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    assert state["lm_head.weight"].equal(state["transformer.wte.weight"])

    chars = sorted(set(TEXT))
    assert len(chars) <= VOCAB
    ids = torch.tensor([chars.index(c) for c in TEXT])
    starts = torch.randint(0, len(ids) - BLOCK - 1, (STEPS, BATCH), generator=torch.Generator().manual_seed(7))
    data = torch.stack([torch.stack([ids[s:s + BLOCK + 1] for s in row]) for row in starts])
    x, y = data[:, :, :-1].contiguous(), data[:, :, 1:].contiguous()

    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LR, betas=(0.9, 0.95), eps=1e-8, foreach=False)
    losses = []
    for step in range(STEPS):
        loss = model(x[step], y[step])
        losses.append(loss.item())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    OUT.mkdir(parents=True, exist_ok=True)
    save_file(state, OUT / "gpt_tiny_init.safetensors", metadata={"format": "pt"})
    save_file({"x": x, "y": y, "losses": torch.tensor(losses, dtype=torch.float64)},
              OUT / "gpt_tiny_golden.safetensors", metadata={"format": "pt"})
    for step, loss in enumerate(losses):
        print(f"step {step}: loss {loss:.7f}")


if __name__ == "__main__":
    main()
