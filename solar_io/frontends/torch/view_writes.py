"""In-place copies into views of a tensor the program made: ``out[:, t] = h`` in a Python loop
(``out[b].zero_()`` and ``fill_`` too: a copy of one value).

Export's training IR keeps such a write as ``copy_(select(out, 1, t), h)``: an in-place op on a view,
which no rule lowers, so the whole program used to be decomposed (functionalised) first; for a
recurrence unrolled over thousands of steps that took minutes (SOL-ExecBench L1/094, 2,131 steps).
:func:`view_copies` finds the copies that can be lowered where they stand, and :func:`lower_view_copy`
lowers one as a scatter into the tensor's current value, which then stands for the tensor in every
later node (``env[root]``), as functionalisation would have made it.

A copy qualifies when its destination is a chain of ``select`` / ``slice`` views of a tensor the
program allocated (a node whose storage no earlier node has: not an input, a weight or a view of
another tensor), the copy's own result is unused, and no other view of that storage taken before the
copy is read after it (that view would have to see the write). The scatter starts from the tensor
(``init``) and is charged for the elements it writes, as the in-place copy is:

    >>> # out = zeros(B, T, H); for t in range(T): out[:, t] = f(t)
    >>> # -> T scatters, each writing B*H elements of out at [:, t, :]; not T copies of all of out
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

import torch

from .ctx import LowerCtx, T
from .rules.scatter import scatter_positions
from .rules.shape import expand_to

_aten = torch.ops.aten
COPY = _aten.copy_.default
#: In-place writes of one value into a view (``out[b].zero_()``): lowered as copies of that value.
FILLS = {_aten.zero_.default: lambda node: 0, _aten.fill_.Scalar: lambda node: node.args[1]}
#: The views a destination may be made of, and their (dim, start, end, step) arguments.
_SELECT, _SLICE = _aten.select.int, _aten.slice.Tensor

Plan = tuple[Any, list]  # the root node and the chain of view nodes from it to the destination


def _storage(node: Any) -> int | None:
    v = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if not isinstance(v, torch.Tensor):
        return None
    try:
        return v.untyped_storage()._cdata
    except Exception:  # a tensor subclass without storage
        return None


def view_copies(graph: Any) -> dict[Any, Plan]:
    """Each copy of ``graph`` that :func:`lower_view_copy` lowers, with its root and view chain."""
    nodes = list(graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}
    first: dict[int, Any] = {}
    later: dict[int, tuple[list[int], list[int]]] = {}  # storage -> its later nodes' orders, running max last use
    for i, n in enumerate(nodes):
        s = _storage(n)
        if s is None:
            continue
        if first.setdefault(s, n) is not n:
            orders, reach = later.setdefault(s, ([], []))
            last = max((order[u] for u in n.users), default=-1)
            orders.append(i)
            reach.append(max(last, reach[-1]) if reach else last)
    found: dict[Any, Plan] = {}
    for c in nodes:
        if c.op != "call_function" or (c.target is not COPY and c.target not in FILLS) or c.users \
                or c.kwargs.get("non_blocking"):
            continue
        chain, cur = [], c.args[0]
        while isinstance(cur, torch.fx.Node) and cur.op == "call_function" and cur.target in (_SELECT, _SLICE):
            chain.append(cur)
            cur = cur.args[0]
        s = _storage(cur)
        if not chain or cur.op != "call_function" or s is None or first.get(s) is not cur:
            continue
        if any(_storage(v) != s for v in chain):
            continue
        # stale: a view of the storage taken between the root and the copy and read after the copy
        orders, reach = later.get(s, ([], []))
        k = bisect_left(orders, order[c])
        if not (k and reach[k - 1] > order[c]):
            found[c] = (cur, chain[::-1])
    return found


def _placement(root: Any, chain: list) -> tuple[list[int], list[tuple[int, int, int]]]:
    """The view chain in the root's coordinates: the root dims the view keeps (in order), and per root
    dim its (start, count, stride) (a selected dim: count 1)."""
    dims = [(0, int(n), 1) for n in root.meta["val"].shape]
    live = list(range(len(dims)))  # view dim -> root dim
    for v in chain:
        if v.target is _SELECT:
            rd = live.pop(v.args[1] % len(live))
            start, count, stride = dims[rd]
            dims[rd] = (start + stride * (int(v.args[2]) % count), 1, stride)
        else:
            a = list(v.args) + [None] * (5 - len(v.args))
            rd = live[(a[1] or 0) % len(live)]
            start, count, stride = dims[rd]
            lo, hi, step = slice(a[2], a[3], a[4] or 1).indices(count)
            dims[rd] = (start + stride * lo, len(range(lo, hi, step)), stride * step)
    return live, dims


def copied_value(ctx: LowerCtx, node: Any, env: dict) -> T:
    """What copy ``node`` writes: its source tensor, or the one value of a ``zero_`` / ``fill_``."""
    if node.target in FILLS:
        return ctx.scalar(FILLS[node.target](node), ctx.dtype(env[node.args[0]]))
    return env[node.args[1]]


def lower_view_copy(ctx: LowerCtx, plan: Plan, src: T, base: T) -> T:
    """``base`` (the root's current value) with ``src`` written through the view chain of ``plan``
    (:func:`.rules.scatter.scatter_positions`: every restricted dim through a table of its positions)."""
    root, chain = plan
    live, dims = _placement(root, chain)
    src = expand_to(ctx, src, [dims[rd][1] for rd in live], suffix="expanded")
    full = [count for _, count, _ in dims]  # selected dims as 1
    if list(ctx.shape(src)) != full:
        src = ctx.reshape(src, full, suffix="unsqueezed")
    whole = ctx.shape(base)
    placed = {rd: (start, stride) for rd, (start, count, stride) in enumerate(dims)
              if not (start == 0 and stride == 1 and count == whole[rd])}
    return scatter_positions(ctx, base, src, placed)
