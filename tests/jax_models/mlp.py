"""A two-layer MLP as a pure JAX function with explicit parameters."""

import jax
import jax.numpy as jnp

B, D, H, O = 8, 32, 64, 16


def get_params():
    k1, k2 = jax.random.split(jax.random.PRNGKey(1))
    return {"w1": jax.random.normal(k1, (D, H)) * 0.1, "b1": jnp.zeros(H),
            "w2": jax.random.normal(k2, (H, O)) * 0.1, "b2": jnp.zeros(O)}


def get_inputs():
    return (jax.random.normal(jax.random.PRNGKey(2), (B, D)),)


def model(params, x):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]
