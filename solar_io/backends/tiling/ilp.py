"""The minimum DRAM traffic Q(S) of one einsum as an integer program (PuLP + CBC).

Decision variables (binary unless said otherwise), for the model of :mod:`.einsum`:

- ``x[r,j]``: rank r takes tile size ``cand_r[j]`` (one per rank: ``sum_j x[r,j] = 1``); the
  candidates are the rank's divisors, plus powers of two (ragged last tile) for ranks over 64 in
  simple dimensions, thinned to a log-spaced subset when a table would exceed ``TABLE_LIMIT``.
  Ranks that every operand sees alike are merged first (:func:`.einsum.merge_equivalent`).
- Loop order, through reuse sets: ``i[T,r]`` for each operand T and rank r irrelevant to T: loop r
  is inside T's innermost relevant loop (T's tile stays resident across it). For any order the
  sets ``I_T`` are suffixes of it, hence nested; conversely a nested family is realised by the
  order that puts ranks in fewer sets further out. Nesting of each pair: a binary ``d[T,U]`` and
  ``i[T,r] <= i[U,r] + 1 - d``, ``i[U,r] <= i[T,r] + d``. Letting I_T be any nested family (not
  necessarily the longest suffix) is a relaxation with the same optimum (larger I_T never costs).
  ``o[T,r] = 1 - i[T,r]``: r is outside T's innermost relevant loop.
- ``z[T,r,j] = x[r,j] AND o[T,r]`` (continuous, three inequalities).
- Capacity table ``y[T,tau]`` (continuous) over the tile tuples tau of T's relevant ranks, with
  marginals ``sum_{tau: tau_r = j} y = x[r,j]``; since the marginals are 0/1, y is the point mass of
  the chosen tiles and ``tile bytes = sum_tau y * tile_bytes(tau)`` is exact. Constraint:
  ``sum_T sum_tau y[T,tau] * tile_bytes_T(tau) <= S``.
- Traffic table ``w[T,(h,X,tau_X)]`` (continuous) over the tiles h of T's *halo* ranks (those in a
  non-plain dimension such as ``2*P + R``), the set X of irrelevant ranks outside T's innermost
  relevant loop and their tile sizes; marginals ``x`` for halo ranks, ``o[T,r]`` and ``z[T,r,j]``
  for irrelevant ranks. Its coefficient is the exact traffic of that entry
  (``Cover_T(h) * M`` or ``Cover_T(h) * (2M - 1)`` for the output).
- Objective: ``sum_T sum w * traffic`` -- every coefficient an exact byte count, no big-M, no
  linearised exponentials, so the optimum is the exact minimum over the tiling space (tests compare
  it with brute-force enumeration).

Einsums with the same :meth:`Einsum.signature` and capacity are solved once (:func:`solve`'s cache).
Each solve has a time limit (``time_limit`` seconds, :data:`TIME_LIMIT` by default); a solve that
reaches it without proving optimality returns ``timed_out`` and no traffic (an incumbent found by
then is only an upper bound on Q, so it is not used): the caller charges the provable floor,
which is below the optimum, so the bound stays a lower bound.
"""

from __future__ import annotations

import itertools
import math
import threading
from dataclasses import dataclass

import pulp

from .einsum import (
    Einsum,
    Operand,
    candidates,
    cover_bytes,
    merge_equivalent,
    split_tile,
    tile_bytes,
    traffic,
    trips,
    working_set,
)

TABLE_LIMIT = 768
TIME_LIMIT = 30.0  # seconds per ILP; the largest single solves measured take ~0.3 s


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
    kw = {} if time_limit is None else {"timeLimit": time_limit}
    return pulp.PULP_CBC_CMD(msg=0, gapRel=0, gapAbs=0, options=list(options), **kw)


def proven(prob: pulp.LpProblem) -> bool:
    """True when CBC proved the solution optimal; raises :class:`TimeLimitReached` when it stopped
    early (with or without an incumbent); False when the problem is infeasible."""
    if prob.sol_status == pulp.LpSolutionOptimal:
        return True
    if prob.status in (pulp.LpStatusInfeasible, pulp.LpStatusUnbounded):
        return False
    raise TimeLimitReached


@dataclass(frozen=True, slots=True)
class Tiling:
    """The best tiling at one capacity: ``traffic`` bytes (None when even unit tiles do not fit)."""

    capacity: float
    traffic: float | None
    tiles: tuple[tuple[str, int], ...] = ()
    order: tuple[str, ...] = ()        # tile loops with more than one tile, outermost first
    per_operand: tuple[tuple[str, float], ...] = ()
    stationary: tuple[str, ...] = ()   # operands fetched once (no irrelevant loop outside them)
    working_set: float = 0.0
    timed_out: bool = False            # the solve reached its time limit: no traffic, use the floor


_CACHE: dict[tuple, Tiling] = {}
_TIMED_OUT: dict[tuple, float] = {}  # key -> the time limit its solve reached
_LOCK = threading.Lock()
STATS = {"solved": 0, "hits": 0, "timeouts": 0, "cbc": 0}  # cbc: solver runs (einsum and chain ILPs)


def _cands(e: Einsum, merged: frozenset[str] = frozenset()) -> dict[str, tuple[int, ...]]:
    """Tile sizes per rank: ragged ones only for ranks in simple dimensions that are not merged
    (a merged tile must split into per-rank tiles), thinned until every table is small."""
    size = e.size
    halo = {r for op in e.operands for r in _halo(op, size)}
    limit = 16
    while True:
        c = {r: candidates(n, limit, ragged=r not in halo and r not in merged)
             for r, n in zip(e.space, e.sizes, strict=True)}
        worst = max((math.prod(len(c[r]) for r in op.ranks) for op in e.operands), default=1)
        if worst <= TABLE_LIMIT or limit <= 3:
            return c
        limit -= 1


def _halo(op: Operand, size: dict[str, int]) -> tuple[str, ...]:
    return tuple(r for g in op.groups if not g.simple(size) for r in g.ranks)


def _solution_tiling(e: Einsum, tile: dict[str, int], order: tuple[str, ...], cap: float) -> Tiling:
    size = e.size
    live = tuple(r for r in order if tile[r] < size[r])
    per = traffic(e, tile, live)
    stationary = tuple(op.tensor for op, q in zip(e.operands, per, strict=True)
                       if q <= cover_bytes(op, tile, size) * (1 + 1e-12))
    return Tiling(cap, math.fsum(per), tuple((r, tile[r]) for r in e.space), live,
                  tuple((op.tensor, q) for op, q in zip(e.operands, per, strict=True)), stationary,
                  working_set(e, tile))


def solve(e: Einsum, capacity: float, time_limit: float | None = TIME_LIMIT) -> Tiling:
    """The minimum-traffic tiling of ``e`` with an on-chip buffer of ``capacity`` bytes (cached by
    structure: signature and capacity). ``time_limit``: seconds for the solve (None: no limit); when
    it is reached the result has ``timed_out`` set and no traffic."""
    small, merged = merge_equivalent(e)
    fixed = frozenset(merged)
    key = (small.signature(), tuple(i for i, r in enumerate(small.space) if r in fixed), float(capacity))
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None and not (hit.timed_out and _TIMED_OUT.get(key, 0.0) < _limit(time_limit)):
        STATS["hits"] += 1
    else:  # not solved yet, or it timed out under a shorter limit than this one
        try:
            hit = _solve(small, float(capacity), fixed, time_limit)
        except TimeLimitReached:
            hit = Tiling(float(capacity), None, timed_out=True)
            STATS["timeouts"] += 1
            _TIMED_OUT[key] = _limit(time_limit)
        with _LOCK:
            _CACHE[key] = hit
            STATS["solved"] += 1
    if hit.timed_out:
        return hit
    t = _rename(hit, small)
    if not merged or t.traffic is None:
        return t if t.traffic is not None else Tiling(float(capacity), None)
    size = e.size
    tile: dict[str, int] = {}
    for r, v in t.tiles:
        tile.update(split_tile(merged[r], size, v) if r in merged else {r: v})
    order = tuple(x for r in t.order for x in merged.get(r, (r,)))
    return _solution_tiling(e, tile, order, t.capacity)


def _rename(t: Tiling, e: Einsum) -> Tiling:
    """A cached tiling of an einsum with the same signature, in ``e``'s rank and tensor names."""
    if t.traffic is None:
        return t
    if tuple(r for r, _ in t.tiles) == e.space and tuple(n for n, _ in t.per_operand) == \
            tuple(op.tensor for op in e.operands):
        return t
    pos = {r: i for i, (r, _) in enumerate(t.tiles)}
    tile = {e.space[i]: v for i, (_, v) in enumerate(t.tiles)}
    return _solution_tiling(e, tile, tuple(e.space[pos[r]] for r in t.order), t.capacity)


def clear_cache() -> None:
    """Forget every solved ILP (tests and benchmarks)."""
    with _LOCK:
        _CACHE.clear()
        _TIMED_OUT.clear()
        STATS.update(solved=0, hits=0, timeouts=0, cbc=0)


def _solve(e: Einsum, cap: float, merged: frozenset[str] = frozenset(), time_limit: float | None = None) -> Tiling:
    size = e.size
    cands = _cands(e, merged)
    min_ws = working_set(e, {r: 1 for r in e.space})
    if min_ws > cap:
        return Tiling(cap, None)
    full = dict(size)
    if working_set(e, full) <= cap:  # everything fits: one tile, compulsory traffic
        return _solution_tiling(e, full, e.space, cap)
    prob = pulp.LpProblem("tiling", pulp.LpMinimize)
    active = [r for r in e.space if len(cands[r]) > 1]
    x = {r: [pulp.LpVariable(f"x_{i}_{j}", cat="Binary") for j in range(len(cands[r]))]
         for i, r in enumerate(active)}
    for r in active:
        prob += pulp.lpSum(x[r]) == 1

    def xv(r: str, j: int) -> pulp.LpAffineExpression | int:
        return x[r][j] if r in x else 1

    idx = {r: i for i, r in enumerate(active)}
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
        # Capacity table over the relevant ranks.
        tuples = list(itertools.product(*(range(len(cands[r])) for r in rel)))
        if len(tuples) == 1:
            cap_terms.append(tile_bytes(op, {r: cands[r][0] for r in op.ranks}))
        else:
            y = [pulp.LpVariable(f"y_{k}_{i}", 0, 1) for i in range(len(tuples))]
            prob += pulp.lpSum(y) == 1
            for p, r in enumerate(rel):
                for j in range(len(cands[r])):
                    prob += pulp.lpSum(y[i] for i, tau in enumerate(tuples) if tau[p] == j) == x[r][j]
            for yi, tau in zip(y, tuples, strict=True):
                tile = dict(full)
                tile.update({r: cands[r][j] for r, j in zip(rel, tau, strict=True)})
                cap_terms.append(tile_bytes(op, tile) * yi)
        # Traffic table over halo tiles and (X, tiles of X).
        irr = [r for r in e.irrelevant(op) if r in x]
        halo = [r for r in _halo(op, size) if r in x]
        o = {r: 1 - inner[k][r] for r in irr} if k in inner else {}
        irr = [r for r in irr if r in o]
        z = {}
        for r in irr:
            for j in range(len(cands[r])):
                v = pulp.LpVariable(f"z_{k}_{idx[r]}_{j}", 0, 1)
                prob += v <= x[r][j]
                prob += v <= o[r]
                prob += v >= x[r][j] + o[r] - 1
                z[(r, j)] = v
        entries = []
        for h in itertools.product(*(range(len(cands[r])) for r in halo)):
            tile = {r: cands[r][0] for r in e.space}
            tile.update({r: cands[r][j] for r, j in zip(halo, h, strict=True)})
            cov = cover_bytes(op, tile, size)
            for xs in itertools.product((False, True), repeat=len(irr)):
                outside = [r for r, f in zip(irr, xs, strict=True) if f]
                for tau in itertools.product(*(range(len(cands[r])) for r in outside)):
                    m = math.prod(trips(size[r], cands[r][j]) for r, j in zip(outside, tau, strict=True))
                    entries.append((h, dict(zip(outside, tau, strict=True)), cov * (2 * m - 1) if op.output
                                    else cov * m))
        if len(entries) == 1:
            obj.append(entries[0][2])
            continue
        w = [pulp.LpVariable(f"w_{k}_{i}", 0, 1) for i in range(len(entries))]
        prob += pulp.lpSum(w) == 1
        for p, r in enumerate(halo):
            for j in range(len(cands[r])):
                prob += pulp.lpSum(wi for wi, en in zip(w, entries, strict=True) if en[0][p] == j) == x[r][j]
        for r in irr:
            prob += pulp.lpSum(wi for wi, en in zip(w, entries, strict=True) if r in en[1]) == o[r]
            for j in range(len(cands[r])):
                prob += pulp.lpSum(wi for wi, en in zip(w, entries, strict=True) if en[1].get(r) == j) == z[(r, j)]
        obj.extend(wi * en[2] for wi, en in zip(w, entries, strict=True))
    scale = max(1.0, cap)
    prob += pulp.lpSum(cap_terms) * (1.0 / scale) <= cap / scale
    norm = 1.0 / max(1.0, sum(cover_bytes(op, full, size) for op in e.operands))
    prob += pulp.lpSum(obj) * norm
    # Cuts and primal heuristics cost more than they save on these small, table-structured models
    # (measured: the per-einsum solve time drops 2-4x); optimality is unaffected.
    if not solve_exactly(prob, time_limit, ("cuts off", "heuristics off")):
        return Tiling(cap, None)
    tile = {r: (cands[r][max(range(len(cands[r])), key=lambda j: x[r][j].value() or 0)] if r in x else cands[r][0])
            for r in e.space}
    depth = {r: sum(1 for k in inner if r in inner[k] and (inner[k][r].value() or 0) > 0.5) for r in active}
    order = tuple(sorted(active, key=lambda r: depth[r])) + tuple(r for r in e.space if r not in x)
    result = _solution_tiling(e, tile, order, cap)
    if result.working_set > cap * (1 + 1e-9):  # solver tolerance: should not happen
        raise RuntimeError(f"tiling ILP of {e.name}: solution exceeds the capacity")
    return result


__all__ = ["STATS", "TABLE_LIMIT", "TIME_LIMIT", "TimeLimitReached", "Tiling", "cbc", "clear_cache", "proven",
           "solve", "solve_exactly"]
