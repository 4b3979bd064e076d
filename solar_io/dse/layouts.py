"""Sweeps over parallel layouts of one graph: ``solar-io sweep g.yaml --hw b200 --vary tp=1,2,4,8 --vary pp=1,2,4``.

Each ``--vary`` names a layout dimension (:data:`LAYOUT_PARAMS`: ``tp``, ``pp``, ``dp``, ``ep``, or
``microbatches``) with the values of :func:`.sweep.parse_values` (``1,2,4,8`` or ``1,2,...,64``). Every
point of their Cartesian product is one :func:`solar_io.backends.parallel.parallel_bound` of the graph
on each chip, run as a task of the sweep executor (:mod:`solar_io.parallel`: local processes or Ray),
so a point that cannot be laid out (too few layer boundaries for ``pp``) is reported, not fatal.

Rows (:data:`.sweep.COLUMNS`): ``sol_s`` is the step time with communication overlapped; ``binding``
is ``communication`` when the slowest stage waits on its links, else that stage's busier side
(``compute`` or ``memory``); ``macs`` and ``flops`` are those of the graph one data-parallel replica's
chips run together per microbatch, ``bytes`` is left empty (DRAM bytes belong to each stage's chip);
extra columns ``serial_s`` (communication not overlapped) and ``chips``. :func:`best_layouts` gives
the fastest layout per chip and fidelity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solar_io.parallel import run_tasks

from ..format.yamltext import YamlError
from ..format.yamltext import read_text as read_limited_text
from .sweep import SweepError, SweepResult, gather, grid, parse_values

LAYOUT_PARAMS = ("tp", "pp", "dp", "ep", "microbatches")


def is_layout_sweep(varies: Sequence[str]) -> bool:
    """True when every ``--vary`` names a layout dimension (mixing them with hardware what-ifs is refused)."""
    names = [v.partition("=")[0].strip() for v in varies]
    hits = [n in LAYOUT_PARAMS for n in names]
    if any(hits) and not all(hits):
        raise SweepError("--vary: layout dimensions (tp, pp, dp, ep, microbatches) and hardware what-ifs cannot be "
                         "mixed in one sweep")
    return bool(names) and all(hits)


def parse_layout_varies(varies: Sequence[str]) -> dict[str, list[int]]:
    """``["tp=1,2,4", "pp=1,2"]`` -> ``{"tp": [1, 2, 4], "pp": [1, 2]}`` (whole numbers >= 1)."""
    out: dict[str, list[int]] = {}
    for spec in varies:
        name, _, text = spec.partition("=")
        name = name.strip()
        if name in out:
            raise SweepError(f"--vary: {name} is given twice")
        values = parse_values(text, f"--vary {name}")
        if not all(isinstance(v, int) and v >= 1 for v in values):
            raise SweepError(f"--vary {name}: layout degrees are whole numbers >= 1, got {text!r}")
        out[name] = values
    return out


@dataclass(frozen=True)
class LayoutTask:
    """One layout point: the graph's text, the chips, the degrees. Picklable for the executors."""

    source: str
    text: str
    chips: tuple[str, ...]
    params: tuple[tuple[str, int], ...]
    strict_fp32: bool = False
    strict_dequant: bool = False

    def __str__(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params)


def run_layout_point(task: LayoutTask) -> list[dict]:
    """Bound the graph at one layout on every chip: the point's rows."""
    from solar_io import graph_metrics, loads
    from solar_io.backends.parallel import make_layout, parallel_bound

    p = dict(task.params)
    g = loads(task.text, task.source)
    layout = make_layout(tp=p.get("tp", 1), pp=p.get("pp", 1), dp=p.get("dp"), ep=p.get("ep", 1))
    opaque = sum(n.kind == "opaque" for n in g.nodes)
    rows = []
    for chip in task.chips:
        r = parallel_bound(g, chip, layout, microbatches=p.get("microbatches", 1), strict_fp32=task.strict_fp32,
                           strict_dequant=task.strict_dequant)
        for f in ("unfused", "fused"):
            slow = max(r.stages, key=lambda s: max(s.work[f].time, s.comm))
            w = slow.work[f]
            binding = "communication" if slow.comm > w.time else ("compute" if w.compute >= w.memory else "memory")
            m = graph_metrics(r.plan.graph)
            rows.append({**p, "chip": r.system.chip.name, "fidelity": f, "sol_s": r.overlapped[f],
                         "binding": binding, "regime": binding, "macs": m.macs, "flops": m.flops, "bytes": None,
                         "opaque": opaque, "validation": g.validation.status, "serial_s": r.serial[f],
                         "chips": layout.chips})
    return rows


def run_layout_sweep(path: Path, chips: Sequence[str], varies: Sequence[str], *, jobs: int | None = 1,
                     executor: str = "local", address: str | None = None, timeout_s: float | None = None,
                     progress: bool = True, strict_fp32: bool = False, strict_dequant: bool = False) -> SweepResult:
    """Bound the graph file at ``path`` at every layout of the ``--vary`` grid (module docstring)."""
    from solar_io.hardware import load_spec

    params = parse_layout_varies(varies)
    try:
        text = read_limited_text(Path(path))  # at most SOLAR_IO_MAX_BYTES + 1 bytes
    except YamlError as e:
        raise SweepError(f"{path}: {e}") from None
    except OSError as e:
        raise SweepError(f"{path}: cannot read: {e.strerror or e}") from None
    names = [load_spec(c).name for c in chips]  # unknown chips fail here, once
    points = grid(params)
    tasks = [LayoutTask(Path(path).name, text, tuple(chips), tuple(pt.items()), strict_fp32, strict_dequant)
             for pt in points]
    out = SweepResult(Path(path).name, dict(params), names)
    return gather(out, points, run_tasks(run_layout_point, tasks, jobs=jobs, executor=executor, address=address,
                                         timeout_s=timeout_s, label=f"layouts of {Path(path).name}",
                                         progress=progress, preload=(__name__,)))


def best_layouts(result: SweepResult) -> list[str]:
    """One line per chip and fidelity: the layout with the smallest overlapped step time."""
    if not result.rows or not result.params or not all(p in LAYOUT_PARAMS for p in result.params):
        return []
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for row in result.rows:
        key = (row["chip"], row["fidelity"])
        if key not in best or row["sol_s"] < best[key]["sol_s"]:
            best[key] = row
    from solar_io.units import format_time

    lines = []
    for (chip, fid), row in best.items():
        layout = ",".join(f"{p}={row[p]}" for p in result.params)
        lines.append(f"best layout on {chip} ({fid}): {layout} on {row['chips']} chips: step "
                     f"{format_time(row['sol_s'])} overlapped, {format_time(row['serial_s'])} serial, "
                     f"bound by {row['binding']}")
    return lines


__all__ = ["LAYOUT_PARAMS", "LayoutTask", "best_layouts", "is_layout_sweep", "parse_layout_varies",
           "run_layout_point", "run_layout_sweep"]
