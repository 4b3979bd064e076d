"""An embedding lookup (gather of rows) followed by mean pooling."""

import jax.numpy as jnp
import numpy as np

V, D, B, S = 50, 16, 2, 6


def normal(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


def get_params():
    return {"table": normal(np.random.default_rng(10), (V, D))}


def get_inputs():
    return (np.random.default_rng(11).integers(0, V, (B, S), dtype=np.int32),)


def model(p, ids):
    return jnp.take(p["table"], ids, axis=0).mean(axis=1)
