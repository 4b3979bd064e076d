"""dot_general variants: batched matmul, two contracting dims in odd positions, matrix-vector."""

import jax.numpy as jnp
import numpy as np
from jax import lax

B, M, K, N, J = 2, 6, 8, 5, 3


def normal(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


def get_inputs():
    rng = np.random.default_rng(20)
    return (normal(rng, (B, M, K)), normal(rng, (B, K, N)),
            normal(rng, (K, J, M)), normal(rng, (K,)))


def model(a, b, c, v):
    bmm = jnp.einsum("bmk,bkn->bmn", a, b)                       # B*M*N*K MACs
    two = lax.dot_general(a, c, (((1, 2), (2, 0)), ((), ())))    # contract M and K: B*J*M*K
    mv = a @ v                                                   # B*M*K
    return bmm, two, mv
