"""A pre-norm transformer block (multi-head causal attention + GELU MLP) in bf16, ready for ``solar-io sweep``.

Sweepable parameters, declared the two ways ``solar-io sweep`` understands:

- ``batch`` and ``seq`` are keyword parameters of ``get_inputs``;
- ``d_model``, ``heads`` and ``ff_mult`` are module constants in the ``SWEEPABLE`` dict (read
  when the file is imported, so derived constants follow them).

    solar-io sweep examples/models/sweep_transformer.py --set batch=1,2,4,...,64 \\
        --set seq=512,1024,...,8192 --hw b200,h100-pcie,a6000,thor -o build/sweep
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

SWEEPABLE = {"d_model": 1024, "heads": 16, "ff_mult": 4}

D_MODEL = SWEEPABLE["d_model"]
HEADS = SWEEPABLE["heads"]
FF = SWEEPABLE["ff_mult"] * D_MODEL
DTYPE = torch.bfloat16


class Model(nn.Module):
    def __init__(self, d=D_MODEL, heads=HEADS, ff=FF):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d, dtype=DTYPE)
        self.qkv = nn.Linear(d, 3 * d, bias=False, dtype=DTYPE)
        self.proj = nn.Linear(d, d, bias=False, dtype=DTYPE)
        self.norm2 = nn.LayerNorm(d, dtype=DTYPE)
        self.up = nn.Linear(d, ff, dtype=DTYPE)
        self.down = nn.Linear(ff, d, dtype=DTYPE)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


def get_inputs(batch=8, seq=1024):
    return [torch.randn(batch, seq, D_MODEL, dtype=DTYPE)]


def get_init_inputs():
    return []
