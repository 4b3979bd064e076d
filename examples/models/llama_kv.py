"""A Llama-shaped decoder that takes a KV cache: one prefill or decode step of a serving loop.

The blocks are those of ``llama_decoder.py`` (RMSNorm, rotary embeddings, GQA attention,
SwiGLU), written for ``solar-io capture --phase prefill|decode`` (solar_io/frontends/torch/phases.py):
``kv_cache_layout()`` tells the cache's shape, and ``forward(ids, past_key_values, block_table,
cache, kv_len)`` takes per-layer ``(k, v)`` of ``kv_len`` cached positions (page pools and a block table
when ``cache='paged'``) and returns ``(logits, new_cache)``:

- ``dynamic``: the grown cache ``cat(past, new)`` per layer (what Hugging Face's DynamicCache does);
- ``static`` / ``paged``: only the new entries (the writes into a preallocated buffer / its pages).

Attention over ``past + new`` positions: the new tokens' queries see every cached position and
the new ones causally (decode: one full row; prefill with no cache: the causal triangle, torch's
``is_causal``). Rotary angles are computed for the step's positions kv_len .. kv_len + seq - 1.

``Model()`` is tiny (tests); ``Llama3_8B()`` is the published Llama 3 8B configuration (32 layers,
width 4096, 32 query / 8 key-value heads of 128, feed-forward 14336, vocabulary 128256: Meta's
model card and ``config.json`` of meta-llama/Meta-Llama-3-8B), e.g.
``solar-io capture examples/models/llama_kv.py --entry examples/models/llama_kv.py:Llama3_8B
--phase decode --batch 64 --kv-len 8192 --dtype bf16``. The classic decode roofline of that shape:
``solar-io sweep examples/models/llama_kv.py --phase decode --cache static --dtype bf16 --set
shape=llama3-8b --set batch=1,8,64 --set kv_len=1024,8192 --hw h100-sxm``.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class Block(nn.Module):
    def __init__(self, d, heads, kv_heads, ff):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv_heads, d // heads
        self.norm1 = nn.RMSNorm(d, eps=1e-5)
        self.norm2 = nn.RMSNorm(d, eps=1e-5)
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate = nn.Linear(d, ff, bias=False)
        self.up = nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)

    def forward(self, x, cos, sin, past_k, past_v, mask):
        b, s, d = x.shape
        h = self.norm1(x)
        q = self.q(h).view(b, s, self.h, self.hd).transpose(1, 2)
        k = self.k(h).view(b, s, self.kv, self.hd).transpose(1, 2)
        v = self.v(h).view(b, s, self.kv, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        keys, values = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        if past_k.shape[2] == 0:  # prefill without a cache: the causal triangle
            a = F.scaled_dot_product_attention(q, keys, values, is_causal=True, enable_gqa=True)
        else:  # s == 1: the full row; s > 1: every cached position plus the causal triangle of the new
            a = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h)), k, v, keys, values


#: Configurations by name; ``Model()`` builds ``SWEEPABLE["shape"]`` (``solar-io sweep --set shape=llama3-8b``).
SHAPES = {"tiny": dict(vocab=256, d=64, layers=2, heads=4, kv_heads=2, ff=160),
          "llama3-8b": dict(vocab=128256, d=4096, layers=32, heads=32, kv_heads=8, ff=14336)}
SWEEPABLE = {"shape": "tiny"}


class Model(nn.Module):
    def __init__(self, vocab=None, d=None, layers=None, heads=None, kv_heads=None, ff=None):
        super().__init__()
        given = dict(vocab=vocab, d=d, layers=layers, heads=heads, kv_heads=kv_heads, ff=ff)
        cfg = {**SHAPES[SWEEPABLE["shape"]], **{k: v for k, v in given.items() if v is not None}}
        vocab, d, layers, heads, kv_heads, ff = (cfg[k] for k in ("vocab", "d", "layers", "heads", "kv_heads", "ff"))
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads, kv_heads, ff) for _ in range(layers))
        self.norm = nn.RMSNorm(d, eps=1e-5)
        self.head = nn.Linear(d, vocab, bias=False)
        hd = d // heads
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd)), persistent=False)

    def kv_cache_layout(self):
        return len(self.blocks), self.kv_heads, self.hd

    def forward(self, ids, past_key_values=None, block_table=None, cache="dynamic", kv_len=None):
        b, s = ids.shape
        if past_key_values is None:  # no cache: a prefill from position 0
            empty = torch.zeros(b, self.kv_heads, 0, self.hd, dtype=self.embed.weight.dtype, device=ids.device)
            past_key_values = [(empty, empty)] * len(self.blocks)
        if cache == "paged":  # pools (pages, page, kv_heads, hd) -> this batch's (b, kv_heads, kv_len, hd)
            page = past_key_values[0][0].shape[1]
            at = torch.arange(kv_len, device=ids.device)  # each valid position's slot (vLLM's slot mapping)
            slots = block_table[:, at // page].long() * page + at % page
            past = [(kp.reshape(-1, self.kv_heads, self.hd)[slots].transpose(1, 2),
                     vp.reshape(-1, self.kv_heads, self.hd)[slots].transpose(1, 2)) for kp, vp in past_key_values]
        else:
            past = list(past_key_values)
        kv_len = past[0][0].shape[2]
        pos = (torch.arange(s, device=ids.device) + kv_len).float()
        freqs = torch.outer(pos, self.inv_freq)
        emb = torch.cat([freqs, freqs], dim=-1)
        dt = self.embed.weight.dtype
        cos, sin = emb.cos().to(dt), emb.sin().to(dt)
        mask = None
        if s > 1 and kv_len:  # chunked prefill: query i sees positions <= kv_len + i
            mask = torch.arange(kv_len + s, device=ids.device)[None, :] <= \
                (torch.arange(s, device=ids.device) + kv_len)[:, None]
        x = self.embed(ids)
        new = []
        for blk, (pk, pv) in zip(self.blocks, past, strict=True):
            x, k, v, keys, values = blk(x, cos, sin, pk, pv, mask)
            new.append((keys, values) if cache == "dynamic" else (k, v))
        return self.head(self.norm(x[:, -1:, :])), new


class Llama3_8B(Model):
    def __init__(self):
        super().__init__(**SHAPES["llama3-8b"])


def get_inputs():  # without --phase: a prefill of 32 tokens with no cache, batch 1
    return [torch.randint(0, SHAPES[SWEEPABLE["shape"]]["vocab"], (1, 32))]


def get_init_inputs():
    return []
