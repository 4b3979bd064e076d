"""``solar-io export timeloop|accelforge`` and ``solar-io import accelforge``.

Exporters read only the graph file; every output is written atomically into ``-o DIR``.
Each prints one summary line on stdout (files written, nodes skipped; ``--verbose`` lists every file).
Skipped nodes (opaque, gathers, ...) are listed on stderr (counted by reason when there are many) and
in the files; ``--strict`` makes them an error.
Errors a user can cause print one line and exit 1 (the root ``--debug`` shows tracebacks).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import typer

from ..errors import GraphError, SolarIOError
from ..exporters.common import ExportResult, write_exports
from ..format.files import check_text, warn
from ..format.yamltext import YamlError, read_text, write_atomic
from ..graph import Graph
from ..progress import step
from .options import OutFolder, Verbose

export_app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                         help="Export a graph to Timeloop or AccelForge input files.")
import_app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                         help="Import a workload written for another tool as an einsum graph.")


def _fail(msg: str) -> None:
    """A user error: ``solar_io.cli.main`` prints it as one line and exits 1."""
    raise SolarIOError(msg)


def _read(path: Path) -> str:
    """The text of ``path`` (at most SOLAR_IO_MAX_BYTES); one-line error otherwise."""
    try:
        return read_text(path)
    except (YamlError, OSError) as e:
        _fail(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}")


def _read_graph(path: Path) -> tuple[Graph, str]:
    """(graph, file text) of a valid graph file; one-line error otherwise."""
    text = _read(path)
    g, issues = check_text(text, str(path))
    if g is None:
        raise GraphError(issues, str(path))
    warn(issues, str(path))
    return g, text


#: Skipped nodes listed one by one up to this many; past it, counted by reason.
LISTED_SKIPS = 8


def skip_summary(result: ExportResult, target: str) -> list[str]:
    """The warning lines (stderr) for the nodes ``result`` skipped: each node when there are few, else
    the count per reason with a few node names each."""
    skipped = result.skipped
    if len(skipped) <= LISTED_SKIPS:
        return result.warnings(target)
    by_reason: dict[str, list[str]] = {}
    for s in skipped:
        by_reason.setdefault(s.reason, []).append(s.node)
    ranked = sorted(by_reason.items(), key=lambda kv: -len(kv[1]))
    parts = [f"{len(ns)} x {reason} (e.g. {', '.join(ns[:2])})" for reason, ns in ranked[:4]]
    if len(ranked) > 4:
        parts.append(f"{sum(len(ns) for _, ns in ranked[4:])} more with {len(ranked) - 4} other reason(s)")
    return [f"warning: {len(skipped)} node(s) not exported to {target}: " + "; ".join(parts)]


def _report(result: ExportResult, target: str, out: Path, verbose: bool = False) -> None:
    """One summary line on stdout (files written, nodes skipped); every path with ``verbose``."""
    for line in skip_summary(result, target):
        typer.echo(line, err=True)
    if out.exists() and not out.is_dir():
        _fail(f"{out}: exists and is not a folder (-o names the folder the {target} files are written into)")
    try:
        with step(f"writing {len(result.files)} {target} file(s) to {out}"):
            paths = write_exports(result, out)
    except OSError as e:
        _fail(f"{e.filename or out}: cannot write: {e.strerror or e}")
    if verbose:
        for p in paths:
            typer.echo(str(p))
        return
    skipped = f"{len(result.skipped)} node(s) skipped (listed on stderr and in the files)" if result.skipped \
        else "no node skipped"
    shown = ", ".join(p.name for p in paths[:2]) + (", ..." if len(paths) > 2 else "")
    typer.echo(f"{out}: {len(paths)} {target} file(s) written ({shown}); {skipped}")


def _run(fn: Callable[[], None]) -> None:
    """Run ``fn``, turning a ValueError (bad hardware spec, ...) into a user error."""
    try:
        fn()
    except SolarIOError:
        raise
    except ValueError as e:
        if "--debug" in sys.argv:
            raise
        _fail(str(e))


@export_app.command("accelforge")
def export_accelforge_cmd(
    graph: Path = typer.Argument(..., help="The einsum-graph file."),
    out: OutFolder = ...,
    arch: str | None = typer.Option(None, "--arch", help="Also write a two-level architecture "
                                    "(DRAM + one buffer of this chip's on-chip capacity)."),
    strict: bool = typer.Option(False, "--strict", help="Fail instead of skipping nodes AccelForge cannot express."),
    evaluate: bool = typer.Option(False, "--evaluate", help="Map the workload on the --arch architecture "
                                  "with AccelForge (needs accelforge importable, Python >= 3.12)."),
    verbose: Verbose = False,
) -> None:
    """Write GRAPH as an AccelForge workload: OUT/STEM.workload.yaml (and STEM.arch.yaml)."""
    from ..exporters.accelforge import export_accelforge
    from ..exporters.common import graph_sha256

    def go() -> None:
        if evaluate and arch is None:
            _fail("--evaluate needs --arch CHIP (the architecture to map on)")
        g, text = _read_graph(graph)
        result = export_accelforge(g, graph.stem, graph_sha256(g, text), strict, arch)
        _report(result, "AccelForge", out, verbose)
        if evaluate:
            _evaluate(out / result.files[0].name, out / result.files[1].name)

    _run(go)


def _evaluate(workload: Path, arch: Path) -> None:
    import importlib.util
    import json

    from ..exporters import accelforge_eval

    if importlib.util.find_spec("accelforge") is None:
        _fail(accelforge_eval.INSTALL_HINT)
    counts = accelforge_eval.evaluate(workload, arch)
    typer.echo(json.dumps(counts, sort_keys=True, indent=2))


@export_app.command("timeloop")
def export_timeloop_cmd(
    graph: Path = typer.Argument(..., help="The einsum-graph file."),
    out: OutFolder = ...,
    strict: bool = typer.Option(False, "--strict", help="Fail instead of skipping nodes Timeloop cannot express."),
    verbose: Verbose = False,
) -> None:
    """Write GRAPH as Timeloop v0.4 problems (one per node) and a LoopTree einsum list."""
    from ..exporters.common import graph_sha256
    from ..exporters.timeloop import export_timeloop

    def go() -> None:
        g, text = _read_graph(graph)
        _report(export_timeloop(g, graph.stem, graph_sha256(g, text), strict), "Timeloop", out, verbose)

    _run(go)


@import_app.command("accelforge")
def import_accelforge_cmd(
    workload: Path = typer.Argument(..., help="An AccelForge workload YAML (no Jinja templating)."),
    out: Path = typer.Option(..., "-o", "--out", help="The einsum-graph file to write."),
) -> None:
    """Read an AccelForge workload as an einsum graph, so solar-io can bound it."""
    from ..exporters.accelforge_import import import_accelforge
    from ..format.files import dumps

    def go() -> None:
        g, notes = import_accelforge(_read(workload), str(workload))
        for n in notes:
            typer.echo(f"warning: {n}", err=True)
        write_atomic(out, dumps(g))
        typer.echo(str(out))

    _run(go)
