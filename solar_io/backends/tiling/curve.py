"""The Q(S) curve of one einsum ("ski-slope", Orojenesis, Huang et al., ISCA 2024).

Capacities are log-spaced from the smallest working set (every tile 1) to the whole working set
(every tile the full rank), where Q reaches the compulsory traffic. Each point is the tiling ILP
optimum and the provable floor. Q is made non-increasing by construction as well as by nature: a
tiling that fits in S fits in any S' > S, so ``Q(S') = min(Q(S'), Q(S))`` is still achievable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .einsum import Einsum, compulsory_bytes, working_set
from .floors import Floor, floor
from .ilp import Tiling, solve


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """Q(S) at one capacity: the ILP tiling (None traffic when nothing fits) and the floor."""

    capacity: float
    tiling: Tiling
    floor: Floor

    @property
    def traffic(self) -> float | None:
        return self.tiling.traffic


def capacities(e: Einsum, points: int = 16) -> list[float]:
    """``points`` log-spaced capacities from the smallest to the whole working set (bytes)."""
    lo = working_set(e, {r: 1 for r in e.space})
    hi = working_set(e, e.size)
    if hi <= lo * 1.0001 or points < 2:
        return [hi]
    step = (math.log(hi) - math.log(lo)) / (points - 1)
    return [math.exp(math.log(lo) + k * step) for k in range(points - 1)] + [hi]


def curve(e: Einsum, caps: list[float] | None = None) -> list[CurvePoint]:
    """Q(S) at each capacity of ``caps`` (default :func:`capacities`), ascending S."""
    pts: list[CurvePoint] = []
    best: Tiling | None = None
    for s in sorted(caps if caps is not None else capacities(e)):
        t = solve(e, s)
        if t.traffic is not None and best is not None and best.traffic is not None and best.traffic < t.traffic:
            t = Tiling(s, best.traffic, best.tiles, best.order, best.per_operand, best.stationary, best.working_set)
        if t.traffic is not None:
            best = t
        pts.append(CurvePoint(s, t, floor(e, s)))
    return pts


def plot(e: Einsum, pts: list[CurvePoint], path: str) -> None:
    """Write the curve as an image (matplotlib, the optional ``plot`` extra)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("--plot needs matplotlib: pip install 'solar-io[plot]'") from None
    xs = [p.capacity for p in pts if p.traffic is not None]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.step(xs, [p.traffic for p in pts if p.traffic is not None], where="post", label="Q(S), tiling ILP")
    ax.plot([p.capacity for p in pts], [p.floor.value for p in pts], "--", label="provable floor")
    ax.axhline(compulsory_bytes(e), color="grey", lw=0.8, label="compulsory")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("on-chip capacity S (bytes)")
    ax.set_ylabel("DRAM traffic Q (bytes)")
    ax.set_title(f"{e.name}: Q(S)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


__all__ = ["CurvePoint", "capacities", "curve", "plot"]
