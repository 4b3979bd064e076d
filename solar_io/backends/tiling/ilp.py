"""The DRAM traffic bound Q(S) of one einsum as an integer program (PuLP + CBC).

Q(S) is the optimum of the interval relaxation of :mod:`.relax` (read it for why Q is at most the
traffic of every grid tiling with any integer tile sizes and any loop order). Decision variables
(binary unless said otherwise):

- ``x[r,j]``: rank r's tile lies in option ``j`` of its breakpoints (:func:`.relax.intervals`;
  one per rank: ``sum_j x[r,j] = 1``). Breakpoints are the rank's divisors and powers of two, thinned
  to a log-spaced subset when a table would exceed ``TABLE_LIMIT``, plus refinement points. Ranks
  that every operand sees alike are merged first (:func:`.einsum.merge_equivalent`; the merged
  rank's tiles include every product of the original ones, so merging only relaxes further).
- Loop order, through reuse sets: ``i[T,r]`` for each operand T and rank r irrelevant to T: loop r
  is inside T's innermost relevant loop (T's tile stays resident across it). For any order the
  sets ``I_T`` are suffixes of it, hence nested; conversely a nested family is realised by the
  order that puts ranks in fewer sets further out. Nesting of each pair: a binary ``d[T,U]`` and
  ``i[T,r] <= i[U,r] + 1 - d``, ``i[U,r] <= i[T,r] + d``. Letting I_T be any nested family (not
  necessarily the longest suffix) is a relaxation with the same optimum (larger I_T never costs).
  ``o[T,r] = 1 - i[T,r]``: r is outside T's innermost relevant loop.
- ``z[T,r,j] = x[r,j] AND o[T,r]`` (continuous, three inequalities).
- Capacity table ``y[T,tau]`` (continuous) over the option tuples tau of T's relevant ranks, with
  marginals ``sum_{tau: tau_r = j} y = x[r,j]``; since the marginals are 0/1, y is the point mass of
  the chosen options. Coefficient: the footprint bound at the options' smallest tiles
  (:func:`.relax.footprint_lb`); constraint ``sum <= S``.
- Traffic table ``w[T,(h,X,tau_X)]`` (continuous) over the options h of T's *window* ranks (those in a
  non-plain dimension such as ``2*P + R``), the set X of irrelevant ranks outside T's innermost
  relevant loop and their options; marginals ``x`` for window ranks, ``o[T,r]`` and ``z[T,r,j]`` for
  irrelevant ranks. Coefficient: the relaxation's traffic of that entry (cover bound times the
  fractional count ``prod_X N_r / hi_r``, the output ``2M - 1``).
- Objective: ``sum_T sum w * traffic`` -- no big-M, no linearised exponentials: the optimum is the
  exact minimum of the relaxation over the option tuples and loop orders.

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

import itertools
import math
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .einsum import Einsum, Operand, cover_bytes, merge_equivalent, split_tile, traffic, working_set
from .relax import (
    Interval,
    best_relaxed_inside,
    best_tiling_near,
    breakpoints,
    compulsory_lb,
    cover_lb,
    exact_plain,
    footprint_lb,
    intervals,
    relaxed_traffic,
    relaxed_working_set,
)
from .sweep import MAX_RANKS, families, sweep

if TYPE_CHECKING:
    import pulp

TABLE_LIMIT = 768     # entries of one capacity table at most (breakpoints are thinned to fit)
TRAFFIC_LIMIT = 4096  # entries of one traffic table at most
TIME_LIMIT = 30.0  # seconds for all the solves of one einsum; the largest single solves measured take ~0.3 s
REFINE_ROUNDS = 6  # ILP solves per einsum at most
SWEEP_ROUNDS = 24  # rounds at most when the relaxation is small enough to enumerate (:mod:`.sweep`)
SWEEP_LIMIT = 1 << 20  # option tuples x loop-order families per enumeration round
REFINE_TOL = 0.01  # stop refining when a tile inside the chosen intervals is within 1% of Q


class TimeLimitReached(Exception):
    """A solve stopped at its time limit before proving optimality."""


def _limit(time_limit: float | None) -> float:
    return math.inf if time_limit is None else time_limit


def solve_exactly(prob: pulp.LpProblem, time_limit: float | None, options: tuple[str, ...] = ()) -> bool:
    """Solve ``prob`` with CBC to proven optimality (gap 0) within ``time_limit`` seconds (None: no
    limit; 0 or less: give up at once). True when solved, False when infeasible; raises
    :class:`TimeLimitReached` when stopped at the limit."""
    if time_limit is not None and time_limit <= 0:
        raise TimeLimitReached
    STATS["cbc"] += 1
    prob.solve(cbc(time_limit, options))
    return proven(prob)


def cbc(time_limit: float | None, options: tuple[str, ...] = ()) -> pulp.LpSolver:
    """The CBC command for one exact solve (gap 0) with an optional time limit in seconds."""
    import pulp  # imported only when an ILP is solved: most bounds never need one

    kw = {} if time_limit is None else {"timeLimit": time_limit}
    return pulp.PULP_CBC_CMD(msg=0, gapRel=0, gapAbs=0, options=list(options), **kw)


def proven(prob: pulp.LpProblem) -> bool:
    """True when CBC proved the solution optimal; raises :class:`TimeLimitReached` when it stopped
    early (with or without an incumbent); False when the problem is infeasible."""
    import pulp  # imported only when an ILP is solved: most bounds never need one

    if prob.sol_status == pulp.LpSolutionOptimal:
        return True
    if prob.status in (pulp.LpStatusInfeasible, pulp.LpStatusUnbounded):
        return False
    raise TimeLimitReached


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


_CACHE: dict[tuple, Tiling] = {}
_TIMED_OUT: dict[tuple, float] = {}  # key -> the time limit its solve reached
_LOCK = threading.Lock()
STATS = {"solved": 0, "hits": 0, "timeouts": 0, "cbc": 0}  # cbc: solver runs (einsum and chain ILPs)


def _halo(op: Operand, size: dict[str, int]) -> tuple[str, ...]:
    """Ranks of ``op``'s window dimensions (their covers depend on the tile)."""
    return tuple(r for g in op.groups if not exact_plain(g, size) for r in g.ranks)


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
                     math.prod(len(c[r]) for r in _halo(op, size)) * math.prod(1 + len(c[r]) for r in e.irrelevant(op))
                     <= TRAFFIC_LIMIT for op in e.operands)
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
    return _solution_tiling(e, tile, order, hit.capacity, hit.traffic, hit.gap, hit.rounds, hit.stopped)


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
        STATS.update(solved=0, hits=0, timeouts=0, cbc=0)


def _solve(e: Einsum, cap: float, time_limit: float | None = None) -> Tiling:
    """Q(S) of ``e`` by refinement of the interval relaxation (see the module docstring)."""
    size = e.size
    ones = {r: 1 for r in e.space}
    if relaxed_working_set(e, ones) > cap:
        return Tiling(cap, None)
    full = dict(size)
    if relaxed_working_set(e, full) <= cap:  # everything fits: one tile, each element once
        return _solution_tiling(e, full if working_set(e, full) <= cap else None, e.space, cap, compulsory_lb(e))
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
                got = _ilp(e, cap, opts, left)
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
    return _solution_tiling(e, tile, final[2], cap, best_q, max(0.0, gap), rounds, stopped)


def _ilp(e: Einsum, cap: float, opts: dict[str, tuple[Interval, ...]], time_limit: float | None
         ) -> tuple[dict[str, Interval], tuple[str, ...]] | None:
    """The relaxation's optimum over the option tuples ``opts`` and loop orders: (option per rank,
    loop order), or None when infeasible."""
    import pulp  # imported only when an ILP is solved: most bounds never need one

    size = e.size
    prob = pulp.LpProblem("tiling", pulp.LpMinimize)
    active = [r for r in e.space if len(opts[r]) > 1]
    x = {r: [pulp.LpVariable(f"x_{i}_{j}", cat="Binary") for j in range(len(opts[r]))]
         for i, r in enumerate(active)}
    for r in active:
        prob += pulp.lpSum(x[r]) == 1
    idx = {r: i for i, r in enumerate(active)}
    full = dict(size)
    # Reuse sets: I_T = the loops inside T's innermost relevant loop (all irrelevant to T). The
    # sets of all operands are suffixes of one loop order, hence nested; conversely any nested
    # family is realised by ordering ranks by the smallest set holding them.
    inner: dict[int, dict[str, pulp.LpVariable]] = {}
    for k, op in enumerate(e.operands):
        if any(r in x for r in op.ranks):
            inner[k] = {r: pulp.LpVariable(f"i_{k}_{idx[r]}", cat="Binary") for r in e.irrelevant(op) if r in x}
    for k1, k2 in itertools.combinations(sorted(inner), 2):
        shared = set(inner[k1]) | set(inner[k2])
        if not shared:
            continue
        d = pulp.LpVariable(f"d_{k1}_{k2}", cat="Binary")  # 1: I_k1 is inside I_k2
        for r in shared:
            a, c = inner[k1].get(r, 0), inner[k2].get(r, 0)
            prob += a <= c + 1 - d
            prob += c <= a + d
    obj: list = []
    cap_terms: list = []
    for k, op in enumerate(e.operands):
        rel = [r for r in op.ranks if r in x]
        # Capacity table over the relevant ranks: footprints at the options' smallest tiles.
        tuples = list(itertools.product(*(range(len(opts[r])) for r in rel)))
        if len(tuples) == 1:
            cap_terms.append(footprint_lb(op, {r: opts[r][0].lo for r in e.space}, size))
        else:
            y = [pulp.LpVariable(f"y_{k}_{i}", 0, 1) for i in range(len(tuples))]
            prob += pulp.lpSum(y) == 1
            for p, r in enumerate(rel):
                for j in range(len(opts[r])):
                    prob += pulp.lpSum(y[i] for i, tau in enumerate(tuples) if tau[p] == j) == x[r][j]
            for yi, tau in zip(y, tuples, strict=True):
                lo = dict(full)
                lo.update({r: opts[r][j].lo for r, j in zip(rel, tau, strict=True)})
                cap_terms.append(footprint_lb(op, lo, size) * yi)
        # Traffic table over window options and (X, options of X).
        irr = [r for r in e.irrelevant(op) if r in x]
        halo = [r for r in _halo(op, size) if r in x]
        o = {r: 1 - inner[k][r] for r in irr} if k in inner else {}
        irr = [r for r in irr if r in o]
        z = {}
        for r in irr:
            for j in range(len(opts[r])):
                v = pulp.LpVariable(f"z_{k}_{idx[r]}_{j}", 0, 1)
                prob += v <= x[r][j]
                prob += v <= o[r]
                prob += v >= x[r][j] + o[r] - 1
                z[(r, j)] = v
        entries = []
        for h in itertools.product(*(range(len(opts[r])) for r in halo)):
            lo = {r: opts[r][0].lo for r in e.space}
            hi = {r: opts[r][0].hi for r in e.space}
            lo.update({r: opts[r][j].lo for r, j in zip(halo, h, strict=True)})
            hi.update({r: opts[r][j].hi for r, j in zip(halo, h, strict=True)})
            cov = cover_lb(op, lo, hi, size)
            for xs in itertools.product((False, True), repeat=len(irr)):
                outside = [r for r, f in zip(irr, xs, strict=True) if f]
                for tau in itertools.product(*(range(len(opts[r])) for r in outside)):
                    m = math.prod(size[r] / opts[r][j].hi for r, j in zip(outside, tau, strict=True))
                    entries.append((h, dict(zip(outside, tau, strict=True)), cov * (2 * m - 1) if op.output
                                    else cov * m))
        if len(entries) == 1:
            obj.append(entries[0][2])
            continue
        w = [pulp.LpVariable(f"w_{k}_{i}", 0, 1) for i in range(len(entries))]
        prob += pulp.lpSum(w) == 1
        for p, r in enumerate(halo):
            for j in range(len(opts[r])):
                prob += pulp.lpSum(wi for wi, en in zip(w, entries, strict=True) if en[0][p] == j) == x[r][j]
        for r in irr:
            prob += pulp.lpSum(wi for wi, en in zip(w, entries, strict=True) if r in en[1]) == o[r]
            for j in range(len(opts[r])):
                prob += pulp.lpSum(wi for wi, en in zip(w, entries, strict=True) if en[1].get(r) == j) == z[(r, j)]
        obj.extend(wi * en[2] for wi, en in zip(w, entries, strict=True))
    scale = max(1.0, cap)
    prob += pulp.lpSum(cap_terms) * (1.0 / scale) <= cap / scale
    norm = 1.0 / max(1.0, sum(cover_bytes(op, full, size) for op in e.operands))
    prob += pulp.lpSum(obj) * norm
    # Cuts and primal heuristics cost more than they save on these small, table-structured models
    # (measured: the per-einsum solve time drops 2-4x); optimality is unaffected.
    if not solve_exactly(prob, time_limit, ("cuts off", "heuristics off")):
        return None
    choice = {r: (opts[r][max(range(len(opts[r])), key=lambda j: x[r][j].value() or 0)] if r in x else opts[r][0])
              for r in e.space}
    depth = {r: sum(1 for k in inner if r in inner[k] and (inner[k][r].value() or 0) > 0.5) for r in active}
    order = tuple(sorted(active, key=lambda r: depth[r])) + tuple(r for r in e.space if r not in x)
    return choice, order


__all__ = ["REFINE_ROUNDS", "REFINE_TOL", "STATS", "TABLE_LIMIT", "TIME_LIMIT", "TimeLimitReached", "Tiling", "cbc",
           "clear_cache", "proven", "solve", "solve_exactly"]
