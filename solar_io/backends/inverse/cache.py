"""Inverse roofline of the cache-aware fidelity (:mod:`.roofline` has the definitions).

The cache-aware bound at capacity S is ``T = max(min over partitions P of T_P, T_fused)`` with
``T_P = sum over groups g of P of max(busiest unit of g, Q_g / DRAM bandwidth)``; the traffic Q_g
of each candidate group depends on S, not on the chip's rates (``CacheAware.candidates``, and the
groups of the branch order, ``CacheAware.branch_candidates``, which share the file's states at the
common cuts of the two orders, as in :func:`solar_io.backends.tiling.partition.cache_aware`). When
one resource r runs at ``rate_chip / z``:

- each group's time is ``max(u_g z + d_g, c_g)`` (``u_g``: r's seconds in g on the chip; ``d_g``:
  the other work on r's unit; ``c_g``: the group's other units and memory; for DRAM ``u_g = Q_g /
  bandwidth``, ``c_g`` its compute), so ``T_P(z)`` is convex, piecewise linear and non-decreasing,
  solved exactly by walking its breakpoints; the fused term likewise;
- the best partition changes with z. ``with_chip_rest`` is the largest z with ``T(z) <= T*``:
  when even r infinitely fast (z = 0) misses the target, none; else start from the best partition
  P0 just past z = 0 (at ``1e-9``: of those tied at 0, one that rises least), take ``z1`` = the
  largest z with ``T_P0(z) <= T*`` (feasible, since ``T <= T_P0``), re-partition just past z1
  (dynamic programming over the candidates, at ``z1 (1 + 1e-7)``) and repeat while that partition
  is another one within the target. Each step raises z and changes the partition, so it ends; at
  the end every partition is above the target just past z, so no larger z is feasible (to within
  that relative step).
- ``any_chip``: units need ``work / T*`` (as for every fidelity); DRAM needs
  ``max(min over partitions of sum Q_g, boundary bytes) / T*`` (everything else infinitely fast).
- ``chip_scale`` = ``T_chip / T*``: a uniform speed-up scales every group's time alike, so the
  chip's partition stays the best one.
"""

from __future__ import annotations

import math

from ..result import UNITS, CacheAware, InverseFidelity, Report
from .solve import TOL, chip_scale, prefix_sums, requirement, solve_from_zero

_MAX_STEPS = 64
_STEP = 1e-7  # relative: 'just past z' when looking for a partition that goes further
_TINY = 1e-9  # 'just past 0': the chip's own rate is z = 1


def cache_aware_inverse(report: Report, target: float) -> InverseFidelity | None:
    """The cache-aware inverse roofline of ``report`` for ``target`` seconds (None when the
    cache-aware fidelity was not computed)."""
    ca = report.cache
    if ca is None or report.cache_aware.time is None:
        return None
    t_chip = report.cache_aware.time
    bw = report.dram_bandwidth
    n = len(report.nodes)
    unit_t = [[getattr(nd, f"{u}_time") for nd in report.nodes] for u in UNITS]
    pre = [_prefix(col, ca) for col in unit_t]
    fused_units = [math.fsum(col) for col in unit_t]
    boundary = report.totals.boundary_bytes
    min_traffic = _best(n, ca, lambda g: g[3])[0]
    traffic = {(i, j): q for i, j, q in ca.candidates}
    in_branch = {(i, j): q for i, j, q in ca.branch_candidates}
    chosen_spans = [(0, i, j, traffic[(i, j)]) for i, j in ca.spans] + [
        (1, i, j, in_branch[(i, j)]) for i, j in ca.branch_spans]
    reqs = []
    for res in report.resources:
        if res.unit == "dram":
            work = max(min_traffic, boundary)
            share = None
        else:
            work = res.work_unfused
            share = _prefix([math.fsum(ld.time for ld in nd.loads if ld.resource == res.key)
                             for nd in report.nodes], ca)

        def item(grp: tuple[int, int, int, float], share=share, res=res) -> tuple[float, float, float]:  # noqa: ANN001
            o, i, j, q = grp
            units = [p[o][j + 1] - p[o][i] for p in pre]
            if share is None:  # DRAM: max(Q / bw * z, compute)
                return q / bw, 0.0, max(units)
            k = UNITS.index(res.unit)
            u = share[o][j + 1] - share[o][i]
            return u, units[k] - u, max([x for m, x in enumerate(units) if m != k] + [q / bw])

        if share is None:
            fused_item = (boundary / bw, 0.0, max(fused_units, default=0.0))
        else:
            k = UNITS.index(res.unit)
            fused_item = (share[0][-1], fused_units[k] - share[0][-1],
                          max([x for m, x in enumerate(fused_units) if m != k] + [boundary / bw]))
        z_fused = solve_from_zero([fused_item], target)
        z_part = _partition_z(n, ca, item, target)
        z = None if z_fused is None or z_part is None else min(z_fused, z_part)
        binding = (not ca.raised_to_fused and any(_active(item(grp))[3] for grp in chosen_spans)) or (
            _active(fused_item)[3] and max(fused_item[0] + fused_item[1], fused_item[2]) >= t_chip * (1 - 1e-12))
        reqs.append(requirement(res, work, target, z, binding))
    feasible, factor = chip_scale(t_chip, target)
    return InverseFidelity(fidelity="cache-aware", chip_time=t_chip, feasible=feasible, chip_scale=factor,
                           requirements=tuple(reqs))


def _active(it: tuple[float, float, float]) -> tuple[float, float, float, bool]:
    u, d, c = it
    return u, d, c, u > 0 and u + d >= c


def _prefix(col: list[float], ca: CacheAware) -> list[list[float]]:
    """Prefix sums of ``col`` (per node) in the file's order and in the branch order (if any)."""
    return [prefix_sums(col), prefix_sums([col[k] for k in ca.branch_order]) if ca.branch_order else []]


def _best(n: int, ca: CacheAware, cost) -> tuple[float, list[tuple[int, int, int, float]]]:  # noqa: ANN001
    """The partition of nodes 0..n-1 into candidate groups of least total ``cost(group)``, a group being
    ``(order, first, last, Q)``: order 0 the file's candidates, 1 the branch order's; the two share
    their states at the common cuts (:func:`solar_io.backends.tiling.schedule.cuts`), each has its own
    elsewhere. Candidates in order of their last position, as :func:`.partition.cache_aware` lists them."""
    if ca.branch_order:
        from ..tiling.schedule import cuts  # the tiling package only when its partition searched that order

        cut = cuts(ca.branch_order)
    else:
        cut = [True] * (n + 1)
    best = [[0.0] + [math.inf] * n, [0.0] + [math.inf] * n]  # per order; equal at the cuts
    back: list[list[tuple[int, int, int, float] | None]] = [[None] * (n + 1), [None] * (n + 1)]
    lists = (ca.candidates, ca.branch_candidates)
    at = [0, 0]
    for j in range(n):
        for o in (0, 1):
            cands = lists[o]
            while at[o] < len(cands) and cands[at[o]][1] == j:
                i, _, q = cands[at[o]]
                at[o] += 1
                t = best[o][i] + cost((o, i, j, q))
                if t < best[o][j + 1]:
                    best[o][j + 1], back[o][j + 1] = t, (o, i, j, q)
        if cut[j + 1] and best[1][j + 1] < best[0][j + 1] * (1 - 1e-12):  # the file's order on a tie
            best[0][j + 1], back[0][j + 1] = best[1][j + 1], back[1][j + 1]
        if cut[j + 1]:
            best[1][j + 1], back[1][j + 1] = best[0][j + 1], back[0][j + 1]
    groups: list[tuple[int, int, int, float]] = []
    j, o = n, 0
    while j > 0 and back[o][j] is not None:
        grp = back[o][j]
        groups.append(grp)  # type: ignore[arg-type]
        o, j = grp[0], grp[1]  # type: ignore[index]
    return best[0][n], groups[::-1]


def _partition_z(n: int, ca: CacheAware, item, target: float) -> float | None:  # noqa: ANN001
    """The largest z with min over partitions of T_P(z) <= target (see the module docstring)."""

    def at(z: float):  # noqa: ANN202
        def cost(grp: tuple[int, int, int, float]) -> float:
            u, d, c = item(grp)
            return max(u * z + d, c)
        return _best(n, ca, cost)

    if at(0.0)[0] > target * (1 + TOL):
        return None
    z = 0.0
    part = at(_TINY)[1]  # of the partitions best at z = 0 (ties are common there), the one that rises least
    for _ in range(_MAX_STEPS):
        nz = solve_from_zero([item(grp) for grp in part], target)
        if nz is None:
            break
        if math.isinf(nz):
            return nz
        z = max(z, nz)
        # The best partition just past z: another one may stay at or below the target longer
        # (a tie at z with a smaller slope); none does when even the best is above it.
        t_next, better = at(max(z * (1 + _STEP), _TINY))
        if t_next > target * (1 + TOL) or better == part:
            break
        part = better
    return z if z > 0 else None


__all__ = ["cache_aware_inverse"]
