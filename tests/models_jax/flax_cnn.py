"""A Flax linen CNN: conv, batch norm (running statistics), average pooling, dense."""

import flax.linen as nn
import numpy as np


class Model(nn.Module):
    features: int = 8

    @nn.compact
    def __call__(self, x):
        x = nn.Conv(self.features, (3, 3))(x)
        x = nn.BatchNorm(use_running_average=True)(x)
        x = nn.relu(x)
        x = nn.avg_pool(x, (2, 2), (2, 2))
        x = x.reshape(x.shape[0], -1)
        return nn.Dense(10)(x)


def get_init_inputs():
    return (8,)


def get_inputs():
    return (np.random.default_rng(7).standard_normal((2, 8, 8, 3), dtype=np.float32),)
