"""A pre-norm transformer block: layer norm, multi-head causal attention, GELU MLP."""

import jax
import jax.numpy as jnp

B, S, D, NH, F = 2, 16, 32, 4, 64


def get_params():
    ks = jax.random.split(jax.random.PRNGKey(5), 4)
    return {"ln1": jnp.ones(D), "ln2": jnp.ones(D),
            "wqkv": jax.random.normal(ks[0], (D, 3 * D)) * 0.1, "wo": jax.random.normal(ks[1], (D, D)) * 0.1,
            "w1": jax.random.normal(ks[2], (D, F)) * 0.1, "w2": jax.random.normal(ks[3], (F, D)) * 0.1}


def get_inputs():
    return (jax.random.normal(jax.random.PRNGKey(6), (B, S, D)),)


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
