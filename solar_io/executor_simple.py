"""The reference executor's short path for the commonest nodes: elementwise maps over plain slices.

Most nodes of an unrolled recurrence (and of elementwise chains) are an einsum with ``reduce: none``
or a ``copy``, whose every index is a rank, a rank plus a constant, or a constant, inside the
tensor's bounds: a slice of each input broadcast over the space, the map applied, the result laid
out in the output's rank order. :func:`simple_einsum` computes exactly what the general path of
:mod:`solar_io.executor` computes for such a node (the same slices, casts and map call, in the same
order), without building strided operands; for any other node it returns None and the general path
runs. ``tests/core/test_executor.py`` and the repeat tests compare both paths.

>>> import numpy as np
>>> from solar_io.affine import parse_access
>>> from solar_io.graph import Graph, Node, Tensor
>>> g = Graph((("B", 2), ("H", 3), ("G", 6)), (Tensor("x", ("B", "G"), "fp32", "input"),
...           Tensor("y", ("B", "H"), "fp32", "output")), (Node("s", "data_movement", "slice",
...           (parse_access("x[B, H + 3]"),), (parse_access("y[B, H]"),), ("B", "H"), movement="copy"),))
>>> simple_einsum(g, g.nodes[0], {"x": np.arange(12, dtype=np.float32).reshape(2, 6)})
array([[ 3.,  4.,  5.],
       [ 9., 10., 11.]], dtype=float32)
"""

from __future__ import annotations

from math import prod

import numpy as np

from .affine import AffineExpr
from .dtypes import numpy_dtype
from .graph import Graph, Node
from .ops import MAP_OPS

#: Nodes over more points than this take the general path (which works block by block).
MAX_POINTS = 1 << 22


def simple_einsum(graph: Graph, node: Node, env: dict[str, np.ndarray]) -> np.ndarray | None:
    """The output array of ``node`` when it is a plain elementwise map or copy (module docstring), else None."""
    if node.init is not None or node.scan is not None or node.pad or node.reduce not in (None, "none"):
        return None
    op = MAP_OPS[node.map or "identity"]
    if op.result == "bool":
        return None
    space, sizes = node.space, graph.rank_sizes
    if prod(sizes[r] for r in space) > MAX_POINTS:
        return None
    out = node.outputs[0]
    out_ranks = []
    for e in out.index or ():
        if type(e) is not AffineExpr or not e.is_rank():
            return None
        out_ranks.append(e.terms[0][0])
    if len(out_ranks) != len(space) or set(out_ranks) != set(space):
        return None
    out_dt = np.dtype(numpy_dtype(graph.tensor_map[out.tensor].dtype))
    args = []
    for a in node.inputs:
        arg = _operand(env[a.tensor], a.index, space, sizes)
        if arg is None:
            return None
        args.append(arg.astype(out_dt, copy=False))
    res = np.broadcast_to(op.fn(*args), [sizes[r] for r in space])
    res = res.transpose([space.index(r) for r in out_ranks])
    return np.asarray(res.astype(out_dt, copy=False), order="C")


def _operand(arr: np.ndarray, index: tuple | None, space: tuple[str, ...], sizes: dict[str, int]) -> np.ndarray | None:
    """``arr`` read through ``index`` as an array over the space (size-1 axes where a rank is not
    used), or None when an index is not a rank (+ constant) or constant inside the bounds."""
    if index is None or len(index) != arr.ndim:
        return None
    cut: list = []
    ranks: list[str] = []
    for d, e in enumerate(index):
        if type(e) is not AffineExpr:
            return None
        if not e.terms:
            if not 0 <= e.const < arr.shape[d]:
                return None
            cut.append(e.const)
            continue
        if len(e.terms) != 1 or e.terms[0][1] != 1 or e.terms[0][0] in ranks:
            return None
        r = e.terms[0][0]
        lo, hi = e.const, e.const + sizes[r]
        if lo < 0 or hi > arr.shape[d]:
            return None
        cut.append(slice(lo, hi))
        ranks.append(r)
    view = arr[tuple(cut)] if cut else arr
    where = [space.index(r) for r in ranks]
    if where != sorted(where):
        order = sorted(range(len(ranks)), key=lambda i: where[i])
        view, ranks = view.transpose(order), [ranks[i] for i in order]
    used = set(ranks)
    return view[tuple(slice(None) if r in used else None for r in space)]
