"""Builtins called from ``model`` for what does not fit a kernel's affine loop nests.

Each works on ``Value``s: with numpy while executing, by recording a node while tracing.
Dimensions are named: a builtin's result names its dims (the ``dims`` / ``as_dim``
arguments), and sizes of new dims come from keywords or are inferred.

| builtin | result | graph node |
| --- | --- | --- |
| ``reshape(x, "B,S,H,E", H=16)`` | row-major reshape | data_movement reshape (view) |
| ``transpose(x, "B,H,S,E")`` | dims permuted (materialised) | data_movement copy |
| ``slice(x, "S", start, stop, step=1, as_dim=None)`` | a strided range of one dim | data_movement copy, view |
| ``select(x, "S", index)`` | one index of a dim, dim dropped | data_movement copy, view |
| ``concat([a, b], "C", as_dim=None)`` | joined along dim C | data_movement concat |
| ``stack([a, b], "L", axis=0)`` | a new dim L | reshape views + concat |
| ``gather(table, ids, "V")`` | rows of ``table`` picked by integer ``ids`` | data_movement copy with ``@ids`` |
| ``scatter_add(init, ids, src, "V")`` | ``init`` plus ``src`` at the rows ``ids`` pick | einsum into ``y[@ids, ..]`` |
| ``scan(x, "S", op="add")`` | inclusive prefix sum/product/max/min along S | einsum identity/op with ``scan: S`` |
| ``apply_mask(w, mask, density=None)`` | ``w * mask``, declared sparse | einsum mul with ``density`` |
| ``cast(x, dtype)`` | converted element type | einsum identity |
| ``opaque(fn, [x], "B,K", reason=...)`` | ``fn`` on numpy arrays (sort, top-k) | opaque node: bytes, compute unknown |

``slice`` and ``select`` are views, like numpy's basic indexing: no bytes move (the reader
of the result reads the selected elements in place); ``transpose`` materialises.

They live by job: :mod:`.movement` (reshape ... stack), :mod:`.indexing` (gather, scatter_add),
:mod:`.compute` (scan, apply_mask, cast, opaque); :mod:`.record` holds what they share.
"""

from __future__ import annotations

from .compute import apply_mask, cast, opaque, scan
from .indexing import gather, scatter_add
from .movement import concat, reshape, select, slice, stack, transpose

__all__ = ["apply_mask", "cast", "concat", "gather", "opaque", "reshape", "scan", "scatter_add", "select", "slice",
           "stack", "transpose"]
