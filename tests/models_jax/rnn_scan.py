"""An Elman RNN written with lax.scan (static length: unrolled)."""

import jax
import jax.numpy as jnp
import numpy as np

T, B, D, H = 4, 2, 8, 16


def normal(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


def get_params():
    rng = np.random.default_rng(8)
    return {"wx": normal(rng, (D, H)) * 0.2, "wh": normal(rng, (H, H)) * 0.2}


def get_inputs():
    return (normal(np.random.default_rng(9), (T, B, D)),)


def model(p, xs):
    def step(h, x):
        h = jnp.tanh(x @ p["wx"] + h @ p["wh"])
        return h, h

    h, ys = jax.lax.scan(step, jnp.zeros((B, H)), xs)
    return ys
