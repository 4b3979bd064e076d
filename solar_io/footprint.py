"""How many distinct elements of a tensor an access touches over a node's iteration space.

Bytes are counted per distinct element, so a slice, a strided window or a gather is
charged for what it reads, not for the whole tensor. The count is exact for the common
cases (each rank indexes one dimension; windows such as ``2*P + R``; small coupled
accesses such as a diagonal, by enumeration). Where exactness would cost too much, the
result is a lower bound, never an overestimate, so a SOL built on it stays a lower bound.
Reads outside the tensor (implicit padding) touch no memory and are not counted.
"""

from __future__ import annotations

from math import prod

import numpy as np

from .affine import Access, AffineExpr, Indirect

_MAX_RANGE = 1 << 26   # values of one index expression enumerated with a bitmap
_MAX_POINTS = 1 << 22  # points of a coupled group of dimensions enumerated directly


def _count_1term(const: int, c: int, n: int, extent: int) -> int:
    """#k in [0, n) with 0 <= const + c*k < extent (distinct since c != 0)."""
    if c < 0:
        const, c = const + c * (n - 1), -c
    # const + c*k >= 0  <=> k >= ceil(-const / c); const + c*k <= extent-1 <=> k <= floor((extent-1-const)/c)
    k_lo = (-const + c - 1) // c if const < 0 else 0
    k_hi = min(n - 1, (extent - 1 - const) // c) if extent - 1 - const >= 0 else -1
    return max(0, k_hi - k_lo + 1)


def _or_shifts(arr: np.ndarray, step: int, count: int) -> np.ndarray:
    """arr OR arr>>step OR ... OR arr>>(count-1)*step (binary doubling, O(len log count))."""
    res = np.zeros_like(arr)
    cur, size, offset = arr.copy(), 1, 0
    while count:
        if count & 1:
            shifted = np.zeros_like(arr)
            s = offset * step
            if s < len(arr):
                shifted[s:] = cur[: len(arr) - s]
            res |= shifted
            offset += size
        count >>= 1
        if count:
            s = size * step
            nxt = cur.copy()
            if s < len(arr):
                nxt[s:] |= cur[: len(arr) - s]
            cur, size = nxt, size * 2
    return res


def expr_distinct(e: AffineExpr, sizes: dict[str, int], extent: int) -> tuple[int, bool]:
    """Distinct in-range values of ``e`` over its ranks' box, and whether the count is exact."""
    terms = [(c, sizes[r]) for r, c in e.terms]
    if not terms:
        return (1 if 0 <= e.const < extent else 0), True
    if len(terms) == 1:
        return _count_1term(e.const, terms[0][0], terms[0][1], extent), True
    lo, hi = e.bounds(sizes)
    if hi < 0 or lo > extent - 1:
        return 0, True
    if hi - lo + 1 > _MAX_RANGE:
        return min(extent, max(_count_1term(e.const, c, n, extent) for c, n in terms)), False
    # Build the value set from lo: shift every term to a non-negative step.
    arr = np.zeros(hi - lo + 1, dtype=bool)
    arr[e.const - lo + sum(c * (n - 1) for c, n in terms if c < 0)] = True
    for c, n in terms:
        arr = _or_shifts(arr, abs(c), n)
    window = arr[max(0, -lo): max(0, extent - lo)]
    return int(window.sum()), True


def access_elements(access: Access, tensor_ranks: tuple[str, ...], sizes: dict[str, int],
                    indirect_counts: dict[str, float] | None = None,
                    extent_sizes: dict[str, int] | None = None) -> tuple[float, bool]:
    """Distinct elements ``access`` touches (capped at the tensor's size) and exactness.

    ``indirect_counts`` gives, for each index tensor named by ``@t``, how many index
    values the node reads; a gathered dimension touches at most that many rows
    (assumed distinct, the usual case for embeddings and gathers). ``extent_sizes``: the sizes of the
    tensor's ranks where they differ from the iteration's ``sizes`` (a node's ``live`` counts).
    """
    extents = [(sizes if extent_sizes is None else extent_sizes)[r] for r in tensor_ranks]
    numel = float(prod(extents))
    if access.index is None:
        return numel, True
    plain = [e.terms[0][0] for e in access.index
             if type(e) is AffineExpr and e.const == 0 and len(e.terms) == 1 and e.terms[0][1] == 1]
    if len(plain) == len(access.index) and len(set(plain)) == len(plain):
        # Each dim indexed by its own rank: 0..size-1 clipped to the extent.
        return float(prod(min(sizes[r], x) for r, x in zip(plain, extents, strict=True))), True
    exact = True
    # Group dimensions that share iteration ranks; each group contributes a factor.
    groups: list[list[int]] = []
    rank_group: dict[str, int] = {}
    for d, e in enumerate(access.index):
        ranks = e.ranks if isinstance(e, AffineExpr) else ()
        hit = {rank_group[r] for r in ranks if r in rank_group}
        if not hit:
            groups.append([d])
            g = len(groups) - 1
        else:
            g = min(hit)
            for other in sorted(hit - {g}, reverse=True):
                groups[g].extend(groups[other])
                groups[other] = []
                for r, gi in list(rank_group.items()):
                    if gi == other:
                        rank_group[r] = g
            groups[g].append(d)
        for r in ranks:
            rank_group[r] = g
    total = 1.0
    for dims in (g for g in groups if g):
        count, ok = _group_count(access, dims, extents, sizes, indirect_counts or {})
        total *= count
        exact = exact and ok
    return min(total, numel), exact


def _group_count(access: Access, dims: list[int], extents: list[int], sizes: dict[str, int],
                 indirect: dict[str, float]) -> tuple[float, bool]:
    index = access.index
    assert index is not None
    if len(dims) == 1:
        e = index[dims[0]]
        if isinstance(e, Indirect):
            return min(float(extents[dims[0]]), indirect.get(e.tensor, float(extents[dims[0]]))), True
        count, ok = expr_distinct(e, sizes, extents[dims[0]])
        return float(count), ok
    ranks = sorted({r for d in dims for r in index[d].ranks})
    points = int(np.prod([sizes[r] for r in ranks], dtype=np.float64))
    if points > _MAX_POINTS:
        best = max(expr_distinct(index[d], sizes, extents[d])[0] for d in dims)  # type: ignore[arg-type]
        return float(best), False
    grids = np.meshgrid(*[np.arange(sizes[r]) for r in ranks], indexing="ij")
    env = dict(zip(ranks, (g.ravel() for g in grids), strict=True))
    keep = np.ones(points, dtype=bool)
    flat = np.zeros(points, dtype=np.int64)
    for d in dims:
        e = index[d]
        assert isinstance(e, AffineExpr)
        v = np.full(points, e.const, dtype=np.int64)
        for r, c in e.terms:
            v += c * env[r]
        keep &= (v >= 0) & (v < extents[d])
        flat = flat * extents[d] + np.clip(v, 0, extents[d] - 1)
    return float(len(np.unique(flat[keep]))), True
