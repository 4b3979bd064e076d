"""Plots of a sweep table: SOL against each parameter, per chip and fidelity, with regime shifts.

One PNG per parameter (``sol_vs_<name>.png``): a grid of panels, one row per fidelity and one
column per chip. Each panel draws the bound against the parameter for up to :data:`MAX_LINES`
settings of the other parameters (evenly chosen when there are more). Filled markers are points
bound by compute, hollow ones points bound by memory; a dotted vertical line marks each regime
shift (drawn between the two values it lies between). Needs matplotlib (``solar-io[plot]``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .shifts import Shift, format_value

MAX_LINES = 6


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def _pick(keys: list[tuple], n: int) -> list[tuple]:
    if len(keys) <= n:
        return keys
    return [keys[round(i * (len(keys) - 1) / (n - 1))] for i in range(n)]


def _between(a: Any, b: Any, log: bool) -> float:
    return math.sqrt(a * b) if log else (a + b) / 2


def plot_sweep(rows: Sequence[dict], params: Sequence[str], chips: Sequence[str], shifts: Sequence[Shift],
               outdir: Path) -> list[Path]:
    """Write one PNG per parameter with at least two values into ``outdir``; returns the paths.

    Raises ImportError when matplotlib is missing.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, NullLocator

    fidelities = [f for f in ("unfused", "fused", "cache-aware") if any(r["fidelity"] == f for r in rows)]
    paths = []
    for p in params:
        values = sorted({r[p] for r in rows}, key=lambda v: (str(type(v)), v))
        if len(values) < 2 or not fidelities:
            continue
        numeric = _numeric(values)
        log_x = numeric and min(values) > 0 and max(values) / min(values) >= 8
        others = [q for q in params if q != p]
        fig, axes = plt.subplots(len(fidelities), len(chips), squeeze=False, sharex=True,
                                 figsize=(max(6.5, 3.6 * len(chips) + 1), 2.8 * len(fidelities) + 0.8))
        for i, fid in enumerate(fidelities):
            for j, chip in enumerate(chips):
                ax = axes[i][j]
                lines: dict[tuple, list[dict]] = {}
                for r in rows:
                    if r["chip"] == chip and r["fidelity"] == fid:
                        lines.setdefault(tuple(r[q] for q in others), []).append(r)
                for k, key in enumerate(_pick(sorted(lines), MAX_LINES)):
                    line = sorted(lines[key], key=lambda r: values.index(r[p]))
                    xs = [r[p] if numeric else values.index(r[p]) for r in line]
                    ys = [r["sol_s"] for r in line]
                    color = f"C{k}"
                    label = ", ".join(f"{q}={format_value(v)}" for q, v in zip(others, key, strict=True)) or None
                    ax.plot(xs, ys, color=color, linewidth=1, label=label)
                    for regime, face in (("compute", color), ("memory", "white")):
                        pts = [(x, y) for x, y, r in zip(xs, ys, line, strict=True) if r["regime"] == regime]
                        if pts:
                            ax.scatter(*zip(*pts, strict=True), s=14, edgecolors=color, facecolors=face, zorder=3)
                    fixed = tuple(zip(others, key, strict=True))
                    for s in shifts:
                        if (s.chip, s.fidelity, s.parameter, s.fixed) == (chip, fid, p, fixed):
                            a, b = (s.before, s.after) if numeric else (values.index(s.before), values.index(s.after))
                            ax.axvline(_between(a, b, log_x), color=color, linestyle=":", linewidth=1)
                if log_x:
                    ax.set_xscale("log")
                if numeric and len(values) <= 12:  # label the swept values themselves
                    ax.set_xticks(values, [f"{v:g}" for v in values], fontsize=7)
                    ax.xaxis.set_minor_locator(NullLocator())
                elif log_x:  # many values: decades only
                    ax.xaxis.set_minor_formatter(NullFormatter())
                if any(r["sol_s"] > 0 for ls in lines.values() for r in ls):
                    ax.set_yscale("log")
                if not numeric:
                    ax.set_xticks(range(len(values)), [str(v) for v in values])
                ax.set_title(f"{chip} - {fid}", fontsize=9)
                ax.grid(True, which="both", alpha=0.3)
                if j == 0:
                    ax.set_ylabel("SOL (s)")
                if i == len(fidelities) - 1:
                    ax.set_xlabel(p)
        handles, labels = axes[0][0].get_legend_handles_labels()
        if labels:
            fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 3), fontsize=8)
        fig.suptitle(f"SOL vs {p}\nfilled: compute-bound, hollow: memory-bound, dotted: regime shift",
                     fontsize=10)
        fig.tight_layout(rect=(0, 0.07 if labels else 0, 1, 0.93))
        path = outdir / f"sol_vs_{p}.png"
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            fig.savefig(tmp, dpi=90, format="png")
            os.replace(tmp, path)  # written atomically, like the tables
        finally:
            plt.close(fig)
            tmp.unlink(missing_ok=True)
        paths.append(path)
    return paths
