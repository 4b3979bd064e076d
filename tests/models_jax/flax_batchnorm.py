"""A Flax linen MLP with batch norm (running statistics) and dropout off."""

import flax.linen as nn
import numpy as np


class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = nn.Dense(32)(x)
        h = nn.relu(nn.BatchNorm(use_running_average=True)(h))
        h = nn.Dropout(0.1, deterministic=True)(h)
        return nn.Dense(5)(nn.BatchNorm(use_running_average=True, use_bias=False)(h))


def get_init_inputs():
    return ()


def get_inputs():
    return (np.random.default_rng(31).standard_normal((6, 12), dtype=np.float32),)
