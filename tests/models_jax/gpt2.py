"""A GPT-2-shaped decoder in Flax linen: token + position embeddings, pre-norm blocks with
causal multi-head attention and a tanh-GELU MLP, final layer norm, tied LM head.

The test runs a tiny configuration; the benchmark the GPT-2-medium one (24 layers, d 1024,
16 heads, sequence 1024, vocabulary 50257).
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

LAYERS, DIM, HEADS, VOCAB, SEQ, BATCH = 2, 32, 4, 50, 16, 2


class Block(nn.Module):
    dim: int
    heads: int

    @nn.compact
    def __call__(self, x):
        b, s, d = x.shape
        e = d // self.heads
        q, k, v = jnp.split(nn.Dense(3 * d, name="attn")(nn.LayerNorm()(x)), 3, axis=-1)
        q, k, v = (t.reshape(b, s, self.heads, e) for t in (q, k, v))
        scores = jnp.einsum("bqhe,bkhe->bhqk", q, k) / jnp.sqrt(e).astype(x.dtype)
        scores = jnp.where(jnp.tril(jnp.ones((s, s), bool)), scores, -1e9)
        o = jnp.einsum("bhqk,bkhe->bqhe", jax.nn.softmax(scores, axis=-1), v).reshape(b, s, d)
        x = x + nn.Dense(d, name="proj")(o)
        h = nn.gelu(nn.Dense(4 * d, name="fc")(nn.LayerNorm()(x)), approximate=True)
        return x + nn.Dense(d, name="out")(h)


class Model(nn.Module):
    layers: int = LAYERS
    dim: int = DIM
    heads: int = HEADS
    vocab: int = VOCAB
    seq: int = SEQ

    @nn.compact
    def __call__(self, ids):
        wte = nn.Embed(self.vocab, self.dim, name="wte")
        x = wte(ids) + nn.Embed(self.seq, self.dim, name="wpe")(jnp.arange(ids.shape[1]))
        for _ in range(self.layers):
            x = Block(self.dim, self.heads)(x)
        return wte.attend(nn.LayerNorm()(x))


def get_init_inputs():
    return (LAYERS, DIM, HEADS, VOCAB, SEQ)


def get_inputs():
    return (np.random.default_rng(35).integers(0, VOCAB, (BATCH, SEQ), dtype=np.int32),)
