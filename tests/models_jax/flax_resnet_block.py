"""A Flax linen ResNet bottleneck stage (strided projection shortcut), global average pool, head."""

import flax.linen as nn
import numpy as np


class Bottleneck(nn.Module):
    width: int
    stride: int

    @nn.compact
    def __call__(self, x):
        norm = lambda: nn.BatchNorm(use_running_average=True)  # noqa: E731
        y = nn.relu(norm()(nn.Conv(self.width, (1, 1), use_bias=False)(x)))
        y = nn.relu(norm()(nn.Conv(self.width, (3, 3), (self.stride, self.stride), use_bias=False)(y)))
        y = norm()(nn.Conv(4 * self.width, (1, 1), use_bias=False)(y))
        s = norm()(nn.Conv(4 * self.width, (1, 1), (self.stride, self.stride), use_bias=False)(x))
        return nn.relu(y + s)


class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Conv(8, (7, 7), (2, 2), padding=((3, 3), (3, 3)), use_bias=False)(x)
        x = nn.max_pool(x, (3, 3), (2, 2), padding=((1, 1), (1, 1)))
        x = Bottleneck(4, 2)(x)
        return nn.Dense(10)(x.mean(axis=(1, 2)))


def get_init_inputs():
    return ()


def get_inputs():
    return (np.random.default_rng(14).standard_normal((2, 32, 32, 3), dtype=np.float32),)
