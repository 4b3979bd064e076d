"""A 2:4-sparse weight matmul: a dense weight pruned by a mask keeping 2 of every 4 values
along K. apply_mask declares the result's density (0.5), so the matmul reads half the
weight bytes; its MACs stay those of the dense product.
"""

import numpy as np

from solar_io.frontends.loopir import Dim, Out, Tensor, apply_mask, kernel, size

M = Dim("M", 64, parallel=True)
N = Dim("N", 64)
K = Dim("K", 128)


@kernel
def matmul(a: Tensor("M,K"), w: Tensor("K,N"), c: Out("M,N")):
    for m in M:
        for n in N:
            for k in K:
                c[m, n] += a[m, k] * w[k, n]


def model(a: Tensor("M,K", dtype="fp16"), w: Tensor("K,N", dtype="fp16", role="weight"),
          mask: Tensor("K,N", dtype="bool", role="constant")):
    return {"c": matmul(a, apply_mask(w, mask, density=0.5))}


def get_inputs(rng):
    keep = np.zeros((size(K), size(N)), dtype=bool)
    for g in range(0, size(K), 4):  # 2 of every 4 consecutive values along K
        for n in range(size(N)):
            keep[g + rng.choice(4, size=2, replace=False), n] = True
    return {"mask": keep}
