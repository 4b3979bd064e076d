"""A flax.nnx MLP with layer norm."""

import jax
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
    return (jax.random.normal(jax.random.PRNGKey(13), (4, 16)),)
