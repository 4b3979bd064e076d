"""Graph rewrites that sharding needs: rank resizes and subgraphs (cut at tensors).

Both return ordinary :class:`solar_io.Graph` values that the single-chip bound prices as they are.

- :func:`resize` multiplies rank sizes by factors (``Fraction(1, 8)`` splits a rank over 8 chips,
  ``4`` gathers the tokens of 4 chips into one); every tensor, node space and access follows, since
  the graph names ranks, not sizes.
- :func:`subgraph` keeps some nodes: a tensor made outside them becomes an ``input``, one of
  theirs read outside them (or a graph output) becomes an ``output``.

>>> from solar_io import Graph, Tensor, Node, parse_access
>>> g = Graph(ranks=(("M", 4), ("K", 8)), tensors=(Tensor("a", ("M", "K"), "bf16", "input"),
...     Tensor("b", ("M",), "bf16", "output")), nodes=(Node("s", "einsum", "sum", (parse_access("a[M, K]"),),
...     (parse_access("b[M]"),), space=("M", "K"), map="identity", reduce="add"),))
>>> resize(g, {"K": Fraction(1, 2)}).rank_sizes
{'M': 4, 'K': 4}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from fractions import Fraction

from solar_io.affine import Indirect
from solar_io.graph import Graph, Node

from .layout import ParallelError


def resize(g: Graph, factors: Mapping[str, Fraction | int], what: str = "--parallel") -> Graph:
    """``g`` with each rank ``r`` of ``factors`` resized to ``size(r) * factors[r]`` (an exact whole
    number >= 1, else :class:`ParallelError` naming the rank)."""
    if not factors:
        return g
    sizes = []
    for r, n in g.ranks:
        f = Fraction(factors.get(r, 1))
        new = n * f
        if new.denominator != 1 or new < 1:
            raise ParallelError(f"{what}: rank {r} of size {n} cannot be resized by {f} (not a whole number)")
        sizes.append((r, int(new)))
    name = g.name
    return replace(g, ranks=tuple(sizes), name=name)


def node_tensors(node: Node) -> list[str]:
    """Every tensor ``node`` reads or writes, index tensors of ``@t`` accesses included."""
    out: list[str] = []
    for a in (*node.inputs, *node.outputs):
        out.append(a.tensor)
        for e in a.index or ():
            if type(e) is Indirect:
                out.append(e.tensor)
    if node.init is not None:
        out.append(node.init)
    return out


def producers(g: Graph) -> dict[str, str]:
    """{tensor: the node that writes it}."""
    return {a.tensor: n.name for n in g.nodes for a in n.outputs}


def consumers(g: Graph) -> dict[str, list[str]]:
    """{tensor: the nodes that read it, in order}."""
    out: dict[str, list[str]] = {}
    for n in g.nodes:
        written = {a.tensor for a in n.outputs}
        for t in dict.fromkeys(node_tensors(n)):
            if t not in written:
                out.setdefault(t, []).append(n.name)
    return out


def subgraph(g: Graph, names: Iterable[str], label: str) -> Graph:
    """The nodes ``names`` of ``g`` (kept in graph order) as a graph of their own called ``label``."""
    keep = set(names)
    nodes = tuple(n for n in g.nodes if n.name in keep)
    if not nodes:
        raise ParallelError(f"{label}: no nodes")
    made = {a.tensor for n in nodes for a in n.outputs}
    used = dict.fromkeys(t for n in nodes for t in node_tensors(n))
    readers = consumers(g)
    tensors = []
    for name in used:
        t = g.tensor_map[name]
        if name in made:
            outside = any(r not in keep for r in readers.get(name, ()))
            role = "output" if outside or t.role == "output" else "intermediate"
        else:
            role = t.role if t.role in ("input", "weight", "constant") else "input"
        tensors.append(replace(t, role=role))
    ranks_used = {r for t in tensors for r in t.ranks} | {r for n in nodes for r in n.space}
    ranks = tuple((r, s) for r, s in g.ranks if r in ranks_used)
    return replace(g, ranks=ranks, tensors=tuple(tensors), nodes=nodes, name=label)


def cut_tensors(g: Graph, inside: set[str]) -> tuple[list[str], list[str]]:
    """(tensors the nodes ``inside`` read from other nodes of ``g``, tensors they write that other
    nodes read), each in graph order: what crosses the cut around ``inside``."""
    made_by = producers(g)
    readers = consumers(g)
    entering, leaving = [], []
    for n in g.nodes:
        if n.name in inside:
            for t in dict.fromkeys(node_tensors(n)):
                p = made_by.get(t)
                if p is not None and p not in inside and t not in entering:
                    entering.append(t)
            for a in n.outputs:
                if any(r not in inside for r in readers.get(a.tensor, ())) and a.tensor not in leaving:
                    leaving.append(a.tensor)
    return entering, leaving


__all__ = ["consumers", "cut_tensors", "node_tensors", "producers", "resize", "subgraph"]
