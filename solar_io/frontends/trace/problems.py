"""Capturing a definition, a problem folder or a corpus of them: one graph per workload line.

Graphs are written as ``OUTDIR/<definition>.<uuid or index>.yaml`` (a corpus keeps each problem's
subset folders: ``OUTDIR/L1/<definition>.<uuid>.yaml``). A bad definition fails its problem, a bad
workload line fails that workload, and neither stops the rest; every failure is one line.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import SolarIOError
from ...format.files import dump
from ...graph import Graph
from ..common.errors import CaptureError
from ..common.folder import opaque_ops
from ..common.usercode import DEFAULT_TIMEOUT_S, user_code
from .capture import capture_workload, load_reference
from .definition import Definition, read_definition
from .detect import DEFINITION, WORKLOADS, problem_dirs
from .workload import BadLine, Workload, read_workloads


@dataclass
class WorkloadResult:
    """What happened to one workload line (``key`` is its uuid or index; "-" when the definition failed)."""

    problem: str
    key: str
    line: int = 0
    status: str = "failed"  # captured | invalid | failed
    validation: str = ""
    opaque: list[str] = field(default_factory=list)
    error: str = ""
    output: Path | None = None
    seconds: float = 0.0
    graph: Graph | None = field(default=None, repr=False)


def _locate(source: Path, workloads: Path | None) -> tuple[Path, Path]:
    defn = source / DEFINITION if source.is_dir() else source
    wl = workloads or defn.parent / WORKLOADS
    if not wl.is_file():
        raise CaptureError(f"{wl}: no such workload file (give --workloads workload.jsonl)")
    return defn, wl


def capture_problem(source: Path, outdir: Path | None, *, workloads: Path | None = None,
                    options: dict | None = None, allow_invalid: bool = False, problem: str | None = None,
                    keep_graphs: bool = False, sample: int | None = None,
                    keys: Collection[str] | None = None) -> list[WorkloadResult]:
    """Capture every workload of a definition file or problem folder; graphs go to ``outdir`` (None:
    not written). ``options``: validate, strict, seed, validate_budget. ``sample``: only this many
    lines, evenly spaced from the first to the last (benchmarks on a small machine); ``keys``: only the
    lines of these keys (:attr:`.workload.Workload.key`: uuid or index), before any ``sample``."""
    options = dict(options or {})
    label = problem or (source.name if source.is_dir() else source.parent.name)
    try:
        defn_path, wl_path = _locate(source, workloads)
        defn = read_definition(defn_path)
        lines = read_workloads(wl_path, defn)
        with user_code(f"{label}: reference", options.get("timeout", DEFAULT_TIMEOUT_S)):
            module = load_reference(defn)  # runs the reference's module body
    except SolarIOError as e:
        return [WorkloadResult(label, "-", error=str(e))]
    if keys is not None:
        lines = [x for x in lines if isinstance(x, Workload) and x.key in keys]
    if sample is not None and 0 < sample < len(lines):
        step = (len(lines) - 1) / max(sample - 1, 1)
        lines = [lines[round(i * step)] for i in range(sample)]
    results = []
    for item in lines:
        if isinstance(item, BadLine):
            results.append(WorkloadResult(label, str(item.index), item.line, error=item.message))
            continue
        results.append(_one(defn, item, module, outdir, options, allow_invalid, label, keep_graphs))
    return results


def _one(defn: Definition, wl: Workload, module: object, outdir: Path | None, options: dict,
         allow_invalid: bool, label: str, keep: bool) -> WorkloadResult:
    r = WorkloadResult(label, wl.key, wl.line)
    t0 = time.perf_counter()
    try:
        with user_code(wl.where, options.get("timeout", DEFAULT_TIMEOUT_S)):  # the reference runs here
            g = capture_workload(defn, wl, module, **{k: v for k, v in options.items() if k != "timeout"})
        r.validation = g.validation.status
        r.opaque = opaque_ops(g)
        if g.validation.status == "failed" and not allow_invalid:
            r.status, r.error = "invalid", f"{wl.where}: validation failed: {g.validation.reason}"
        else:
            if outdir is not None:  # a graph no reader would accept is not written, nor counted as captured
                outdir.mkdir(parents=True, exist_ok=True)
                path = outdir / f"{defn.name}.{wl.key}.yaml"
                dump(g, path)
                r.output = path
            r.status = "captured"
        if keep:
            r.graph = g
    except SolarIOError as e:
        msg = str(e)
        r.error = msg if msg.startswith(wl.where) else f"{wl.where}: {msg}"
    except Exception as e:  # a reference that breaks the tracer must not stop the others
        if type(e).__name__ == "NoLowering":  # raised outside a rule (a graph input's dtype, ...)
            r.error = f"{wl.where}: {str(e)[:300]}"
        else:
            r.error = f"{wl.where}: internal error: {type(e).__name__}: {str(e)[:200]}"
    r.seconds = time.perf_counter() - t0
    return r


def capture_corpus(folder: Path, outdir: Path | None, *, options: dict | None = None, allow_invalid: bool = False,
                   show_progress: bool = False) -> list[WorkloadResult]:
    """Every problem folder below ``folder``; each one's graphs in its relative folder of ``outdir``."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    dirs = problem_dirs(folder)
    if not dirs:
        raise CaptureError(f"{folder}: no problem folders (folders holding {DEFINITION})")
    results: list[WorkloadResult] = []
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(file=sys.stderr), disable=not show_progress, transient=True) as progress:
        task = progress.add_task("capturing", total=len(dirs))
        for d in dirs:
            rel = d.relative_to(folder)
            progress.update(task, description=f"capturing {rel}")
            sub = None if outdir is None else (outdir / rel.parent if d != folder else outdir)
            results += capture_problem(d, sub, options=options, allow_invalid=allow_invalid, problem=str(rel))
            progress.advance(task)
    return results


def summary_table(results: list[WorkloadResult], *, per_problem: bool = False) -> str:
    """Plain-text summary: one row per workload (or per problem), then totals."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="capture summary")
    if per_problem:
        for col in ("problem", "captured", "opaque", "failed", "first failure"):
            table.add_column(col)
        by: dict[str, list[WorkloadResult]] = {}
        for r in results:
            by.setdefault(r.problem, []).append(r)
        for name, rs in by.items():
            bad = [r for r in rs if r.status != "captured"]
            table.add_row(name, f"{len(rs) - len(bad)}/{len(rs)}", str(sum(bool(r.opaque) for r in rs)),
                          str(len(bad)), bad[0].error[:110] if bad else "")
    else:
        for col in ("workload", "line", "status", "validation", "opaque ops", "reason"):
            table.add_column(col)
        for r in results:
            table.add_row(f"{r.problem}:{r.key}", str(r.line or "-"), r.status, r.validation or "-",
                          str(len(r.opaque)), r.error[:120])
    console = Console(file=None, width=170, record=True, force_terminal=False)
    with console.capture() as cap:
        console.print(table)
        ok = sum(r.status == "captured" for r in results)
        console.print(f"{ok}/{len(results)} workloads captured, {sum(r.validation == 'passed' for r in results)} "
                      f"validated, {sum(bool(r.opaque) for r in results)} with opaque ops, "
                      f"{len(results) - ok} failed")
    return cap.get()
