"""An embedding lookup (gather of rows) followed by mean pooling."""

import jax
import jax.numpy as jnp

V, D, B, S = 50, 16, 2, 6


def get_params():
    return {"table": jax.random.normal(jax.random.PRNGKey(10), (V, D))}


def get_inputs():
    return (jax.random.randint(jax.random.PRNGKey(11), (B, S), 0, V),)


def model(p, ids):
    return jnp.take(p["table"], ids, axis=0).mean(axis=1)
