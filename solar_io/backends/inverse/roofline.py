"""Inverse roofline: what a chip needs to run the graph within a target time.

For a target latency T* (or a rate, T* = 1 / rate) and each fidelity, for every resource r the
graph uses (a unit's peak at one dtype, ``matrix/bf16``, or the DRAM bandwidth):

``any_chip``
    ``work_r / T*``: the rate that *any* chip needs on r, whatever its other resources (a
    necessary condition: even with every other resource unlimited, r alone takes ``work_r / rate``).
    For the unfused fidelity this holds because ``T = sum_v max(...) >= sum_v work_rv / rate_r``.

``with_chip_rest``
    The smallest rate of r that reaches T* when every *other* resource keeps the chip's own value
    (scale one resource, keep the rest); None when no rate of r is enough (the rest alone takes
    T* or more). For the fused fidelity ``T = max(busiest unit, memory)`` and r's unit time is
    ``work_r / x + (the unit's other work)``, solved in closed form. For the unfused fidelity the
    bound is not one division: with ``z = rate_chip / x``,
    ``T(z) = sum_v max(u_v z + d_v, c_v)`` where ``u_v`` is r's time in node v on the chip, ``d_v``
    the time of the node's other work on the same unit and ``c_v`` its slowest other unit or DRAM.
    T is convex, piecewise linear and non-decreasing in z; the solver walks its breakpoints
    ``(c_v - d_v) / u_v`` from z = 1 (where T is the chip's own bound, exactly) towards T* and
    solves the last segment. Hence at T* = the chip's bound, a *binding* resource (one whose
    reduction would raise the bound: it is the slowest term of at least one node, ties included,
    or the fused maximum) needs exactly the chip's rate, ratio 1.0, and any other resource less.

``chip_scale``
    ``T_chip / T*``: the factor by which the whole chip (every peak and the bandwidth together)
    must be faster; every fidelity's bound is inversely proportional to a uniform scaling.
    ``feasible`` is ``T_chip <= T*``.

Ratios are requirement / the chip's value: above 1 the chip falls short on that resource.
"""

from __future__ import annotations

import math

from ..result import InverseFidelity, Report
from .solve import chip_scale, requirement, solve_from_chip

_UNITS = ("matrix", "vector", "special", "dram")


def fused_inverse(report: Report, target: float) -> InverseFidelity:
    fused = report.fused
    t_chip = fused.time or 0.0
    totals = dict(fused.unit_times)
    totals["dram"] = fused.memory_time or 0.0
    reqs = []
    for res in report.resources:
        work = res.work_fused
        u = work / res.rate  # the resource's time on the chip
        unit_total = totals[res.unit]
        others = max((t for k, t in totals.items() if k != res.unit), default=0.0)
        binding = u > 0 and unit_total >= t_chip
        if others > target:
            z = None
        elif u <= 0:
            z = math.inf
        else:
            z = 1.0 + (target - unit_total) / u
            z = None if z <= 0 else z
        reqs.append(requirement(res, work, target, z, binding))
    feasible, factor = chip_scale(t_chip, target)
    return InverseFidelity(fidelity="fused", chip_time=t_chip, feasible=feasible, chip_scale=factor,
                           requirements=tuple(reqs))


def unfused_inverse(report: Report, target: float) -> InverseFidelity:
    t_chip = report.unfused.time or 0.0
    # Per resource: (u, d, c, active-at-chip) of every node that loads it.
    terms: dict[str, list[tuple[float, float, float, bool]]] = {}
    for n in report.kernels or report.nodes:
        unit_times = (n.matrix_time, n.vector_time, n.special_time, n.memory_time)
        loads = n.loads
        for ld in loads:
            u = ld.work / ld.rate
            if u <= 0:
                continue
            i = _UNITS.index(ld.unit)
            # d: the node's other work on the same unit (a fallback shares it), usually none
            same = [o for o in loads if o.unit == ld.unit]
            d = math.fsum(o.work / o.rate for o in same if o is not ld) if len(same) > 1 else 0.0
            c = max(unit_times[:i] + unit_times[i + 1:])
            terms.setdefault(ld.resource, []).append((u, d, c, unit_times[i] >= c))
    reqs = []
    for res in report.resources:
        items = terms.get(res.key, [])
        binding = any(active for *_, active in items)
        z = solve_from_chip(items, t_chip, target)
        reqs.append(requirement(res, res.work_unfused, target, z, binding))
    feasible, factor = chip_scale(t_chip, target)
    return InverseFidelity(fidelity="unfused", chip_time=t_chip, feasible=feasible, chip_scale=factor,
                           requirements=tuple(reqs))


__all__ = ["fused_inverse", "unfused_inverse"]
