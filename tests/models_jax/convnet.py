"""A small conv net on MNIST shapes: NHWC convs (strided, padded, grouped), pooling, a dense head."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

DN = ("NHWC", "HWIO", "NHWC")


def normal(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


def get_params():
    rng = np.random.default_rng(3)
    return {"c1": normal(rng, (3, 3, 1, 8)) * 0.3,
            "c2": normal(rng, (3, 3, 4, 16)) * 0.3,  # 2 feature groups
            "c3": normal(rng, (3, 3, 16, 16)) * 0.1,
            "fc": normal(rng, (7 * 7 * 16, 10)) * 0.05}


def get_inputs():
    return (normal(np.random.default_rng(4), (2, 28, 28, 1)),)


def model(p, x):
    y = lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME", dimension_numbers=DN)
    y = jax.nn.relu(y)
    y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    y = lax.conv_general_dilated(y, p["c2"], (1, 1), ((1, 1), (1, 1)), dimension_numbers=DN,
                                 feature_group_count=2)
    y = lax.conv_general_dilated(y, p["c3"], (2, 2), ((1, 1), (1, 1)), rhs_dilation=(1, 1), dimension_numbers=DN)
    y = jnp.tanh(y)
    return y.reshape(y.shape[0], -1) @ p["fc"]
