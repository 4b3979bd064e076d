"""Roofline plots (matplotlib PNG): nodes or models as points under a chip's roofs.

x = arithmetic intensity (FLOPs per DRAM byte), y = attained FLOP/s (FLOPs / time). A bound's
point lies on or under the roof by construction; a measured point lies under its bound's point
(its height is FLOPs / measured time). Each fidelity has its own marker, so a reader sees how
far fusion (unfused -> fused) and finite caches (fused -> cache-aware) move a workload, and how
far the measured run is from each. matplotlib comes with the ``plot`` extra and is imported only
when a plot is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..backends.result import Report
from ..errors import SolarIOError
from ..units import format_si

MARKERS = {"unfused": "s", "fused": "^", "cache-aware": "D", "measured": "o", "node": "."}


@dataclass(frozen=True)
class Point:
    """One workload (or node) at one fidelity: its FLOPs, the bytes it moves and its time."""

    label: str
    kind: str  # a fidelity name, "measured" or "node"
    flops: float
    bytes: float
    seconds: float

    @property
    def intensity(self) -> float | None:
        return self.flops / self.bytes if self.bytes > 0 else None

    @property
    def rate(self) -> float | None:
        return self.flops / self.seconds if self.seconds > 0 else None


def roofs_of(report: Report) -> list[tuple[str, float]]:
    """The compute roofs a report uses (``("matrix/bf16", FLOP/s)``, ...), FLOP-counting units only."""
    return sorted({(r.key, r.rate) for r in report.resources if r.unit in ("matrix", "vector") and r.rate > 0})


def report_points(report: Report, *, nodes: bool = True) -> list[Point]:
    """Every node of ``report`` at its unfused bound, and the whole graph at each computed fidelity."""
    pts = []
    if nodes:
        for n in report.nodes:
            flops = n.flops_matrix + n.flops_vector
            if flops > 0 and n.bytes > 0 and n.time > 0:
                pts.append(Point(n.name, "node", flops, n.bytes, n.time))
    flops = report.totals.flops_matrix + report.totals.flops_vector
    name = report.graph or "graph"
    for f in report.fidelities:
        if f.computed and f.time and f.bytes:
            pts.append(Point(name, f.name, flops, f.bytes, f.time))
    if report.measured and report.cache_aware.computed and report.cache_aware.bytes:
        pts.append(Point(name, "measured", flops, report.cache_aware.bytes, report.measured))
    elif report.measured and report.fused.bytes:
        pts.append(Point(name, "measured", flops, report.fused.bytes, report.measured))
    return pts


def roofline_plot(path: Path, points: Sequence[Point], roofs: Sequence[tuple[str, float]], dram_bandwidth: float,
                  title: str, *, annotate: bool = True) -> Path:
    """Draw ``points`` under the roofs (compute rates and the DRAM slope) into the PNG ``path``."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SolarIOError("plotting needs matplotlib: pip install 'solar-io[plot]'") from None
    usable = [p for p in points if p.intensity and p.rate]
    if not usable:
        raise SolarIOError(f"{path}: nothing to plot (no point has both FLOPs and bytes)")
    xs = [p.intensity for p in usable]
    peak = max((r for _, r in roofs), default=max(p.rate for p in usable))
    x_lo = min(min(xs), peak / dram_bandwidth) / 10
    x_hi = max(max(xs), peak / dram_bandwidth) * 10
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=110)
    grid = [x_lo * (x_hi / x_lo) ** (i / 200) for i in range(201)]
    for label, rate in roofs:
        ax.plot(grid, [min(rate, x * dram_bandwidth) for x in grid], lw=1.5, label=f"roof {label} "
                f"{rate / 1e12:.3g} TFLOP/s")
    if not roofs:
        ax.plot(grid, [x * dram_bandwidth for x in grid], lw=1.5, label="DRAM")
    ax.text(grid[5], grid[5] * dram_bandwidth * 1.3, f"DRAM {format_si(dram_bandwidth, 'B/s')}", fontsize=8)
    for kind, marker in MARKERS.items():
        sel = [p for p in usable if p.kind == kind]
        if sel:
            ax.scatter([p.intensity for p in sel], [p.rate for p in sel], marker=marker,
                       s=16 if kind == "node" else 44, alpha=0.45 if kind == "node" else 0.9,
                       label=kind if kind != "node" else "nodes (unfused)", zorder=3)
    if annotate:
        labels = {}
        for p in usable:
            if p.kind == "measured" or (p.kind != "node" and p.label not in labels):
                labels[p.label] = p
        if len(labels) <= 40:
            for p in labels.values():
                ax.annotate(p.label, (p.intensity, p.rate), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    y_lo = min(p.rate for p in usable) / 10
    ax.set_ylim(y_lo if math.isfinite(y_lo) and y_lo > 0 else 1.0, peak * 3)
    ax.set_xlabel("arithmetic intensity (FLOP / DRAM byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)
    return path


def plot_reports(reports: Sequence[Report], path: Path) -> list[Path]:
    """``solar-io bound --plot``: one roofline PNG per chip (``path``, or ``stem-CHIP.png`` for several
    chips), every node at its unfused bound and the graph at each fidelity (and measured, if given)."""
    path = Path(path)
    out = []
    for r in reports:
        target = path if len(reports) == 1 else path.with_name(f"{path.stem}-{r.hardware}{path.suffix or '.png'}")
        title = f"{r.graph or 'graph'} on {r.hardware_full_name or r.hardware}"
        out.append(roofline_plot(target, report_points(r), roofs_of(r), r.dram_bandwidth, title,
                                 annotate=False))
    return out
