"""Capturing a whole folder of model files: progress bar, summary table, failures never stop the rest."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import SolarIOError
from ...format.files import dump
from ...graph import Graph


@dataclass
class FileResult:
    """What happened to one file of the folder."""

    path: Path
    output: Path | None = None
    status: str = "failed"  # captured | invalid | failed
    validation: str = ""
    opaque: list[str] = field(default_factory=list)
    error: str = ""


def opaque_ops(g: Graph) -> list[str]:
    """``node (op): reason`` for every opaque node of ``g``."""
    return [f"{n.name} ({n.op}): {n.reason}" for n in g.nodes if n.kind == "opaque"]


def capture_folder(files: list[Path], outdir: Path, capture: Callable[[Path], Graph], *,
                   allow_invalid: bool = False, show_progress: bool = True) -> list[FileResult]:
    """Capture every file into ``outdir/<stem>.yaml``; one result per file, in order."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    outdir.mkdir(parents=True, exist_ok=True)
    results: list[FileResult] = []
    console = Console(file=sys.stderr)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=not show_progress, transient=True) as progress:
        task = progress.add_task("capturing", total=len(files))
        for f in files:
            progress.update(task, description=f"capturing {f.name}")
            r = FileResult(f)
            try:
                g = capture(f)
                r.validation = g.validation.status
                r.opaque = opaque_ops(g)
                if g.validation.status == "failed" and not allow_invalid:
                    r.status = "invalid"
                    r.error = f"validation failed: {g.validation.reason}"
                else:
                    r.output = outdir / f"{f.stem}.yaml"
                    dump(g, r.output)
                    r.status = "captured"
            except SolarIOError as e:
                r.error = str(e)
            except Exception as e:  # a model file that breaks the tracer must not stop the folder
                r.error = f"internal error: {type(e).__name__}: {str(e)[:200]}"
            results.append(r)
            progress.advance(task)
    return results


def summary_table(results: list[FileResult]) -> str:
    """The summary as plain text: one row per file, then totals."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="capture summary")
    for col in ("file", "status", "validation", "opaque ops", "reason"):
        table.add_column(col)
    for r in results:
        table.add_row(r.path.name, r.status, r.validation or "-", str(len(r.opaque)), r.error[:120])
    console = Console(file=None, width=160, record=True, force_terminal=False)
    with console.capture() as cap:
        console.print(table)
        ok = sum(r.status == "captured" for r in results)
        val = sum(r.validation == "passed" for r in results)
        console.print(f"{ok}/{len(results)} captured, {val} validated, "
                      f"{sum(bool(r.opaque) for r in results)} with opaque ops, "
                      f"{sum(r.status != 'captured' for r in results)} failed")
    return cap.get()
