"""A flax.nnx MLP with layer norm."""

import numpy as np
from flax import nnx


class Model(nnx.Module):
    def __init__(self, din, dh, dout, *, rngs):
        self.fc1 = nnx.Linear(din, dh, rngs=rngs)
        self.norm = nnx.LayerNorm(dh, rngs=rngs)
        self.fc2 = nnx.Linear(dh, dout, rngs=rngs)

    def __call__(self, x):
        return self.fc2(nnx.silu(self.norm(self.fc1(x))))


def get_init_inputs():
    return (16, 32, 8)


def get_inputs():
    return (np.random.default_rng(13).standard_normal((4, 16), dtype=np.float32),)
