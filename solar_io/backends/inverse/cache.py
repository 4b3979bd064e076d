"""Inverse roofline of the cache-aware fidelity (:mod:`.roofline` has the definitions).

The cache-aware bound at capacity S is ``T = max(min over partitions P of T_P, T_fused)`` with
``T_P = sum over groups g of P of max(busiest unit of g, Q_g / DRAM bandwidth)``; the traffic Q_g
of each candidate group depends on S, not on the chip's rates (``CacheAware.candidates``). When
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
    pre = [prefix_sums(col) for col in unit_t]
    fused_units = [math.fsum(col) for col in unit_t]
    boundary = report.totals.boundary_bytes
    min_traffic = _best(n, ca.candidates, lambda i, j, q: q)[0]
    traffic = {(i, j): q for i, j, q in ca.candidates}
    chosen_spans = [(i, j, traffic[(i, j)]) for i, j in ca.spans]
    reqs = []
    for res in report.resources:
        if res.unit == "dram":
            work = max(min_traffic, boundary)
            share = None
        else:
            work = res.work_unfused
            share = prefix_sums([math.fsum(ld.time for ld in nd.loads if ld.resource == res.key)
                                 for nd in report.nodes])

        def item(i: int, j: int, q: float, share=share, res=res) -> tuple[float, float, float]:  # noqa: ANN001
            units = [p[j + 1] - p[i] for p in pre]
            if share is None:  # DRAM: max(Q / bw * z, compute)
                return q / bw, 0.0, max(units)
            k = UNITS.index(res.unit)
            u = share[j + 1] - share[i]
            return u, units[k] - u, max([x for m, x in enumerate(units) if m != k] + [q / bw])

        if share is None:
            fused_item = (boundary / bw, 0.0, max(fused_units, default=0.0))
        else:
            k = UNITS.index(res.unit)
            fused_item = (share[-1], fused_units[k] - share[-1],
                          max([x for m, x in enumerate(fused_units) if m != k] + [boundary / bw]))
        z_fused = solve_from_zero([fused_item], target)
        z_part = _partition_z(n, ca, item, target)
        z = None if z_fused is None or z_part is None else min(z_fused, z_part)
        binding = (not ca.raised_to_fused and any(_active(item(i, j, q))[3] for i, j, q in chosen_spans)) or (
            _active(fused_item)[3] and max(fused_item[0] + fused_item[1], fused_item[2]) >= t_chip * (1 - 1e-12))
        reqs.append(requirement(res, work, target, z, binding))
    feasible, factor = chip_scale(t_chip, target)
    return InverseFidelity(fidelity="cache-aware", chip_time=t_chip, feasible=feasible, chip_scale=factor,
                           requirements=tuple(reqs))


def _active(it: tuple[float, float, float]) -> tuple[float, float, float, bool]:
    u, d, c = it
    return u, d, c, u > 0 and u + d >= c


def _best(n: int, candidates, cost) -> tuple[float, list[tuple[int, int, float]]]:  # noqa: ANN001
    """The partition of nodes 0..n-1 into candidate groups of least total ``cost(i, j, q)``
    (``candidates`` in order of their last node, as :func:`.partition.cache_aware` lists them)."""
    best = [0.0] + [math.inf] * n
    back: list[tuple[int, int, float] | None] = [None] * (n + 1)
    for i, j, q in candidates:
        if math.isinf(best[i]):
            continue
        t = best[i] + cost(i, j, q)
        if t < best[j + 1]:
            best[j + 1], back[j + 1] = t, (i, j, q)
    groups = []
    j = n
    while j > 0 and back[j] is not None:
        groups.append(back[j])
        j = back[j][0]  # type: ignore[index]
    return best[n], groups[::-1]


def _partition_z(n: int, ca: CacheAware, item, target: float) -> float | None:  # noqa: ANN001
    """The largest z with min over partitions of T_P(z) <= target (see the module docstring)."""

    def at(z: float):  # noqa: ANN202
        def cost(i: int, j: int, q: float) -> float:
            u, d, c = item(i, j, q)
            return max(u * z + d, c)
        return _best(n, ca.candidates, cost)

    if at(0.0)[0] > target * (1 + TOL):
        return None
    z = 0.0
    part = at(_TINY)[1]  # of the partitions best at z = 0 (ties are common there), the one that rises least
    for _ in range(_MAX_STEPS):
        nz = solve_from_zero([item(i, j, q) for i, j, q in part], target)
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
