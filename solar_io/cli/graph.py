"""``solar-io graph GRAPH -o g.svg|g.dot|g.graphml|g.mmd [--hw CHIP]``: a picture of the graph.

Mounted by ``solar_io.cli.main`` as ``app.command("graph")(graph_command)``. The format follows
the output's suffix; SVG needs Graphviz's ``dot`` (``apt-get install graphviz``), the others do not.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ..errors import SolarIOError
from ..progress import step
from .output import write_text


def graph_command(
    graph: Path = typer.Argument(..., metavar="GRAPH", help="An einsum-graph file."),
    output: Path = typer.Option(..., "-o", "--output", help="The picture: .svg (Graphviz dot), .dot, .graphml or "
                                                             ".mmd (Mermaid text); - writes DOT to stdout."),
    hw: str | None = typer.Option(None, "--hw", help="Colour nodes by what bounds them on this chip and draw its "
                                                     "cache-aware groups as clusters."),
    expand: bool = typer.Option(False, "--expand", help="Draw every repeated block (default: the first, and one "
                                                        "box for the other copies)."),
) -> None:
    """Draw the graph: nodes coloured by bottleneck on --hw (matrix, vector, special, memory), tensor sizes on
    edges, cache-aware groups (or each source op's nodes) as clusters, repeated blocks collapsed. SVG through
    Graphviz's dot when installed (Debian: apt-get install graphviz), DOT, GraphML or Mermaid otherwise."""
    from .. import bound, load
    from ..graphs.picture import FORMATS, INSTALL_DOT, build, has_dot, render

    fmt = "dot" if str(output) == "-" else output.suffix.lstrip(".").lower()
    if fmt == "mermaid":
        fmt = "mmd"
    if fmt not in FORMATS:
        raise SolarIOError(f"{output}: unknown picture format {output.suffix!r}; use .svg, .dot, .graphml or .mmd")
    if fmt == "svg" and not has_dot():
        raise SolarIOError(f"{output}: {INSTALL_DOT}")
    g = load(graph)
    report = None
    if hw is not None:
        with step(f"bounding {graph.name} on {hw}"):
            report = bound(g, hw, cache_aware=True)
    with step(f"drawing {graph.name}"):
        pic = build(g, report, expand=expand)
        text = render(pic, fmt)
    if str(output) == "-":
        sys.stdout.write(text)
        return
    write_text(output, text)
    collapsed = "collapsed" in pic.vertices
    typer.echo(f"{output}: {len(pic.vertices)} boxes, {len(pic.edges)} edges, {len(pic.clusters)} clusters"
               + (" (repeated blocks collapsed; --expand draws them)" if collapsed else "")
               + (f", coloured by bottleneck on {report.hardware}" if report is not None else ""))


__all__ = ["graph_command"]
