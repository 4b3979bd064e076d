"""``solar-io check-bounds DIR --hw SPEC`` and ``solar-io report DIR -o OUT --hw SPEC``.

Both run :mod:`.corpus` over folders of model files with a progress bar, never stop at one
failure, and end with a summary of failures. ``check-bounds`` exits 1 when any measured run
beat any SOL (a violation), 2 when no violation was seen but some files could not be checked.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..errors import SolarIOError
from ..format.yamltext import write_atomic
from ..reports.corpus import CaseOptions, CaseResult, model_files, run_cases
from ..reports.plot import Point, roofline_plot
from ..reports.tables import folder_summary, to_csv, to_markdown, to_records
from ..units import SIZE_RULES, format_time, parse_size_int
from .measure import parse_min_time, resolve_specs
from .options import Compile, Device, MinTime, Repeats, TorchDtype, Warm, Workers


def _budget(text: str | None) -> int | None:
    return None if text is None else parse_size_int(text, "--budget")


def _files(dirs: list[Path]) -> list[Path]:
    files = []
    for d in dirs:
        if not d.exists():
            raise SolarIOError(f"{d}: no such file or folder")
        found = model_files(d)
        if not found:
            raise SolarIOError(f"{d}: no model files (*.py) in it")
        files += found
    return files


def _run(files: list[Path], hw: str, options: CaseOptions, jobs: int) -> tuple[list[CaseResult], str, float]:
    spec = resolve_specs(hw)[0]
    t0 = time.perf_counter()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[last]}"), transient=True, disable=not sys.stderr.isatty(),
                  console=None) as bar:
        task = bar.add_task("check" if options.measure else "bound", total=len(files), last="")

        def tick(r: CaseResult) -> None:
            bar.update(task, advance=1, last=f"{r.name}: {r.status}")
        results = run_cases(files, spec, options, jobs=jobs, progress=tick)
    return results, spec.name, time.perf_counter() - t0


def _phase_line(results: list[CaseResult], wall: float) -> str:
    phases: dict[str, float] = {}
    for r in results:
        for k, v in r.phases.items():
            phases[k] = phases.get(k, 0.0) + v
    parts = ", ".join(f"{k} {v:.1f} s" for k, v in phases.items())
    return f"time: {wall:.1f} s in all ({parts})"


def _summary(results: list[CaseResult]) -> str:
    n = {s: sum(r.status == s for r in results) for s in ("ok", "violation", "failed", "skipped")}
    return (f"{len(results)} models: {n['ok']} within every bound, {n['violation']} violations, "
            f"{n['failed']} failed, {n['skipped']} skipped")


def check_bounds_command(
    folders: list[Path] = typer.Argument(..., help="Folders of model files (or files). WARNING: runs their code."),
    hw: str = typer.Option(..., "--hw", help="The chip the runs happen on: a spec path (from `solar-io hw probe`), "
                                             "a name, or 'local' to probe this CPU now."),
    repeats: Repeats = 5,
    min_time: MinTime = "0.05s",
    warm: Warm = False,
    cache_aware: bool = typer.Option(True, "--cache-aware/--no-cache-aware", help="Check the cache-aware "
                                                                                  "fidelity too."),
    dtype: TorchDtype = None,
    device: Device = "cpu",
    compile_: Compile = False,
    budget: str | None = typer.Option(None, "--budget", help="Skip models needing more memory (default: half the "
                                                             f"available memory); {SIZE_RULES}."),
    jobs: Workers = 1,
    output: Path | None = typer.Option(None, "-o", "--output", help="Write every case as YAML (or .json) here."),
    tolerance: float = typer.Option(0.0, "--tolerance", min=0.0, max=0.5,
                                    help="Flag a run only when it is below SOL x (1 - TOL): the noise margin of "
                                         "peaks that were themselves measured on this machine (default 0)."),
) -> None:
    """Zero-violation check: capture -> bound -> measure every model file; report each case where the fastest
    measured run beat the SOL at any fidelity, with its largest nodes. Exit 1 on any violation, 2 when some
    files failed (and none violated)."""
    options = CaseOptions(repeats=repeats, min_seconds=parse_min_time(min_time), warm=warm,
                          cache_aware=cache_aware, dtype=dtype, device=device, compile=compile_,
                          budget=_budget(budget), tolerance=tolerance)
    results, hw_name, wall = _run(_files(folders), hw, options, jobs)
    for r in results:
        if r.status == "violation":
            for v in r.violations:
                typer.echo(f"VIOLATION {r.file}: {v.fidelity} SOL {format_time(v.sol)} > fastest run "
                           f"{format_time(v.measured_min)} on {hw_name}; largest nodes:")
                for n in v.top_nodes:
                    typer.echo(f"    {n['node']} ({n['op']}): {format_time(n['time'])}, {n['bytes']:.4g} bytes, "
                               f"{n['flops']:.4g} FLOPs, bound by {n['bottleneck']}")
        elif r.status in ("failed", "skipped"):
            typer.echo(f"{r.status.upper()} {r.file}: {r.reason}", err=True)
    if output is not None:
        _write_records(output, results, hw_name)
    typer.echo(_summary(results))
    typer.echo(_phase_line(results, wall))
    if any(r.status == "violation" for r in results):
        raise typer.Exit(1)
    if any(r.status == "failed" for r in results):
        raise typer.Exit(2)


def _write_records(path: Path, results: list[CaseResult], hw_name: str) -> None:
    doc = {"hardware": hw_name, "summary": folder_summary(results), "cases": to_records(results)}
    if path.suffix == ".json":
        write_atomic(path, json.dumps(doc, indent=2) + "\n")
    else:
        import yaml

        write_atomic(path, yaml.safe_dump(doc, sort_keys=False, width=120))


def report_command(
    folders: list[Path] = typer.Argument(..., help="Folders of model files (or files). WARNING: runs their code."),
    output: Path = typer.Option(..., "-o", "--output", help="Report folder: report.md, report.csv, report.yaml, "
                                                            "roofline.png."),
    hw: str = typer.Option(..., "--hw", help="Chip: a name, a spec path, or 'local' to probe this CPU."),
    measure: bool = typer.Option(True, "--measure/--no-measure", help="Time each model here (needs the chip to "
                                                                      "be this machine); --no-measure: bounds only."),
    repeats: Repeats = 5,
    warm: Warm = False,
    cache_aware: bool = typer.Option(True, "--cache-aware/--no-cache-aware", help="Compute the cache-aware "
                                                                                  "fidelity."),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Draw roofline.png (needs matplotlib)."),
    jobs: Workers = 1,
    html: bool = typer.Option(False, "--html", help="Also write report.html: one self-contained page, a sortable "
                                                    "and filterable table and an interactive roofline."),
) -> None:
    """Headroom report over folders of models: per model MACs, bytes, SOL at each fidelity, measured time,
    headroom and bottleneck (markdown and CSV; --html a page to explore); geometric-mean headroom per folder;
    a roofline plot."""
    options = CaseOptions(repeats=repeats, warm=warm, cache_aware=cache_aware, measure=measure)
    results, hw_name, wall = _run(_files(folders), hw, options, jobs)
    output.mkdir(parents=True, exist_ok=True)
    notes = [_summary(results), _phase_line(results, wall)]
    write_atomic(output / "report.md", to_markdown(results, "solar-io headroom report", hw_name, notes))
    write_atomic(output / "report.csv", to_csv(results))
    _write_records(output / "report.yaml", results, hw_name)
    drawn = False
    if plot:
        pts, roofs = corpus_points(results)
        if pts:
            roofline_plot(output / "roofline.png", pts, roofs, _bandwidth(results),
                          f"{len(results)} models on {hw_name}")
            drawn = True
    if html:
        write_atomic(output / "report.html", _html_page(results, hw_name, notes))
    for r in results:
        if r.status in ("failed", "skipped"):
            typer.echo(f"{r.status.upper()} {r.file}: {r.reason}", err=True)
    typer.echo(f"wrote {output}/report.md, report.csv, report.yaml{', roofline.png' if drawn else ''}"
               f"{', report.html' if html else ''}")
    for n in notes:
        typer.echo(n)


def _html_page(results: list[CaseResult], hw_name: str, notes: list[str]) -> str:
    """report.html: the table rows of :func:`row`, one roofline point per model and fidelity (and measured)."""
    from ..reports import html
    from ..reports.tables import row

    pts, roofs = corpus_points(results)
    fid_bottleneck = {(r.name, f): b for r in results for f, b in r.bottleneck.items()}
    points = [html.Point(p.label, f"{p.label} ({p.kind}): {format_time(p.seconds)}", p.flops, p.bytes, p.seconds,
                         fid_bottleneck.get((p.label, p.kind)) or "none") for p in pts]
    return html.corpus_report_html([row(r) for r in results], hw_name, notes, points, roofs, _bandwidth(results))


def _bandwidth(results: list[CaseResult]) -> float:
    return max((r.dram_bandwidth for r in results if r.dram_bandwidth), default=1.0)


def corpus_points(results: list[CaseResult]) -> tuple[list[Point], list[tuple[str, float]]]:
    """One point per model and fidelity (bytes of that fidelity), and its measured point."""
    pts: list[Point] = []
    roofs: set[tuple[str, float]] = set()
    for r in results:
        if not r.sol:
            continue
        roofs |= set(map(tuple, r.roofs))
        for f, t in r.sol.items():
            if r.fidelity_bytes.get(f):
                pts.append(Point(r.name, f, r.flops, r.fidelity_bytes[f], t))
        if r.measured:
            ref = r.fidelity_bytes.get("cache-aware") or r.fidelity_bytes.get("fused")
            if ref:
                pts.append(Point(r.name, "measured", r.flops, ref, r.measured["median"]))
    return pts, sorted(roofs)
