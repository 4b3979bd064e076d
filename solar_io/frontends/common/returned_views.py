"""Outputs that a program copies out of a broadcast may be returned as the broadcast view.

``mask[None, None].expand(B, H, T, S).contiguous()`` materialises B x H copies of one T x S mask. A
caller comparing values (a test, a benchmark harness) accepts the expanded view in its place, and an
optimised run returns it: SOL-ExecBench's L1/028 baseline returns two such 8.6 GB bool masks in
64 us, far below writing them once. A lower bound must cover that run too, so a graph output written
by a plain copy (``contiguous``, ``clone``: one input, same dtype, element for element) of a tensor
with fewer distinct elements than the copy has (a chain of views through a broadcast) is marked a
view: the bound then charges what it exposes, the source's elements, once (:mod:`solar_io.views`).
The nodes are listed in a ``returned_views`` assumption, so the file says why its bytes are fewer.

>>> from solar_io.affine import parse_access
>>> from solar_io.graph import Graph, Node, Tensor
>>> g = Graph((("B", 4), ("U", 1), ("S", 8)), (Tensor("x", ("U", "S"), "fp32", "input"),
...           Tensor("m", ("U", "S"), "fp32", "intermediate"), Tensor("e", ("B", "S"), "fp32", "intermediate"),
...           Tensor("y", ("B", "S"), "fp32", "output")),
...           (Node("neg", "einsum", "aten.neg", (parse_access("x[U, S]"),), (parse_access("m[U, S]"),),
...                 space=("U", "S"), map="neg", reduce="none"),
...            Node("expand", "data_movement", "aten.expand", (parse_access("m[0, S]"),), (parse_access("e[B, S]"),),
...                 space=("B", "S"), movement="copy", view=True),
...            Node("contiguous", "data_movement", "aten.contiguous", (parse_access("e[B, S]"),),
...                 (parse_access("y[B, S]"),), space=("B", "S"), movement="copy")))
>>> r = with_returned_views(g)
>>> r.nodes[2].view, r.assumptions[0].values
(True, (('nodes', ('contiguous',)),))
"""

from __future__ import annotations

from dataclasses import replace
from math import prod

from ...graph import Assumption, Graph
from ...metrics import plain_access
from ...views import ViewChains

#: the assumption kind naming the copies charged as the views they copy
RETURNED_VIEWS = "returned_views"


def broadcast_copies(g: Graph) -> list[str]:
    """Names of the nodes that copy a broadcast into a graph output (module docstring)."""
    tmap, chains, found = g.tensor_map, None, []
    for n in g.nodes:
        if n.kind != "data_movement" or n.view or n.movement != "copy" or len(n.inputs) != 1 \
                or len(n.outputs) != 1 or n.fill is not None or n.pad:
            continue
        src, out = tmap[n.inputs[0].tensor], tmap[n.outputs[0].tensor]
        numel = float(prod(g.shape(out.name)))
        if out.role != "output" or out.updates is not None or (src.dtype, src.density) != (out.dtype, out.density) \
                or not (plain_access(n.inputs[0]) and plain_access(n.outputs[0])) \
                or float(prod(g.shape(src.name))) != numel:
            continue
        chains = chains or ViewChains(g)
        if chains.root[src.name] != src.name and chains.root_elements(src.name, numel) < numel:
            found.append(n.name)
    return found


def with_returned_views(g: Graph) -> Graph:
    """``g`` with each :func:`broadcast_copies` node marked a view and listed in the assumption."""
    names = broadcast_copies(g)
    if not names:
        return g
    chosen = set(names)
    nodes = tuple(replace(n, view=True) if n.name in chosen else n for n in g.nodes)
    note = Assumption(RETURNED_VIEWS, "outputs",
                      "an output copied from a broadcast is charged as the broadcast view (its source's elements "
                      "once): a caller comparing values accepts the view, and an optimised run returns it",
                      (("nodes", tuple(names)),))
    return replace(g, nodes=nodes, assumptions=g.assumptions + (note,))


__all__ = ["RETURNED_VIEWS", "broadcast_copies", "with_returned_views"]
