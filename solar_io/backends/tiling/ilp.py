"""The DRAM traffic bound Q(S) of one einsum: the tiling integer program, refined, and cached.

Q(S) is the optimum of the interval relaxation of :mod:`.relax` (read it for why Q is at most the
traffic of every grid tiling with any integer tile sizes and any loop order). The integer program
over the options and loop orders is :mod:`.model` (its variables and tables); CBC runs to proven
optimality through :mod:`.solver`. Breakpoints per rank (:func:`_cands`) are the rank's divisors and
powers of two, thinned to a log-spaced subset when a table would exceed ``TABLE_LIMIT``, plus
refinement points.

**Refinement** (:func:`solve`): after each solve, the best tiles inside the chosen options are
evaluated; while the best of them is more than ``REFINE_TOL`` above Q, the chosen intervals are
split at their geometric midpoints and the ILP solved again (at most ``REFINE_ROUNDS`` times; an
einsum with few tiled ranks is solved by enumeration instead, :mod:`.sweep`, the same optimum, and
refined up to ``SWEEP_ROUNDS`` times). Every
round's optimum is a lower bound; Q is the largest. The result carries Q, the tiling found that
fits (its tiles, order and its traffic as the model counts it, ``achieved >= Q``), and the gap left.

Einsums with the same :meth:`Einsum.signature` and capacity are solved once (:func:`solve`'s cache).
The solves of one einsum share a time limit (``time_limit`` seconds, :data:`TIME_LIMIT` by
default). When the first solve reaches it without proving optimality, the result is ``timed_out``
with no traffic (an incumbent is only an upper bound): the caller charges the provable floor. When
a later refinement solve reaches it, Q is the last proven round's optimum (``stopped='time limit'``).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, replace

import numpy as np

from .einsum import Einsum, cover_bytes, merge_equivalent, split_tile, traffic, working_set
from .model import halo_ranks, tiling_ilp
from .relax import (
    Interval,
    best_relaxed_inside,
    best_tiling_near,
    breakpoints,
    compulsory_lb,
    intervals,
    relaxed_traffic,
    relaxed_working_set,
)
from .solver import STATS, TimeLimitReached, cbc, proven, solve_exactly
from .sweep import MAX_RANKS, clear_grids, families, sweep

_ilp = tiling_ilp  # the integer program of :mod:`.model` (tests call it by this name)

TABLE_LIMIT = 768     # entries of one capacity table at most (breakpoints are thinned to fit)
TRAFFIC_LIMIT = 4096  # entries of one traffic table at most
TIME_LIMIT = 30.0  # seconds for all the solves of one einsum; the largest single solves measured take ~0.3 s
REFINE_ROUNDS = 6  # ILP solves per einsum at most
SWEEP_ROUNDS = 24  # rounds at most when the relaxation is small enough to enumerate (:mod:`.sweep`)
SWEEP_LIMIT = 1 << 20  # option tuples x loop-order families per enumeration round
REFINE_TOL = 0.01  # stop refining when a tile inside the chosen intervals is within 1% of Q


@dataclass(frozen=True, slots=True)
class Tiling:
    """Q(S) at one capacity: ``traffic`` is the bound (None when even unit tiles do not fit); the
    tiling fields describe the best grid tiling found, whose model traffic is ``achieved``."""

    capacity: float
    traffic: float | None
    tiles: tuple[tuple[str, int], ...] = ()
    order: tuple[str, ...] = ()        # tile loops with more than one tile, outermost first
    per_operand: tuple[tuple[str, float], ...] = ()  # of the tiling found (they sum to ``achieved``)
    stationary: tuple[str, ...] = ()   # operands fetched once (no irrelevant loop outside them)
    working_set: float = 0.0
    timed_out: bool = False            # the first solve reached its time limit: no traffic, use the floor
    achieved: float | None = None      # model traffic of ``tiles`` (>= traffic); None: no tiling found fits
    gap: float = 0.0                   # best tile inside the chosen intervals (relaxed) / traffic - 1
    rounds: int = 0                    # ILP solves (refinement rounds)
    stopped: str = ""                  # why refinement stopped early: '', 'rounds', 'size' or 'time limit'


def _limit(time_limit: float | None) -> float:
    return math.inf if time_limit is None else time_limit


_CACHE: dict[tuple, Tiling] = {}
_FOUND: dict[tuple, tuple[Einsum, Tiling]] = {}  # a result per einsum object and tiling found (any capacity)
_FITS: dict[int, tuple[Einsum, tuple[float, float, float, float]]] = {}  # :func:`_fits` per einsum object
_TIMED_OUT: dict[tuple, float] = {}  # key -> the time limit its solve reached
_LOCK = threading.Lock()


def _cands(e: Einsum, keep: dict[str, set[int]], nfam: int) -> tuple[dict[str, tuple[int, ...]], bool]:
    """Breakpoints per rank (with the refinement points ``keep``), thinned until every ILP table is
    small or, with ``nfam`` loop-order families (0: the ILP), until the enumeration grid is
    (:mod:`.sweep`; it starts denser); and whether that size was met."""
    limit = 48 if nfam else 16
    size = e.size
    while True:
        c = {r: breakpoints(n, limit, frozenset(keep.get(r, ()))) for r, n in zip(e.space, e.sizes, strict=True)}
        if nfam:
            ok = math.prod(len(v) for v in c.values()) * nfam <= SWEEP_LIMIT
        else:
            ok = all(math.prod(len(c[r]) for r in op.ranks) <= TABLE_LIMIT and
                     math.prod(len(c[r]) for r in halo_ranks(op, size))
                     * math.prod(1 + len(c[r]) for r in e.irrelevant(op)) <= TRAFFIC_LIMIT for op in e.operands)
        if ok or limit <= 3:
            return c, ok
        limit -= 1 if limit <= 16 else 4


def _solution_tiling(e: Einsum, tile: dict[str, int] | None, order: tuple[str, ...], cap: float, q: float,
                     gap: float = 0.0, rounds: int = 0, stopped: str = "") -> Tiling:
    """The result for bound ``q`` and the tiling found (``tile``, None when none fits)."""
    if tile is None:
        return Tiling(cap, q, gap=gap, rounds=rounds, stopped=stopped)
    size = e.size
    live = tuple(r for r in order if tile[r] < size[r])
    per = traffic(e, tile, live)
    stationary = tuple(op.tensor for op, v in zip(e.operands, per, strict=True)
                       if v <= cover_bytes(op, tile, size) * (1 + 1e-12))
    return Tiling(cap, q, tuple((r, tile[r]) for r in e.space), live,
                  tuple((op.tensor, v) for op, v in zip(e.operands, per, strict=True)), stationary,
                  working_set(e, tile), False, math.fsum(per), gap, rounds, stopped)


def solve(e: Einsum, capacity: float, time_limit: float | None = TIME_LIMIT) -> Tiling:
    """Q(S) of ``e`` with an on-chip buffer of ``capacity`` bytes and the best tiling found (cached by
    structure: signature and capacity). ``time_limit``: seconds for its solves (None: no limit); when
    the first solve reaches it the result has ``timed_out`` set and no traffic."""
    small, merged = merge_equivalent(e)
    fixed = frozenset(merged)
    key = (small.signature(), tuple(i for i, r in enumerate(small.space) if r in fixed), float(capacity))
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None and not (hit.timed_out and _TIMED_OUT.get(key, 0.0) < _limit(time_limit)):
        STATS["hits"] += 1
    else:  # not solved yet, or it timed out under a shorter limit than this one
        try:
            hit = _solve(small, float(capacity), time_limit)
        except TimeLimitReached:
            hit = Tiling(float(capacity), None, timed_out=True)
            STATS["timeouts"] += 1
            _TIMED_OUT[key] = _limit(time_limit)
        with _LOCK:
            _CACHE[key] = hit
            STATS["solved"] += 1
    if hit.timed_out or hit.traffic is None:
        return hit
    names = dict(zip((r for r, _ in hit.tiles), small.space, strict=True)) if hit.tiles else {}  # -> small's names
    tile = {names[r]: v for r, v in hit.tiles} if hit.tiles else None
    order = tuple(names[r] for r in hit.order) if hit.tiles else ()
    if tile is not None and merged:
        size = e.size
        full: dict[str, int] = {}
        for r, v in tile.items():
            full.update(_split(merged[r], size, v) if r in merged else {r: v})
        tile, order = full, tuple(x for r in order for x in merged.get(r, (r,)))
    return _found(e, tile, order, hit.capacity, hit.traffic, hit.gap, hit.rounds, hit.stopped)


def _found(e: Einsum, tile: dict[str, int] | None, order: tuple[str, ...], cap: float, q: float,
           gap: float = 0.0, rounds: int = 0, stopped: str = "") -> Tiling:
    """:func:`_solution_tiling`, kept per einsum object and tiling found: the same tiling is often found
    at another capacity (everything fits, or the same tiles), and then only the capacity differs."""
    key = (id(e), None if tile is None else tuple(tile.items()), order, q, gap, rounds, stopped)
    got = _FOUND.get(key)
    if got is None or got[0] is not e:
        if len(_FOUND) >= 1 << 14:
            _FOUND.clear()
        got = _FOUND[key] = (e, _solution_tiling(e, tile, order, cap, q, gap, rounds, stopped))
    t = got[1]
    return t if t.capacity == cap else replace(t, capacity=cap)


def _fits(e: Einsum) -> tuple[float, float, float, float]:
    """(relaxed working set of unit tiles, of one whole tile, the whole tile's working set, compulsory
    bytes) of ``e``: capacity-independent, kept per einsum object."""
    got = _FITS.get(id(e))
    if got is None or got[0] is not e:
        if len(_FITS) >= 1 << 14:
            _FITS.clear()
        full = e.size
        got = _FITS[id(e)] = (e, (relaxed_working_set(e, {r: 1 for r in e.space}), relaxed_working_set(e, full),
                                  working_set(e, full), compulsory_lb(e)))
    return got[1]


def _split(ranks: tuple[str, ...], size: dict[str, int], d: int) -> dict[str, int]:
    """Tiles of the original ranks of a merged rank whose product is d when d splits exactly (a
    divisor), else at most d (the innermost rank taking the most): a tiling that still fits."""
    out = split_tile(ranks, size, d)
    if math.prod(out.values()) == d:
        return out
    out, left = {}, d
    for r in reversed(ranks):
        out[r] = max(1, min(size[r], left))
        left = max(1, left // out[r])
    return out


def clear_cache() -> None:
    """Forget every solved ILP (tests and benchmarks)."""
    with _LOCK:
        _CACHE.clear()
        _TIMED_OUT.clear()
        _FOUND.clear()
        _FITS.clear()
        clear_grids()
        STATS.update(solved=0, hits=0, timeouts=0, cbc=0)


def _solve(e: Einsum, cap: float, time_limit: float | None = None) -> Tiling:
    """Q(S) of ``e`` by refinement of the interval relaxation (see the module docstring)."""
    size = e.size
    ws_ones, ws_full, ws_exact, compulsory = _fits(e)
    if ws_ones > cap:
        return Tiling(cap, None)
    if ws_full <= cap:  # everything fits: one tile, each element once
        return _found(e, dict(size) if ws_exact <= cap else None, e.space, cap, compulsory)
    t0 = time.perf_counter()
    keep: dict[str, set[int]] = {}
    best_q = 0.0
    final: tuple[float, dict[str, Interval], tuple[str, ...]] | None = None  # the round giving Q
    gap, stopped = math.inf, "rounds"
    live = [r for r, n in zip(e.space, e.sizes, strict=True) if n > 1]
    nfam = len(families(e, live)) if len(live) <= MAX_RANKS else 0
    swept = nfam > 0 and _cands(e, {}, nfam)[1]  # small enough to enumerate even at 3 breakpoints a rank
    nfam = nfam if swept else 0
    rounds = 0
    while rounds < (SWEEP_ROUNDS if swept else REFINE_ROUNDS):
        rounds += 1
        cands, ok = _cands(e, keep, nfam)
        if not ok and rounds > 1:  # refinement would outgrow the tables: Q is the last round's
            stopped, rounds = "size", rounds - 1
            break
        opts = {r: intervals(c) for r, c in cands.items()}
        left = None if time_limit is None else time_limit - (time.perf_counter() - t0)
        try:
            if left is not None and left <= 0:
                raise TimeLimitReached
            got = sweep(e, cap, opts) if swept else None
            near: dict[str, np.ndarray] = {}
            if got is not None:
                got, near = got[:2], got[2]
            else:
                got = tiling_ilp(e, cap, opts, left)
        except TimeLimitReached:
            if rounds == 1:
                raise
            stopped, rounds = "time limit", rounds - 1
            break
        if not got or not got[0]:  # cannot happen: unit tiles fit
            raise RuntimeError(f"tiling ILP of {e.name}: infeasible although unit tiles fit")
        choice, order = got
        lo = {r: iv.lo for r, iv in choice.items()}
        hi = {r: iv.hi for r, iv in choice.items()}
        q = math.fsum(relaxed_traffic(e, lo, hi, order))
        if final is None or q >= final[0]:
            final = (q, choice, order)
        best_q = final[0]
        point = best_relaxed_inside(e, cap, choice, order)
        gap = point / best_q - 1 if best_q > 0 else 0.0
        if gap <= REFINE_TOL:
            stopped = ""
            break
        split = False
        for r, iv in choice.items():
            # Split the chosen interval and, when enumerated, every interval of a tuple that may
            # still hold a tile below the best one found (the next rounds' competitors).
            wide = [iv] if iv.hi > iv.lo else []
            if r in near:
                cand = [j for j in np.argsort(near[r]) if near[r][j] * (1 + REFINE_TOL) < point][:6]
                wide += [opts[r][j] for j in cand if opts[r][j].hi > opts[r][j].lo]
            for w in wide:
                ratio = (w.hi + 1) / w.lo  # split in 4 (enumeration) or 2 (ILP) log-equal parts
                parts = 4 if swept else 2
                cut = {max(w.lo + 1, min(w.hi, round(w.lo * ratio ** (i / parts)))) for i in range(1, parts)}
                keep.setdefault(r, set()).update({w.lo, w.hi + 1, *cut})
                split = True
        if not split:
            stopped = ""
            break
    assert final is not None
    found = best_tiling_near(e, cap, final[1], final[2])
    tile = found[1] if found is not None else None
    return _found(e, tile, final[2], cap, best_q, max(0.0, gap), rounds, stopped)


__all__ = ["REFINE_ROUNDS", "REFINE_TOL", "STATS", "TABLE_LIMIT", "TIME_LIMIT", "TimeLimitReached", "Tiling", "cbc",
           "clear_cache", "proven", "solve", "solve_exactly"]
