"""The one solver of the inverse roofline: the largest slow-down z of one resource that a bound
of the form ``T(z) = sum_i max(u_i z + d_i, c_i)`` allows within a target (:mod:`.roofline` for
the unfused and fused fidelities, :mod:`.cache` for the cache-aware one).

T is convex, piecewise linear and non-decreasing in z (``u_i >= 0``): the solver walks its
breakpoints ``(c_i - d_i) / u_i`` and solves the last linear piece. :func:`solve_from_chip` starts at
the chip's own point (z = 1, where T is the chip's bound exactly); :func:`solve_from_zero` starts
at z = 0 (the resource infinitely fast) for sums whose value at z = 1 is not given.
"""

from __future__ import annotations

import math

from ..result import Requirement

TOL = 1e-12  # relative: sums of the same times in another order round differently


def requirement(res, work: float, target: float, z: float | None, binding: bool) -> Requirement:  # noqa: ANN001
    """What resource ``res`` must deliver when its rate may be ``rate / z`` (``z``: the solver's answer)."""
    chip = res.rate
    if z is None or z <= 0:
        need, ratio = None, None
    elif math.isinf(z):
        need, ratio = 0.0, 0.0
    else:
        need, ratio = chip / z, 1.0 / z
    any_chip = work / target
    return Requirement(resource=res.key, unit=res.unit, dtype=res.dtype, chip=chip, work=work, any_chip=any_chip,
                       any_chip_ratio=any_chip / chip, with_chip_rest=need, with_chip_rest_ratio=ratio, binding=binding)


def chip_scale(t_chip: float, target: float) -> tuple[bool, float]:
    """``(feasible, chip_scale)``: the chip meets the target; the uniform speed-up it needs."""
    return t_chip <= target, t_chip / target



def solve_from_chip(items: list[tuple[float, float, float, bool]], t_chip: float, target: float) -> float | None:
    """The largest z with ``T(z) = sum max(u z + d, c) <= target`` walked from the chip's own point
    z = 1, where ``T(1) = t_chip`` exactly (items ``(u, d, c, active at z = 1)``): at a target equal to
    the chip's bound a binding resource gets exactly ratio 1.0. inf when any z will do, None when
    none will.

    >>> solve_from_chip([(1.0, 0.0, 0.5, True)], 1.0, 2.0)
    2.0
    """
    if target >= t_chip:
        slope = math.fsum(u for u, _, _, active in items if active)
        events = sorted((max((c - d) / u, 1.0), u) for u, d, c, active in items if not active)
        return _walk_up(events, 1.0, t_chip, slope, target)
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


def solve_from_zero(items: list[tuple[float, float, float]], target: float) -> float | None:
    """The largest z >= 0 with ``T(z) = sum max(u z + d, c) <= target`` (None: not even z = 0;
    inf: every z). T is convex, piecewise linear and non-decreasing (u >= 0): walk its breakpoints
    ``(c - d) / u`` upwards from z = 0, where the items with ``d >= c`` already rise.

    >>> solve_from_zero([(1.0, 0.0, 0.5)], 2.0)
    2.0
    """
    t = math.fsum(max(d, c) for _, d, c in items)
    if t > target * (1 + TOL):
        return None
    target = max(target, t)  # a target met up to rounding of sums is met
    slope = math.fsum(u for u, d, c in items if u > 0 and d >= c)
    return _walk_up(sorted(((c - d) / u, u) for u, d, c in items if u > 0 and d < c), 0.0, t, slope, target)


def _walk_up(events: list[tuple[float, float]], z: float, t: float, slope: float, target: float) -> float:
    """From ``T(z) = t`` rising at ``slope``, walk the breakpoints ``(beta, u)`` (sorted; past each,
    the slope grows by u) until T would pass ``target``; the z where it reaches it (inf: never)."""
    for beta, u in events:
        t_at = t + slope * (beta - z)
        if t_at > target:
            break
        z, t, slope = beta, t_at, slope + u
    if slope <= 0:
        return math.inf
    return z + (target - t) / slope


def prefix_sums(xs: list[float]) -> list[float]:
    """``[0, x0, x0 + x1, ...]``."""
    out = [0.0]
    for x in xs:
        out.append(out[-1] + x)
    return out


__all__ = ["TOL", "chip_scale", "prefix_sums", "requirement", "solve_from_chip", "solve_from_zero"]
