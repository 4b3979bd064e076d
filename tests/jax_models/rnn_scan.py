"""An Elman RNN written with lax.scan (static length: unrolled)."""

import jax
import jax.numpy as jnp

T, B, D, H = 4, 2, 8, 16


def get_params():
    k1, k2 = jax.random.split(jax.random.PRNGKey(8))
    return {"wx": jax.random.normal(k1, (D, H)) * 0.2, "wh": jax.random.normal(k2, (H, H)) * 0.2}


def get_inputs():
    return (jax.random.normal(jax.random.PRNGKey(9), (T, B, D)),)


def model(p, xs):
    def step(h, x):
        h = jnp.tanh(x @ p["wx"] + h @ p["wh"])
        return h, h

    h, ys = jax.lax.scan(step, jnp.zeros((B, H)), xs)
    return ys
