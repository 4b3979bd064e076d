"""Pictures of an einsum graph: Graphviz DOT (and SVG through ``dot``), GraphML, Mermaid.

Vertices are nodes, coloured by what bounds them on a chip when a bound report is given (matrix,
vector, special, memory); edges carry the tensors they pass and their sizes. Clusters are the
cache-aware groups of the report (nodes one kernel runs with finite on-chip memory), else the
nodes one source op lowered to. A repeated block (the layers of a decoder) is drawn once and the
other copies collapse to one box that says how many there are (``expand=True`` draws them all).

>>> from solar_io import load
>>> p = build(load("examples/graphs/mlp.yaml"))  # doctest: +SKIP
>>> to_mermaid(p).splitlines()[0]  # doctest: +SKIP
'flowchart TD'

SVG needs Graphviz's ``dot`` (Debian: ``apt-get install graphviz``; macOS: ``brew install graphviz``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from ..errors import SolarIOError
from ..graph import Graph
from .blocks import kernel_of, repeated_blocks
from .dag import dag

COLOURS = {"matrix": "#9ecbff", "vector": "#a7e8b5", "special": "#d2b9ff", "memory": "#ffaba8", "none": "#e1e4e8"}
FORMATS = ("svg", "dot", "graphml", "mmd")


def _size(b: float) -> str:
    for scale, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


def _time(s: float) -> str:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


@dataclass
class Vertex:
    id: str
    label: str
    bottleneck: str = "none"
    cluster: str | None = None
    sol: float | None = None


@dataclass
class Picture:
    """What is drawn: vertices, edges ``(u, v) -> (tensors, bytes)`` and clusters ``id -> label``."""

    name: str
    vertices: dict[str, Vertex] = field(default_factory=dict)
    edges: dict[tuple[str, str], tuple[tuple[str, ...], float]] = field(default_factory=dict)
    clusters: dict[str, str] = field(default_factory=dict)
    parents: dict[str, str] = field(default_factory=dict)  # cluster -> enclosing cluster
    hardware: str | None = None


def _report_nodes(report: Any) -> tuple[dict[str, Mapping[str, Any]], list[list[str]], str | None]:
    """(node name -> node dict, cache-aware groups, chip name) of a Report or its report mapping."""
    if report is None:
        return {}, [], None
    if not isinstance(report, Mapping):
        from ..backends.roofline.report import report_dict

        report = report_dict(report)
    groups = [list(gr["nodes"]) for gr in (report.get("cache_aware") or {}).get("groups", []) if len(gr["nodes"]) > 1]
    return {n["name"]: n for n in report["nodes"]}, groups, report["hardware"]["name"]


def build(g: Graph, report: Any = None, expand: bool = False) -> Picture:
    """The picture of ``g``; ``report`` (a Report or its mapping, every node) colours and groups it."""
    nodes, groups, chip = _report_nodes(report)
    d = dag(g)
    pic = Picture(g.name or "graph", hardware=chip)
    where: dict[str, str] = {n.name: n.name for n in g.nodes}  # node -> the vertex it is drawn in
    blocks = None if expand else repeated_blocks(g)
    block_cluster = None
    if blocks is not None and blocks.repeats >= 2:
        block_cluster = "block1"
        pic.clusters[block_cluster] = f"block 1 of {blocks.repeats} ({blocks.nodes_per_block} nodes)"
        rest = [n for i in range(1, blocks.repeats) for n in blocks.block(i)]
        sol = sum((nodes.get(n) or {}).get("sol_s") or 0.0 for n in rest)
        label = f"blocks 2-{blocks.repeats}: {blocks.repeats - 1} more x block 1 ({len(rest)} nodes)"
        if nodes:
            label += f"\nunfused SOL {_time(sol)}"
        pic.vertices["collapsed"] = Vertex("collapsed", label, "none", None, sol if nodes else None)
        for n in rest:
            where[n] = "collapsed"
    in_block = set(blocks.block(0)) if block_cluster and blocks else set()
    group_of = {n: f"group{i}" for i, gr in enumerate(groups) for n in gr}
    for n in g.nodes:
        if where[n.name] != n.name:
            continue
        info = nodes.get(n.name) or {}
        b = info.get("bottleneck") or "none"
        label = f"{n.name}\n{n.op}"
        if info.get("sol_s") is not None:
            label += f"\n{_time(info['sol_s'])}, {b}"
        cluster = group_of.get(n.name)
        if cluster is None and "." in n.name:
            cluster = "k:" + kernel_of(n.name)
        if cluster is not None and cluster not in pic.clusters:
            pic.clusters[cluster] = (f"cache-aware group {cluster[5:]}" if cluster.startswith("group")
                                     else f"{n.op} ({kernel_of(n.name)})")
            if n.name in in_block:
                pic.parents[cluster] = block_cluster  # type: ignore[assignment]
        if cluster is None and n.name in in_block:
            cluster = block_cluster
        pic.vertices[n.name] = Vertex(n.name, label, b, cluster, info.get("sol_s"))
    for u, v, data in d.edges(data=True):
        a, b = where[u], where[v]
        if a == b:
            continue
        tensors, size = pic.edges.get((a, b), ((), 0.0))
        pic.edges[(a, b)] = ((*tensors, *data["tensors"]), size + data["bytes"])
    return pic


def _q(s: str) -> str:
    """A DOT string: quotes and backslashes escaped, newlines as DOT's centred line breaks."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _edge_label(tensors: tuple[str, ...], size: float) -> str:
    shown = tensors[0] if len(tensors) == 1 else f"{tensors[0]} +{len(tensors) - 1}"
    return f"{shown}\n{_size(size)}"


def _tree(pic: Picture) -> tuple[dict[str | None, list[str]], dict[str | None, list[Vertex]]]:
    """{cluster or None (the top): its child clusters} and {cluster or None: its vertices}."""
    children: dict[str | None, list[str]] = {}
    for c in pic.clusters:
        children.setdefault(pic.parents.get(c), []).append(c)
    members: dict[str | None, list[Vertex]] = {}
    for v in pic.vertices.values():
        members.setdefault(v.cluster, []).append(v)
    return children, members


def to_dot(pic: Picture) -> str:
    """Graphviz DOT text (``dot -Tsvg`` draws it)."""
    lines = [f"digraph {_q(pic.name)} {{", "  rankdir=TB; compound=true;",
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=8, color="#57606a"];']
    if pic.hardware:
        lines.append(f"  label={_q(f'{pic.name} on {pic.hardware}: colour = what bounds each node')}; labelloc=t;")
    children, members = _tree(pic)

    def vertex(v: Vertex, indent: str) -> str:
        shape = ", shape=box3d" if v.id == "collapsed" else ""
        return f"{indent}{_q(v.id)} [label={_q(v.label)}, fillcolor={_q(COLOURS.get(v.bottleneck, '#e1e4e8'))}{shape}];"

    def emit(cluster: str | None, indent: str) -> None:
        for c in children.get(cluster, []):
            safe = re.sub(r"\W", "_", c)
            style = "dashed" if c.startswith("group") else ("bold" if c == "block1" else "rounded")
            lines.append(f"{indent}subgraph cluster_{safe} {{ label={_q(pic.clusters[c])}; style={style};"
                         ' fontsize=9; color="#8c959f";')
            emit(c, indent + "  ")
            lines.append(f"{indent}}}")
        for v in members.get(cluster, []):
            lines.append(vertex(v, indent))

    emit(None, "  ")
    for (a, b), (tensors, size) in pic.edges.items():
        lines.append(f"  {_q(a)} -> {_q(b)} [label={_q(_edge_label(tensors, size))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_mermaid(pic: Picture) -> str:
    """Mermaid flowchart text (renders on GitHub, GitLab and in many editors; no Graphviz needed)."""
    ids = {v: f"n{i}" for i, v in enumerate(pic.vertices)}

    def text(s: str) -> str:
        return s.replace("\n", "<br/>").replace('"', "'")

    lines = ["flowchart TD"]
    for k, col in COLOURS.items():
        lines.append(f"  classDef {k} fill:{col},stroke:#57606a")
    children, members = _tree(pic)

    def emit(cluster: str | None, indent: str) -> None:
        for c in children.get(cluster, []):
            lines.append(f'{indent}subgraph c{len(lines)}["{text(pic.clusters[c])}"]')
            emit(c, indent + "  ")
            lines.append(f"{indent}end")
        for v in members.get(cluster, []):
            lines.append(f'{indent}{ids[v.id]}["{text(v.label)}"]:::{v.bottleneck}')

    emit(None, "  ")
    for (a, b), (tensors, size) in pic.edges.items():
        lines.append(f'  {ids[a]} -->|"{text(_edge_label(tensors, size))}"| {ids[b]}')
    return "\n".join(lines) + "\n"


def to_graphml(pic: Picture) -> str:
    """GraphML (yEd, Gephi, networkx): vertex label, bottleneck, cluster, SOL; edge tensors and bytes."""
    d = nx.DiGraph(name=pic.name)
    for v in pic.vertices.values():
        d.add_node(v.id, label=v.label.replace("\n", " | "), bottleneck=v.bottleneck, cluster=v.cluster or "",
                   sol_s=float(v.sol) if v.sol is not None else -1.0)
    for (a, b), (tensors, size) in pic.edges.items():
        d.add_edge(a, b, tensors=" ".join(tensors), bytes=float(size))
    return "\n".join(nx.generate_graphml(d)) + "\n"


def has_dot() -> bool:
    return shutil.which("dot") is not None


INSTALL_DOT = ("Graphviz's 'dot' is not installed (Debian/Ubuntu: apt-get install graphviz; macOS: brew install "
               "graphviz); write .dot, .graphml or .mmd instead")


def to_svg(pic: Picture, timeout: float = 120.0) -> str:
    """SVG drawn by Graphviz ``dot`` (SolarIOError saying how to install it when it is missing)."""
    exe = shutil.which("dot")
    if exe is None:
        raise SolarIOError(INSTALL_DOT)
    r = subprocess.run([exe, "-Tsvg"], input=to_dot(pic), capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        raise SolarIOError(f"dot failed: {r.stderr.strip()[:300]}")
    svg = r.stdout
    return svg[svg.index("<svg"):] if "<svg" in svg else svg


def render(pic: Picture, fmt: str) -> str:
    """The picture in ``fmt``: svg, dot, graphml or mmd."""
    if fmt == "svg":
        return to_svg(pic)
    if fmt == "dot":
        return to_dot(pic)
    if fmt == "graphml":
        return to_graphml(pic)
    if fmt == "mmd":
        return to_mermaid(pic)
    raise SolarIOError(f"unknown picture format {fmt!r}; use one of {', '.join(FORMATS)}")


def inline_picture(g: Graph, report: Any = None) -> str:
    """For the HTML report: SVG when ``dot`` is installed, else Mermaid text."""
    pic = build(g, report)
    return to_svg(pic) if has_dot() else to_mermaid(pic)


__all__ = ["COLOURS", "FORMATS", "INSTALL_DOT", "Picture", "Vertex", "build", "has_dot", "inline_picture", "render",
           "to_dot", "to_graphml", "to_mermaid", "to_svg"]
