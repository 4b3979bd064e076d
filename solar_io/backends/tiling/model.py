"""The tiling integer program of one einsum: the interval relaxation of :mod:`.relax` over option tuples
and loop orders, solved exactly by CBC (:mod:`.solver`); :mod:`.ilp` refines and caches its answers.

Decision variables (binary unless said otherwise):

- ``x[r,j]``: rank r's tile lies in option ``j`` of its breakpoints (:func:`.relax.intervals`;
  one per rank: ``sum_j x[r,j] = 1``). Breakpoints: :func:`.ilp._cands`. Ranks
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
"""

from __future__ import annotations

import itertools
import math

from .einsum import Einsum, Operand, cover_bytes
from .relax import Interval, cover_lb, exact_plain, footprint_lb
from .solver import solve_exactly


def halo_ranks(op: Operand, size: dict[str, int]) -> tuple[str, ...]:
    """Ranks of ``op``'s window dimensions (their covers depend on the tile)."""
    return tuple(r for g in op.groups if not exact_plain(g, size) for r in g.ranks)


def tiling_ilp(e: Einsum, cap: float, opts: dict[str, tuple[Interval, ...]], time_limit: float | None
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
        halo = [r for r in halo_ranks(op, size) if r in x]
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


__all__ = ["halo_ranks", "tiling_ilp"]
