"""The relaxation's optimum by vectorised enumeration, for einsums with few tiled ranks.

The same problem as the tiling ILP (:mod:`.ilp`, the interval relaxation of :mod:`.relax`): every
tuple of options (one interval per rank) and every loop order. With a fixed order, operand T is
re-fetched once per tile of the irrelevant ranks placed outside its innermost relevant loop, so an
order matters only through those sets; orders are enumerated as permutations of the ranks with more
than one option, deduplicated by the sets they induce (a rank with a single option has one tile,
so it may go outermost, where it changes nothing). Footprints and covers are products over an
operand's dimension groups, so they are built per group over that group's ranks and broadcast
over the grid of option tuples; the capacity mask and the traffic are numpy arrays on that grid.

Exactly the ILP's optimum (the tests compare both); used when the grid of option tuples times the
distinct orders is at most :data:`LIMIT`, else the caller solves the ILP.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from .einsum import Einsum
from .relax import Interval, exact_plain, group_cover_lb, group_footprint_lb

LIMIT = 1 << 22   # option tuples x distinct orders evaluated at most
MAX_RANKS = 7     # ranks with several options at most (7! orders)


def sweep(e: Einsum, cap: float, opts: dict[str, tuple[Interval, ...]]
          ) -> tuple[dict[str, Interval], tuple[str, ...], dict[str, np.ndarray]] | None:
    """(option per rank, loop order, per rank the least relaxed traffic of the tuples using each of
    its options) minimising the relaxed traffic within ``cap``; None when the problem is too large
    for enumeration (when nothing fits, ``choice`` is empty)."""
    grid = _grid(e, opts)
    if grid is None:
        return None
    fits = grid.ws <= cap
    if not fits.any():
        return {}, (), {}
    # The least traffic over the orders at each tuple (and the first order reaching it) does not depend on
    # the capacity: the minimum over the tuples that fit, the first order reaching it and its first tuple are
    # what a scan of the orders one by one picks (the least value, the first order among equals, the first
    # tuple in C order within it).
    least = np.where(fits, grid.least, np.inf)
    v = least.min()
    at = least == v
    f = int(grid.order[at].min())
    k = int(np.flatnonzero(at & (grid.order == f))[0])
    active = grid.active
    shape = least.shape
    index = np.unravel_index(k, shape) if shape else ()
    choice = {r: opts[r][0] for r in e.space}
    for r, j in zip(active, index, strict=True):
        choice[r] = opts[r][int(j)]
    per_option = {r: least.min(axis=tuple(i for i in range(len(active)) if i != a)) for a, r in enumerate(active)}
    return choice, grid.perms[f] + tuple(r for r in e.space if r not in active), per_option


@dataclass(frozen=True, slots=True)
class _Grid:
    """The capacity-independent part of one enumeration: per option tuple the working set, the least
    relaxed traffic over the distinct loop orders, and the index of the first order reaching it."""

    active: tuple[str, ...]
    ws: np.ndarray
    least: np.ndarray
    order: np.ndarray
    perms: tuple[tuple[str, ...], ...]


_GRIDS: dict[tuple, _Grid | None] = {}  # by (signature, rank names, options): every capacity of one einsum shares it
GRID_CACHE = 1 << 22  # option tuples kept over all grids at most (18 bytes each; the oldest grids go first)
_KEPT = [0]  # option tuples in the grids kept now


def clear_grids() -> None:
    """Forget every kept enumeration grid (tests and benchmarks; :func:`.ilp.clear_cache` calls it)."""
    _GRIDS.clear()
    _KEPT[0] = 0


def _grid(e: Einsum, opts: dict[str, tuple[Interval, ...]]) -> _Grid | None:
    key = (e.signature(), e.space, tuple(opts[r] for r in e.space))
    if key in _GRIDS:
        return _GRIDS[key]
    got = _build(e, opts)
    size = 1 if got is None else got.ws.size
    if size <= GRID_CACHE:  # a grid larger than the whole budget is used once and not kept
        while _GRIDS and _KEPT[0] + size > GRID_CACHE:
            old = _GRIDS.pop(next(iter(_GRIDS)))
            _KEPT[0] -= 1 if old is None else old.ws.size
        _GRIDS[key] = got
        _KEPT[0] += size
    return got


def _build(e: Einsum, opts: dict[str, tuple[Interval, ...]]) -> _Grid | None:
    size = e.size
    active = [r for r in e.space if len(opts[r]) > 1]
    if len(active) > MAX_RANKS:
        return None
    shape = tuple(len(opts[r]) for r in active)
    grid = math.prod(shape)
    fams = families(e, active)
    if grid * len(fams) > LIMIT:
        return None
    ax = {r: i for i, r in enumerate(active)}
    base_lo = {r: opts[r][0].lo for r in e.space}
    base_hi = {r: opts[r][0].hi for r in e.space}

    def along(vals: list[float], r: str) -> np.ndarray:
        view = [1] * len(active)
        view[ax[r]] = len(vals)
        return np.asarray(vals, dtype=float).reshape(view)

    ws = np.zeros(shape)
    covers = []
    for op in e.operands:
        fp: np.ndarray | float = op.bpe
        cv: np.ndarray | float = op.bpe
        for g in op.groups:
            r0 = g.ranks[0]
            if exact_plain(g, size):
                fp = fp * (along([iv.lo for iv in opts[r0]], r0) if r0 in ax else base_lo[r0])
                cv = cv * float(size[r0])
                continue
            granks = sorted((r for r in g.ranks if r in ax), key=ax.__getitem__)
            f_arr = np.empty([len(opts[r]) for r in granks])
            c_arr = np.empty_like(f_arr)
            for idx in itertools.product(*(range(len(opts[r])) for r in granks)):
                lo, hi = dict(base_lo), dict(base_hi)
                for r, j in zip(granks, idx, strict=True):
                    lo[r], hi[r] = opts[r][j].lo, opts[r][j].hi
                f_arr[idx] = group_footprint_lb(g, lo, size)
                c_arr[idx] = group_cover_lb(g, lo, hi, size)
            view = [len(opts[r]) if r in granks else 1 for r in active]
            fp = fp * f_arr.reshape(view)
            cv = cv * c_arr.reshape(view)
        ws = ws + fp
        covers.append(cv)
    frac = {r: along([size[r] / iv.hi for iv in opts[r]], r) for r in active}
    least = np.full(shape, np.inf)
    order = np.zeros(shape, dtype=np.int16)  # at most 7! = 5040 orders (MAX_RANKS)
    for f, xs in enumerate(fams.values()):
        total = np.zeros(shape)
        for op, cv, x in zip(e.operands, covers, xs, strict=True):
            m: np.ndarray | float = 1.0
            for r in x:
                m = m * frac[r]
            total = total + (cv * (2 * m - 1) if op.output else cv * m)
        better = total < least
        least = np.where(better, total, least)
        order = np.where(better, np.int16(f), order)
    return _Grid(tuple(active), ws, least, order, tuple(fams))


def families(e: Einsum, active: list[str]) -> dict[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """One loop order (a permutation of ``active``) per distinct family of re-fetch sets: per
    operand, the irrelevant active ranks outside its innermost relevant loop."""
    out: dict[tuple[tuple[str, ...], ...], tuple[str, ...]] = {}
    rels = [set(op.ranks) for op in e.operands]
    for perm in itertools.permutations(active):
        xs = []
        for rel in rels:
            inner = max((i for i, r in enumerate(perm) if r in rel), default=-1)
            xs.append(tuple(r for r in perm[:inner + 1] if r not in rel))
        out.setdefault(tuple(xs), perm)
    return {perm: xs for xs, perm in out.items()}


__all__ = ["GRID_CACHE", "LIMIT", "MAX_RANKS", "clear_grids", "families", "sweep"]
