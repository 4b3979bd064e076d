"""fori_loop with traced bounds (a while loop on a counter): unrolled like a scan."""

import jax.numpy as jnp
import numpy as np
from jax import lax

B, H, STEPS = 2, 8, 3


def normal(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


def get_params():
    return {"w": normal(np.random.default_rng(32), (H, H)) * 0.3}


def get_inputs():
    return (normal(np.random.default_rng(33), (B, H)),)


def model(p, h):
    return lax.fori_loop(jnp.int32(0), jnp.int32(STEPS), lambda i, c: jnp.tanh(c @ p["w"] + i), h)
