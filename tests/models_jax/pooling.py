"""Pooling windows on NHWC images: max 3x3/2 SAME, average 2x2/2, average 3x3/1 with padding."""

import flax.linen as nn
import numpy as np


def normal(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


def get_inputs():
    return (normal(np.random.default_rng(25), (2, 9, 9, 4)),)


def model(x):
    return (nn.max_pool(x, (3, 3), (2, 2), padding="SAME"), nn.avg_pool(x, (2, 2), (2, 2)),
            nn.avg_pool(x, (3, 3), (1, 1), padding=((1, 1), (1, 1))))
