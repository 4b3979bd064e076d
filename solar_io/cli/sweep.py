"""``solar-io sweep``: parameter sweeps of a model file, or hardware what-ifs on a graph file.

Mounted by ``solar_io.cli`` as ``app.command("sweep")(sweep_command)``. What SOURCE is decides
the mode (:data:`MODES`, by file suffix): a model file (``.py``) is re-captured at every point of
the ``--set`` grid (:mod:`.sweep`); a graph file (``.yaml``) is bounded at every point of the
``--vary`` hardware grid without re-capture (:mod:`.whatif`). Both write ``sweep.csv``,
``sweep.yaml`` and plots into the output folder and list the regime shifts on stdout.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import typer

from ..dse.sweep import (
    SweepError,
    SweepResult,
    parse_assignments,
    regime_shifts,
    run_sweep,
    table_csv,
    table_document,
    write_tables,
)
from .options import KvCache, PageSize, StrictDequant, StrictFp32

MAX_SHIFT_LINES = 40


@dataclass(frozen=True)
class SweepOptions:
    """The command line's options, as the modes read them."""

    sets: list[str]
    varies: list[str]
    chips: list[str]
    cache_aware: bool
    validate: bool
    frontend: str | None
    jobs: int | None
    executor: str
    address: str | None
    timeout: float | None
    strict_fp32: bool = False
    strict_dequant: bool = False
    step: dict | None = None  # --phase and its fixed options: a serving-step sweep


def _model_sweep(source: Path, o: SweepOptions) -> SweepResult:
    if o.varies:
        raise SweepError(f"{source}: --vary scales the hardware of a graph file; for a model file use --set "
                         "(or capture it first and sweep the graph)")
    if not o.sets:
        raise SweepError(f"{source}: give at least one --set NAME=VALUES (e.g. --set batch=1,2,...,64)")
    params = parse_assignments(o.sets)
    jobs = o.jobs if o.jobs is not None else (1 if o.executor == "local" else None)
    return run_sweep(source, params, o.chips, cache_aware=o.cache_aware, validate=o.validate, frontend=o.frontend,
                     jobs=jobs, executor=o.executor, address=o.address, timeout_s=o.timeout,
                     strict_fp32=o.strict_fp32, strict_dequant=o.strict_dequant, step=o.step)


def _graph_whatif(source: Path, o: SweepOptions) -> SweepResult:
    from ..dse.layouts import is_layout_sweep, run_layout_sweep
    from ..dse.whatif import run_whatif

    if is_layout_sweep(o.varies):  # --vary tp=1,2,4 --vary pp=1,2: parallel layouts of the graph
        if o.sets or o.cache_aware:
            raise SweepError(f"{source}: a layout sweep (--vary tp/pp/dp/ep/microbatches) takes neither --set nor "
                             "--cache-aware")
        jobs = o.jobs if o.jobs is not None else (1 if o.executor == "local" else None)
        return run_layout_sweep(source, o.chips, o.varies, jobs=jobs, executor=o.executor, address=o.address,
                                timeout_s=o.timeout, strict_fp32=o.strict_fp32, strict_dequant=o.strict_dequant)

    if o.step:
        raise SweepError(f"{source}: --phase captures a model file at every point; a graph file is already one step")
    if o.sets:
        raise SweepError(f"{source}: --set re-captures a model file; a graph's hardware is varied with --vary "
                         "(e.g. --vary dram_bw=0.5x..4x:8)")
    if o.cache_aware:
        raise SweepError(f"{source}: what-ifs evaluate the unfused and fused bounds; the cache-aware one needs a "
                         "tiling ILP per hardware point (use solar-io bound --cache-aware on a chosen point)")
    return run_whatif(source, o.chips, o.varies, strict_fp32=o.strict_fp32, strict_dequant=o.strict_dequant)


#: Source suffix -> the sweep it gets.
MODES: dict[str, tuple[str, Callable[[Path, SweepOptions], SweepResult]]] = {
    ".py": ("model", _model_sweep),
    ".yaml": ("what-if", _graph_whatif),
    ".yml": ("what-if", _graph_whatif),
}


def write_report(kind: str, result: SweepResult, outdir: Path, plot: bool) -> None:
    """Write the tables (and plots) of ``result`` into ``outdir``; print the summary and the regime
    shifts on stdout, opaque-node warnings and failed points on stderr."""
    shifts = regime_shifts(result.rows, list(result.params))
    doc = table_document(kind, result.source, result.params, result.chips, result.columns, result.rows,
                         result.failures, shifts)
    written = write_tables(outdir, doc, table_csv(result.columns, result.rows))
    if plot and result.rows:
        from ..dse.plot_sweep import plot_sweep

        try:
            written += plot_sweep(result.rows, list(result.params), result.chips, shifts, outdir)
        except ImportError:
            typer.echo("note: plots skipped: matplotlib is not installed (pip install 'solar-io[plot]')", err=True)
    points = len({tuple(r[p] for p in result.params) for r in result.rows})
    typer.echo(f"{kind} sweep of {result.source}: {points} point(s) x {len(result.chips)} chip(s), "
               f"{len(result.rows)} rows, {len(result.failures)} failed point(s)")
    typer.echo("wrote " + ", ".join(str(p) for p in written))
    from ..dse.layouts import best_layouts

    for line in best_layouts(result):
        typer.echo(line)
    typer.echo(f"regime shifts (memory <-> compute): {len(shifts)}")
    for s in shifts[:MAX_SHIFT_LINES]:
        typer.echo(f"  {s}")
    if len(shifts) > MAX_SHIFT_LINES:
        typer.echo(f"  ... {len(shifts) - MAX_SHIFT_LINES} more in {outdir / 'sweep.yaml'}")
    opaque = {tuple(r[p] for p in result.params) for r in result.rows if r["opaque"]}
    if opaque:
        typer.echo(f"{result.source}: warning: {len(opaque)} point(s) have opaque nodes whose compute is unknown "
                   "(counted as zero time: those bounds are looser; column 'opaque')", err=True)
    if result.step:
        from ..dse.decode import roofline_table

        table = roofline_table(result.rows, list(result.params))
        if table:
            typer.echo(table)
    for point, error in result.failures:
        where = ", ".join(f"{k}={v}" for k, v in point.items())
        typer.echo(f"{result.source} [{where}]: failed: {error}", err=True)


def sweep_command(
    source: Path = typer.Argument(..., metavar="SOURCE", help="A model file (.py: re-captured at every --set "
                                  "point; this RUNS its code) or a graph file (.yaml: hardware what-ifs, --vary)."),
    hw: str = typer.Option(..., "--hw", help="Chips, comma-separated names, aliases or spec paths "
                                             "(b200,h100-pcie,a6000,thor)."),
    sets: list[str] = typer.Option([], "--set", help="Model parameter NAME=VALUES, repeatable: a list (1,2,4) or a "
                                   "progression a,b,...,z; geometric when the leading terms have one ratio "
                                   "(1,2,4,...,64; 512,1024,...,8192), else arithmetic (8,16,24,...,64). NAME is a "
                                   "keyword parameter of get_inputs/get_init_inputs or a key of the file's "
                                   "SWEEPABLE = {...} dict."),
    varies: list[str] = typer.Option([], "--vary", help="Graph what-if NAME=VALUES, repeatable; NAME: dram_bw, peak "
                                     "(all compute peaks), matrix_peak, vector_peak, special_peak; VALUES: "
                                     "multipliers A..B[:N] (N log-spaced points, default 8), or a list 0.5x,1x,2x "
                                     "or progression 0.5x,1x,...,8x. Or parallel layouts of the graph: tp, pp, dp, "
                                     "ep, microbatches with whole numbers (--vary tp=1,2,4,8 --vary pp=1,2,4): the "
                                     "best layout per fidelity is printed."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Folder for sweep.csv, sweep.yaml and the plots "
                                       "(default: sweep-<source stem>)."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", min=1, help="Workers: local processes (default 1, "
                                    "in-process) or Ray tasks in flight (default: one per cluster CPU)."),
    executor: str = typer.Option("local", "--executor", help="local (process pool) or ray."),
    address: str | None = typer.Option(None, "--address", help="Ray cluster address (HOST:6379); default: a "
                                       "local Ray instance."),
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds one point may take; a point past it is "
                                         "retried once, then reported."),
    cache_aware: bool = typer.Option(False, "--cache-aware", help="Also the cache-aware fidelity (tiling ILPs; "
                                     "model sweeps only)."),
    validate: bool = typer.Option(False, "--validate/--no-validate", help="Check every captured point against the "
                                  "source program numerically (default: no; check the model once with capture)."),
    frontend: str | None = typer.Option(None, "--frontend", help="Force a frontend for the model file."),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Write sol_vs_<parameter>.png plots (matplotlib)."),
    strict_fp32: StrictFp32 = False,
    strict_dequant: StrictDequant = False,
    phase: str | None = typer.Option(None, "--phase", help="Capture a serving step (prefill or decode over a KV "
                                     "cache, as solar-io capture --phase) at every point; --set batch, seq, kv_len "
                                     "and page_size are then the step's, and the decode roofline (bytes per token: "
                                     "weights and cache) is printed."),
    cache: KvCache = "dynamic",
    seq: int | None = typer.Option(None, "--seq", help="--phase: new tokens per sequence unless --set seq=..."),
    page_size: PageSize = 16,
    dtype: str | None = typer.Option(None, "--dtype", help="Cast the model and floating inputs at every point: bf16, "
                                     "fp16, fp32."),
) -> None:
    """Sweep a model's parameters across chips (re-capturing it at every grid point), or a graph's hardware
    (what-ifs, no re-capture). Writes a tidy table (CSV and YAML) and plots of SOL against each parameter per
    chip and fidelity, and lists where the bound changes from memory- to compute-bound."""
    mode = MODES.get(source.suffix.lower())
    if mode is None:
        raise SweepError(f"{source}: expected a model file (.py) or a graph file (.yaml)")
    if not source.is_file():
        raise SweepError(f"{source}: no such file")
    chips = [h.strip() for h in hw.split(",") if h.strip()]
    if not chips:
        raise SweepError("--hw: give a chip name, alias or spec path")
    step = None
    if phase is not None:
        step = {"phase": phase, "cache": cache, "page_size": page_size, **({"seq": seq} if seq is not None else {})}
    elif cache != "dynamic" or seq is not None or page_size != 16:
        raise SweepError("--cache, --seq and --page-size describe a serving step: give --phase prefill or decode")
    if dtype is not None:
        step = {**(step or {}), "dtype": dtype}
    options = SweepOptions(list(sets), list(varies), chips, cache_aware, validate, frontend, jobs, executor, address,
                           timeout, strict_fp32, strict_dequant, step)
    kind, run = mode
    result = run(source, options)
    write_report(kind, result, output or Path(f"sweep-{source.stem}"), plot)
    sys.stdout.flush()
    if result.failures:
        raise typer.Exit(1)
