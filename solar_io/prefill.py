"""Outputs the caller hands in already filled (format 1.8, ``prefilled: v`` on an output tensor).

A caller may hand a program the memory of its outputs ready-made, every element already ``v``:
destination-passing style, as SOL-ExecBench's harness does (it zero-fills each output outside the
timed region before every call). An element the program leaves at ``v`` then needs no write, so
the least a run must write of such an output is the elements that differ from ``v``. Which those
are is read from the graph, never from values:

- the output (or a whole reshape/permute view chain down to it) is made from a scatter chain (each
  scatter's ``init`` the previous one's result) that starts from an immediate constant ``c``
  (``torch.zeros`` then ``index_add_``, ``scatter_``, ``index_put_``), through any number of
  elementwise nodes (casts, scalings) whose every other operand is an immediate, or for ``mul`` any
  operand when the value is 0;
- and those elementwise maps take ``c`` to ``v``.

The elements the program must write are then at most the largest write of its scatters (each counted
as the metrics count a scatter: the positions its index names, taken as distinct, their values taken
as differing from ``v``, which the file does not hold; the largest is a lower bound on their union: a
loop writing one row per step into the zeros is charged one row, as the file does not say where each
row goes). Masked writes into a fill the output is handed in holding
(``q = zeros_like(x); q[m] = 1``) are charged none of the fill (:func:`solar_io.node_lists.prefilled_fills`).
Every other output keeps its full write: the analysis only ever lowers a count, so the bound stays a
lower bound for a caller that hands fresh memory too.

>>> from solar_io.affine import parse_access
>>> from solar_io.graph import Graph, Node, Tensor
>>> g = Graph((("V", 100), ("S", 4), ("D", 8)),
...     (Tensor("zeros", ("V", "D"), "fp32", "constant", value=0.0), Tensor("g", ("S", "D"), "fp32", "input"),
...      Tensor("ids", ("S",), "int64", "input"), Tensor("acc", ("V", "D"), "fp32", "intermediate"),
...      Tensor("out", ("V", "D"), "bf16", "output", prefilled=0.0)),
...     (Node("add", "einsum", "aten.index_add", (parse_access("zeros[@ids, D]"), parse_access("g[S, D]"),
...           parse_access("ids[S]")), (parse_access("acc[@ids, D]"),), space=("S", "D"), map="identity",
...           reduce="add", init="zeros"),
...      Node("cast", "einsum", "aten.to", (parse_access("acc[V, D]"),), (parse_access("out[V, D]"),),
...           space=("V", "D"), map="identity", reduce="none")))
>>> prefilled_writes(g)  # 4 rows of 8 of the 100 x 8 output
{'out': 32.0}
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from math import prod

import numpy as np

from .affine import Access, AffineExpr
from .graph import Graph, Node
from .ops import MAP_OPS

#: the assumption kind a frontend writes beside ``prefilled`` outputs, saying why the caller prefills them
PREFILLED_ASSUMPTION = "prefilled_outputs"


def prefilled_writes(g: Graph) -> dict[str, float]:
    """Tensor -> the elements of it a run must write, for each ``prefilled`` output whose unwritten
    elements provably keep the prefilled value (module docstring), and for the tensors it is a whole
    view of (what its node writes): fewer than all of it. Other tensors are absent."""
    wanted: dict[str, float] = {t.name: t.prefilled for t in g.tensors
                                if t.role == "output" and t.prefilled is not None}
    if not wanted:
        return {}
    from .metrics import scattered_elements  # metrics imports this module

    writer = {a.tensor: n for n in g.nodes for a in n.outputs}
    out: dict[str, float] = {}
    for name, v in wanted.items():
        names = list(_whole_views(g, writer, name))
        cur, maps = names[-1], []
        while (n := writer.get(cur)) is not None and n.init is None and len(maps) <= len(g.nodes):
            data = _elementwise_operand(g, n, writer)
            if data is None:
                break
            maps.append((n, data))
            cur = data
        written, steps = 0.0, 0
        while (n := writer.get(cur)) is not None and n.kind == "einsum" and n.init is not None \
                and steps <= len(g.nodes):
            written, cur, steps = max(written, scattered_elements(g, n)), n.init, steps + 1
        fill = g.tensor_map[cur].value if steps else None
        numel = float(prod(g.shape(name)))
        if fill is None or written >= numel or not _reaches(g, maps, fill, v):
            continue
        out.update(dict.fromkeys(names, written))
    return out


def _whole_views(g: Graph, writer: dict[str, Node], name: str) -> Iterator[str]:
    """``name``, then the tensors it is a whole single-input view of, back to the one a non-view node writes."""
    numel, steps = prod(g.shape(name)), 0
    yield name
    while (n := writer.get(name)) is not None and n.kind == "data_movement" and n.view and len(n.inputs) == 1 \
            and prod(g.shape(n.inputs[0].tensor)) == numel and steps <= len(g.nodes):
        name, steps = n.inputs[0].tensor, steps + 1
        yield name


def _elementwise_operand(g: Graph, n: Node, writer: dict[str, Node]) -> str | None:
    """The one computed operand an elementwise einsum ``n`` maps element for element onto its output (the
    output's own ranks, no reduction, no index), or None when ``n`` is not such a node."""
    if n.kind != "einsum" or n.reduce != "none" or len(n.outputs) != 1 or n.map not in MAP_OPS:
        return None
    tmap = g.tensor_map
    out = n.outputs[0]
    if tuple(n.space) != tmap[out.tensor].ranks or not _plain(out, tmap[out.tensor].ranks):
        return None
    same = {a.tensor for a in n.inputs if tmap[a.tensor].ranks == tmap[out.tensor].ranks and _plain(a, n.space)
            and a.tensor in writer}
    return same.pop() if len(same) == 1 and sum(a.tensor in same for a in n.inputs) == 1 else None


def _plain(a: Access, ranks: tuple[str, ...]) -> bool:
    """An access reading or writing each element by its own rank, in the tensor's rank order."""
    if a.index is None:
        return True
    names = [e.terms[0][0] if type(e) is AffineExpr and e.const == 0 and len(e.terms) == 1 and e.terms[0][1] == 1
             else None for e in a.index]
    return tuple(names) == tuple(ranks)


def _reaches(g: Graph, maps: list[tuple[Node, str]], fill: float, want: float) -> bool:
    """Whether the elementwise ``maps`` (output first, as walked back; each with its data operand) take an
    element equal to ``fill`` to ``want``: every other operand an immediate, or, for ``mul`` of a 0, anything
    (0 times a finite value)."""
    tmap, x = g.tensor_map, fill
    for n, data in reversed(maps):
        consts = []
        for a in n.inputs:
            t = tmap[a.tensor]
            if t.value is not None:
                consts.append(t.value)
            elif a.tensor == data:
                consts.append(x)
            elif n.map == "mul" and x == 0.0:
                consts.append(1.0)  # any finite factor of 0 is 0
            else:
                return False
        with np.errstate(all="ignore"):
            x = float(np.asarray(MAP_OPS[n.map].fn(*(np.float64(c) for c in consts))))
    return x == want or (math.isnan(x) and math.isnan(want))
