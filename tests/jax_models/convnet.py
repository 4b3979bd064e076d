"""A small conv net on MNIST shapes: NHWC convs (strided, padded, grouped), pooling, a dense head."""

import jax
import jax.numpy as jnp
from jax import lax

DN = ("NHWC", "HWIO", "NHWC")


def get_params():
    ks = jax.random.split(jax.random.PRNGKey(3), 4)
    return {"c1": jax.random.normal(ks[0], (3, 3, 1, 8)) * 0.3,
            "c2": jax.random.normal(ks[1], (3, 3, 4, 16)) * 0.3,  # 2 feature groups
            "c3": jax.random.normal(ks[2], (3, 3, 16, 16)) * 0.1,
            "fc": jax.random.normal(ks[3], (7 * 7 * 16, 10)) * 0.05}


def get_inputs():
    return (jax.random.normal(jax.random.PRNGKey(4), (2, 28, 28, 1)),)


def model(p, x):
    y = lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME", dimension_numbers=DN)
    y = jax.nn.relu(y)
    y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    y = lax.conv_general_dilated(y, p["c2"], (1, 1), ((1, 1), (1, 1)), dimension_numbers=DN,
                                 feature_group_count=2)
    y = lax.conv_general_dilated(y, p["c3"], (2, 2), ((1, 1), (1, 1)), rhs_dilation=(1, 1), dimension_numbers=DN)
    y = jnp.tanh(y)
    return y.reshape(y.shape[0], -1) @ p["fc"]
