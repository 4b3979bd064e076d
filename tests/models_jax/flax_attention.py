"""A Flax linen transformer encoder block: self-attention, layer norm, GELU MLP, dropout off."""

import flax.linen as nn
import numpy as np


class Model(nn.Module):
    dim: int = 32
    heads: int = 4

    @nn.compact
    def __call__(self, x):
        h = nn.LayerNorm()(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads, deterministic=True)(h, h)
        h = nn.LayerNorm()(x)
        h = nn.Dense(4 * self.dim)(h)
        h = nn.gelu(h)
        return x + nn.Dense(self.dim)(h)


def get_init_inputs():
    return (32, 4)


def get_inputs():
    return (np.random.default_rng(12).standard_normal((2, 10, 32), dtype=np.float32),)
