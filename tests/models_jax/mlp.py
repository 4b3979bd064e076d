"""A two-layer MLP as a pure JAX function with explicit parameters."""

import jax
import jax.numpy as jnp
import numpy as np

B, D, H, O = 8, 32, 64, 16


def normal(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


def get_params():
    rng = np.random.default_rng(1)
    return {"w1": normal(rng, (D, H)) * 0.1, "b1": jnp.zeros(H),
            "w2": normal(rng, (H, O)) * 0.1, "b2": jnp.zeros(O)}


def get_inputs():
    return (normal(np.random.default_rng(2), (B, D)),)


def model(params, x):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]
