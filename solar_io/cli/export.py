"""``solar-io export timeloop|accelforge`` and ``solar-io import accelforge``.

Exporters read only the graph file; every output is written atomically into ``-o DIR``.
Skipped nodes (opaque, gathers, ...) are listed on stderr; ``--strict`` makes them an error.
Errors a user can cause print one line and exit 1 (the root ``--debug`` shows tracebacks).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import typer

from ..errors import GraphError, SolarIOError
from ..exporters.common import ExportResult, write_exports
from ..format.files import check_text
from ..format.yamltext import YamlError, read_text, write_atomic
from ..graph import Graph

export_app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                         help="Export a graph to Timeloop or AccelForge input files.")
import_app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                         help="Import a workload written for another tool as an einsum graph.")


def _fail(msg: str) -> None:
    """A user error: ``solar_io.cli.main`` prints it as one line and exits 1."""
    raise SolarIOError(msg)


def _read_graph(path: Path) -> tuple[Graph, str]:
    """(graph, file text) of a valid graph file; one-line error otherwise."""
    try:
        text = read_text(path)
    except (YamlError, OSError) as e:
        _fail(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}")
    g, issues = check_text(text, str(path))
    if g is None:
        raise GraphError(issues, str(path))
    return g, text


def _report(result: ExportResult, target: str, out: Path) -> None:
    for line in result.warnings(target):
        typer.echo(line, err=True)
    for p in write_exports(result, out):
        typer.echo(str(p))


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
    out: Path = typer.Option(..., "-o", "--out", help="Output folder (created if needed)."),
    arch: str | None = typer.Option(None, "--arch", help="Also write a two-level architecture "
                                    "(DRAM + one buffer of this chip's on-chip capacity)."),
    strict: bool = typer.Option(False, "--strict", help="Fail instead of skipping nodes AccelForge cannot express."),
    evaluate: bool = typer.Option(False, "--evaluate", help="Map the workload on the --arch architecture "
                                  "with AccelForge (needs accelforge importable, Python >= 3.12)."),
) -> None:
    """Write GRAPH as an AccelForge workload: OUT/STEM.workload.yaml (and STEM.arch.yaml)."""
    from ..exporters.accelforge import export_accelforge
    from ..exporters.common import graph_sha256

    def go() -> None:
        if evaluate and arch is None:
            _fail("--evaluate needs --arch CHIP (the architecture to map on)")
        g, text = _read_graph(graph)
        result = export_accelforge(g, graph.stem, graph_sha256(g, text), strict, arch)
        _report(result, "AccelForge", out)
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
    out: Path = typer.Option(..., "-o", "--out", help="Output folder (created if needed)."),
    strict: bool = typer.Option(False, "--strict", help="Fail instead of skipping nodes Timeloop cannot express."),
) -> None:
    """Write GRAPH as Timeloop v0.4 problems (one per node) and a LoopTree einsum list."""
    from ..exporters.common import graph_sha256
    from ..exporters.timeloop import export_timeloop

    def go() -> None:
        g, text = _read_graph(graph)
        _report(export_timeloop(g, graph.stem, graph_sha256(g, text), strict), "Timeloop", out)

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
        try:
            text = read_text(workload)
        except (YamlError, OSError) as e:
            _fail(f"{workload}: cannot read: {getattr(e, 'strerror', None) or e}")
        g, notes = import_accelforge(text, str(workload))
        for n in notes:
            typer.echo(f"warning: {n}", err=True)
        write_atomic(out, dumps(g))
        typer.echo(str(out))

    _run(go)
