"""One decode step of a Llama-shaped model with a KV cache, in plain PyTorch.

Each of ``batch`` sequences has ``past`` tokens in the cache and generates one more: the new token
goes through every block (RMSNorm, rotary embedding at its position, GQA attention over the cache
plus itself, SwiGLU) and the head gives its logits. The cache is an input per layer
(``k_cache``/``v_cache`` of ``[batch, kv_heads, past, head_dim]``); the step returns the logits and
the new token's keys and values (what a server appends to its cache). Attention reads the cache
once: scores against the cache and against the new key are computed apart and joined for the
softmax (flash-decoding style), so no step copies the cache.

``Model()`` is the Llama-3-70B shape (80 layers, width 8192, 64 query heads and 8 key/value heads
of 128, feed-forward 28672, vocabulary 128256: Meta's model card and ``config.json`` of
meta-llama/Meta-Llama-3-70B) decoding batch 1 with 4096 cached tokens; capture it in bf16 (the
export runs on meta tensors, no weight memory) and bound it on 8 H100 with ``--parallel tp=8``.
``Small`` (``--entry Small --inputs-from small_inputs``) is a two-block twin for tests.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, PAST = 1, 4096


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class Block(nn.Module):
    def __init__(self, d, heads, kv_heads, ff):
        super().__init__()
        self.kv, self.g, self.hd = kv_heads, heads // kv_heads, d // heads
        self.norm1 = nn.RMSNorm(d, eps=1e-5)
        self.norm2 = nn.RMSNorm(d, eps=1e-5)
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate = nn.Linear(d, ff, bias=False)
        self.up = nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)

    def forward(self, x, k_cache, v_cache, cos, sin):
        b, d = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, self.kv, self.g, self.hd)
        k = self.k(h).view(b, self.kv, 1, self.hd)
        v = self.v(h).view(b, self.kv, 1, self.hd)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scale = self.hd ** -0.5
        s_cache = torch.matmul(q, k_cache.transpose(2, 3)) * scale  # [b, kv, g, past]
        s_new = torch.matmul(q, k.transpose(2, 3)) * scale  # [b, kv, g, 1]
        p = torch.softmax(torch.cat([s_cache, s_new], dim=-1), dim=-1)
        past = k_cache.shape[2]
        a = torch.matmul(p[..., :past], v_cache) + torch.matmul(p[..., past:], v)  # [b, kv, g, hd]
        x = x + self.o(a.reshape(b, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h)), k, v


#: the published Llama-3-70B configuration, and the small twin's
LLAMA_70B = dict(vocab=128256, d=8192, layers=80, heads=64, kv_heads=8, ff=28672)
SMALL = dict(vocab=256, d=64, layers=2, heads=8, kv_heads=8, ff=128)


class Model(nn.Module):
    def __init__(self, vocab=128256, d=8192, layers=80, heads=64, kv_heads=8, ff=28672):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads, kv_heads, ff) for _ in range(layers))
        self.norm = nn.RMSNorm(d, eps=1e-5)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids, cos, sin, *cache):
        x = self.embed(ids)
        new = []
        for i, blk in enumerate(self.blocks):
            x, k, v = blk(x, cache[2 * i], cache[2 * i + 1], cos, sin)
            new += [k, v]
        return (self.head(self.norm(x)), *new)


def step_inputs(shape, batch=BATCH, past=PAST):
    """Token ids of the new tokens, the rotary cos/sin at their position, and each layer's cache."""
    hd = shape["d"] // shape["heads"]
    cache = [torch.randn(batch, shape["kv_heads"], past, hd) for _ in range(2 * shape["layers"])]
    angle = torch.rand(hd)
    return [torch.randint(0, shape["vocab"], (batch,)), angle.cos(), angle.sin(), *cache]


class Small(Model):
    """Two blocks at width 64 (8 query heads, 8 key/value heads of 8), batch 2 with 32 cached tokens."""

    def __init__(self):
        super().__init__(**SMALL)


def get_init_inputs():
    return []


def get_inputs():
    return step_inputs(LLAMA_70B)


def small_inputs():
    return step_inputs(SMALL, batch=2, past=32)
