"""A pre-norm transformer block: layer norm, multi-head causal attention, GELU MLP."""

import jax
import jax.numpy as jnp
import numpy as np

B, S, D, NH, F = 2, 16, 32, 4, 64


def normal(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


def get_params():
    rng = np.random.default_rng(5)
    return {"ln1": jnp.ones(D), "ln2": jnp.ones(D),
            "wqkv": normal(rng, (D, 3 * D)) * 0.1, "wo": normal(rng, (D, D)) * 0.1,
            "w1": normal(rng, (D, F)) * 0.1, "w2": normal(rng, (F, D)) * 0.1}


def get_inputs():
    return (normal(np.random.default_rng(6), (B, S, D)),)


def layer_norm(x, g):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * g


def model(p, x):
    h = layer_norm(x, p["ln1"])
    q, k, v = jnp.split(h @ p["wqkv"], 3, axis=-1)
    q, k, v = (t.reshape(B, S, NH, D // NH) for t in (q, k, v))
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(D // NH)
    mask = jnp.tril(jnp.ones((S, S), bool))
    s = jnp.where(mask, s, -1e9)
    a = jax.nn.softmax(s, axis=-1)
    o = jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(B, S, D)
    x = x + o @ p["wo"]
    h = layer_norm(x, p["ln2"])
    return x + jax.nn.gelu(h @ p["w1"]) @ p["w2"]
