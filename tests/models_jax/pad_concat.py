"""Padding (constant, asymmetric), concatenation, strided slices and reversal by slicing."""

import jax.numpy as jnp
import numpy as np


def normal(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


def get_inputs():
    rng = np.random.default_rng(30)
    return (normal(rng, (3, 5, 4)), normal(rng, (3, 2, 4)))


def model(a, b):
    c = jnp.concatenate([a, b, a[:, :1]], axis=1)                      # [3, 8, 4]
    p = jnp.pad(c, ((0, 0), (2, 1), (1, 1)), constant_values=0.5)      # [3, 11, 6]
    return p[:, ::2, 1:5] + 1.0, jnp.concatenate([a, a * 2], axis=-1)
