"""Operands of an einsum node (the executor's step 1): each input access as an array over the
distinct space ranks it uses, in space order, without touching the iteration space.

An affine access is a zero-copy ``as_strided`` view (a transpose, a diagonal ``x[I, I]``, overlapping
windows ``2*P + R - 1``); indexes that reach into the declared implicit border are served by first
padding the array with the node's ``fill``, only as far as they reach. An access with ``@t`` gathers
by fancy indexing, ``t``'s own operand supplying the index values, checked against the tensor's
extent plus padding. :mod:`solar_io.executor` describes the whole algorithm.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .affine import Access, AffineExpr, Indirect
from .errors import ExecutionError
from .graph import Graph, Node

Operand = tuple[np.ndarray, tuple[str, ...]]  # an array and the space ranks of its axes


class _OperandBuilder:
    """Turns input accesses of one node into operands (arrays over distinct space ranks)."""

    def __init__(self, graph: Graph, node: Node, env: dict[str, np.ndarray], sizes: dict[str, int]):
        self.graph, self.node, self.env, self.sizes = graph, node, env, sizes
        self.first: dict[str, Access] = {}
        for a in reversed(node.inputs):
            self.first[a.tensor] = a
        self.memo: dict[Access, Operand] = {}
        self.active: set[str] = set()

    def __call__(self, access: Access) -> Operand:
        if access not in self.memo:
            if access.tensor in self.active:
                raise ExecutionError(f"node {self.node.name}: index tensor {access.tensor} indexes itself")
            self.active.add(access.tensor)
            index = access.index or ()
            fancy = any(isinstance(e, Indirect) for e in index)
            self.memo[access] = self._gather(access) if fancy else self._strided(access)
            self.active.discard(access.tensor)
        return self.memo[access]

    def _padded(self, access: Access, reach: list[tuple[int, int]]) -> tuple[np.ndarray, list[int]]:
        """The tensor padded with the fill as far as indexes reach ([lo, hi] per dim); the low pads."""
        arr = self.env[access.tensor]
        widths = [(max(0, -lo), max(0, hi - (n - 1))) for (lo, hi), n in zip(reach, arr.shape, strict=True)]
        if any(w != (0, 0) for w in widths):
            fill = 0.0 if self.node.fill is None else self.node.fill
            if arr.dtype.kind in "iub" and not np.isfinite(fill):
                raise ExecutionError(f"node {self.node.name}: cannot pad {arr.dtype} tensor {access.tensor} "
                                     f"with fill {fill}")
            arr = np.pad(arr, widths, constant_values=np.array(fill).astype(arr.dtype))
        return arr, [lo for lo, _ in widths]

    def _strided(self, access: Access) -> Operand:
        index = [e for e in access.index or () if isinstance(e, AffineExpr)]
        arr, low = self._padded(access, [e.bounds(self.sizes) for e in index])
        ranks = tuple(r for r in self.node.space if any(r in e.ranks for e in index))
        if arr.ndim == 0:
            return arr, ()
        base = arr[tuple(slice(e.const + lo, None) for e, lo in zip(index, low, strict=True))]
        strides = [sum(c * base.strides[d] for d, e in enumerate(index) for rr, c in e.terms if rr == r)
                   for r in ranks]
        return as_strided(base, [self.sizes[r] for r in ranks], strides, writeable=False), ranks

    def _gather(self, access: Access) -> Operand:
        index = access.index or ()
        parts: list[tuple[np.ndarray, tuple[str, ...]]] = []
        for e in index:
            if isinstance(e, Indirect):
                a, r = self(self.first[e.tensor])
                parts.append((a.astype(np.int64, copy=False), r))
            else:
                parts.append(self._affine_values(e))
        ranks = tuple(r for r in self.node.space if any(r in rk for _, rk in parts))
        idx = [v[tuple(slice(None) if r in rk else None for r in ranks)] for v, rk in parts]
        reach = [(int(v.min()), int(v.max())) for v in idx]
        tensor = self.graph.tensor_map[access.tensor]
        pad = self.node.pad_of(access.tensor)
        for d, e in enumerate(index):
            lo, hi = pad.get(tensor.ranks[d], (0, 0))
            extent = self.env[access.tensor].shape[d]
            if isinstance(e, Indirect) and (reach[d][0] < -lo or reach[d][1] > extent - 1 + hi):
                raise ExecutionError(f"node {self.node.name}: index tensor {e.tensor} holds values in "
                                     f"[{reach[d][0]}, {reach[d][1]}], outside [{-lo}, {extent - 1 + hi}] of "
                                     f"{access.tensor} dim {tensor.ranks[d]}")
        arr, low = self._padded(access, reach)
        return arr[tuple(v + lo for v, lo in zip(idx, low, strict=True))], ranks

    def _affine_values(self, e: AffineExpr) -> tuple[np.ndarray, tuple[str, ...]]:
        """The values of ``e`` as an int64 array over its ranks (space order)."""
        ranks = tuple(r for r in self.node.space if r in e.ranks)
        vals = np.full([1] * len(ranks), e.const, dtype=np.int64)
        for r, c in e.terms:
            shape = [self.sizes[r] if rr == r else 1 for rr in ranks]
            vals = vals + c * np.arange(self.sizes[r], dtype=np.int64).reshape(shape)
        return vals, ranks
