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
from dataclasses import dataclass

from .result import Report

_UNITS = ("matrix", "vector", "special", "dram")


@dataclass(frozen=True, slots=True)
class Requirement:
    """What one resource must deliver for the target (see the module docstring)."""

    resource: str
    unit: str
    dtype: str | None
    chip: float
    work: float
    any_chip: float
    any_chip_ratio: float
    with_chip_rest: float | None
    with_chip_rest_ratio: float | None
    binding: bool


@dataclass(frozen=True, slots=True)
class InverseFidelity:
    """The inverse roofline of one fidelity."""

    fidelity: str
    chip_time: float
    feasible: bool
    chip_scale: float
    requirements: tuple[Requirement, ...]


@dataclass(frozen=True, slots=True)
class Inverse:
    """The inverse roofline for a target latency (and the rate it came from, if any)."""

    target_latency: float
    target_rate: float | None
    fidelities: tuple[InverseFidelity, ...]  # unfused, fused, and cache-aware when it was computed

    def fidelity(self, name: str) -> InverseFidelity | None:
        """The entry of fidelity ``name`` (None for a fidelity that was not computed)."""
        return next((f for f in self.fidelities if f.fidelity == name), None)


def inverse_roofline(report: Report, target: float, rate: float | None = None) -> Inverse:
    """The inverse roofline of ``report`` for the target latency ``target`` seconds (the cache-aware
    fidelity too when the report has it: :mod:`.inverse_cache`)."""
    if not (target > 0 and math.isfinite(target)):
        raise ValueError(f"target latency must be a positive number of seconds, got {target!r}")
    from .inverse_cache import cache_aware_inverse  # it builds on this module's solver
    cache = cache_aware_inverse(report, target)
    return Inverse(target, rate, (_unfused(report, target), _fused(report, target))
                   + ((cache,) if cache is not None else ()))


def _requirement(res, work: float, target: float, z: float | None, binding: bool) -> Requirement:  # noqa: ANN001
    chip = res.rate
    if z is None or z <= 0:
        need, ratio = None, None
    elif math.isinf(z):
        need, ratio = 0.0, 0.0
    else:
        need, ratio = chip / z, 1.0 / z
    any_chip = work / target
    return Requirement(res.key, res.unit, res.dtype, chip, work, any_chip, any_chip / chip, need, ratio, binding)


def _scale(t_chip: float, target: float) -> tuple[bool, float]:
    return t_chip <= target, t_chip / target


def _fused(report: Report, target: float) -> InverseFidelity:
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
        reqs.append(_requirement(res, work, target, z, binding))
    feasible, scale = _scale(t_chip, target)
    return InverseFidelity("fused", t_chip, feasible, scale, tuple(reqs))


def _unfused(report: Report, target: float) -> InverseFidelity:
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
        z = _solve_unfused(items, t_chip, target)
        reqs.append(_requirement(res, res.work_unfused, target, z, binding))
    feasible, scale = _scale(t_chip, target)
    return InverseFidelity("unfused", t_chip, feasible, scale, tuple(reqs))


def _solve_unfused(items: list[tuple[float, float, float, bool]], t_chip: float, target: float) -> float | None:
    """The largest z with ``T(z) <= target`` (see the module docstring); inf when any z will do,
    None when none will. ``T(1) = t_chip`` by definition."""
    if target >= t_chip:
        slope = math.fsum(u for u, _, _, active in items if active)
        events = sorted((max((c - d) / u, 1.0), u) for u, d, c, active in items if not active)
        z, t = 1.0, t_chip
        for beta, u in events:
            t_at = t + slope * (beta - z)
            if t_at > target:
                break
            z, t, slope = beta, t_at, slope + u
        if slope <= 0:
            return math.inf
        return z + (target - t) / slope
    # Going left of z = 1: active nodes leave the active set at their breakpoint in (0, 1).
    leaving = sorted(((c - d) / u, u) for u, d, c, active in items if active and (c - d) / u > 0)
    leaving = [(min(beta, 1.0), u) for beta, u in leaving]
    slope = math.fsum(u for u, _, _, active in items if active) - math.fsum(u for beta, u in leaving if beta >= 1.0)
    z, t = 1.0, t_chip
    for beta, u in reversed(leaving):
        if beta >= 1.0:
            continue
        t_at = t - slope * (z - beta)
        if t_at <= target:
            return max(beta, z - (t - target) / slope)
        z, t, slope = beta, t_at, slope - u
    if slope <= 0 or t - slope * z >= target:
        return None
    z -= (t - target) / slope
    return z if z > 0 else None


__all__ = ["Inverse", "InverseFidelity", "Requirement", "inverse_roofline"]
