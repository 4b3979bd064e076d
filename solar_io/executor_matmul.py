"""A two-operand contraction as one (batched) BLAS matmul (the executor's step 2).

The operands' ranks are folded into (batch, M, K) x (batch, K, N): ``np.matmul`` then reaches BLAS,
including the batched matmuls that ``np.einsum`` would loop over. A reduced rank only one side uses
is summed on that side first; a small product runs on one BLAS thread (:mod:`.blas_threads`).

>>> import numpy as np
>>> a, b = np.arange(6.0).reshape(2, 3), np.ones((3, 4))
>>> _matmul((a, ("M", "K")), (b, ("K", "N")), ("N", "M")).shape
(4, 2)
"""

from __future__ import annotations

from math import prod

import numpy as np

from .blas_threads import threads_for
from .executor_operands import Operand


def _matmul(a_op: Operand, b_op: Operand, keep: tuple[str, ...]) -> np.ndarray:
    """Two-operand contraction as one (batched) BLAS matmul; result axes ordered batch, M, N."""
    (a, ra), (b, rb) = a_op, b_op
    # Ranks reduced that only one side uses are summed on that side first.
    a, ra = _sum_out(a, ra, [r for r in ra if r not in rb and r not in keep])
    b, rb = _sum_out(b, rb, [r for r in rb if r not in ra and r not in keep])
    length = dict(zip(ra, a.shape, strict=True)) | dict(zip(rb, b.shape, strict=True))
    batch = [r for r in ra if r in rb and r in keep]
    m = [r for r in ra if r not in rb]
    n = [r for r in rb if r not in ra]
    k = [r for r in ra if r in rb and r not in keep]
    nb, nm, nn, nk = (prod(length[r] for r in g) for g in (batch, m, n, k))
    a2 = a.transpose([ra.index(r) for r in batch + m + k]).reshape(nb, nm, nk)
    b2 = b.transpose([rb.index(r) for r in batch + k + n]).reshape(nb, nk, nn)
    with threads_for(nb * nm * nn * nk):  # small products on one BLAS thread (blas_threads)
        res = np.matmul(a2, b2).reshape([length[r] for r in batch + m + n])
    order = batch + m + n
    return res.transpose([order.index(r) for r in keep])


def _sum_out(a: np.ndarray, ranks: tuple[str, ...], drop: list[str]) -> Operand:
    if not drop:
        return a, ranks
    return np.add.reduce(a, axis=tuple(ranks.index(r) for r in drop)), tuple(r for r in ranks if r not in drop)
