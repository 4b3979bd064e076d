"""A Flax linen decoder: dense -> reshape -> two stride-2 transposed convolutions (4x4, SAME)."""

import flax.linen as nn
import numpy as np


class Model(nn.Module):
    @nn.compact
    def __call__(self, z):
        h = nn.Dense(4 * 4 * 16)(z).reshape(z.shape[0], 4, 4, 16)
        h = nn.relu(nn.ConvTranspose(8, (4, 4), (2, 2), padding="SAME")(h))     # 4x4 -> 8x8
        return nn.ConvTranspose(3, (4, 4), (2, 2), padding="SAME", use_bias=False)(h)  # -> 16x16


def get_init_inputs():
    return ()


def get_inputs():
    return (np.random.default_rng(23).standard_normal((2, 10), dtype=np.float32),)
