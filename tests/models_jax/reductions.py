"""Reductions: sum, max, argmax, mean, variance and logsumexp over different axes."""

import jax
import jax.numpy as jnp
import numpy as np

B, N, D = 3, 7, 10


def normal(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


def get_inputs():
    return (normal(np.random.default_rng(24), (B, N, D)),)


def model(x):
    return (x.sum(axis=(0, 2)), x.max(axis=1), jnp.argmax(x, axis=-1), x.mean(axis=-1), x.var(axis=1),
            jax.nn.logsumexp(x, axis=-1))
