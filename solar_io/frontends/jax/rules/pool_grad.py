"""``select_and_scatter_add``: the backward of a max (or min) pooling window, as one kernel.

For every window ``o`` (stride ``s``, window ``w``, low padding ``lo`` per dim) of ``operand``,
the element the window selects (the first maximum in row-major window order for ``select_prim``
``ge``, as XLA iterates; the first minimum for ``le``) receives ``source[o]``; contributions of
overlapping windows add. Nodes that share one ``kernel``:

1. ``patches[O.., K..] = operand[s*O + K - lo]`` (the padding border holds the selection's
   identity, ``-inf`` for ``ge``), viewed as ``[O.., K]`` with ``K`` the flattened window;
2. ``pick[O..] = argmax_K patches`` (argmin for ``le``; the executor keeps the first on ties);
3. per windowed dim ``d``, ``pos_d[O..] = table_d[O_d, @pick]`` where the generated table holds
   ``s*o - lo + (k's offset along d)`` (a function of its indices: no bytes);
4. ``out[@pos_d..] += source[O..]`` from zeros (a format-1.1 scatter einsum), then copied out whole
   (the kernel writes every element, the zeros between the selected ones too).

The kernel reads ``operand`` and ``source`` once and writes ``out`` once; no MACs.

>>> import numpy as np
>>> np.unravel_index(np.arange(6), (2, 3))[1].tolist()  # a 2 x 3 window's offsets along its last dim
[0, 1, 2, 0, 1, 2]
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ....affine import Access, Indirect
from ...common.builder import access, expr, family
from ..lower import Lowerer, Operand
from ..registry import NoLowering, rule
from .helpers import reshape

_SELECT = {"ge": ("argmax", float("-inf")), "gt": ("argmax", float("-inf")),
           "le": ("argmin", float("inf")), "lt": ("argmin", float("inf"))}


@rule("select_and_scatter_add")
def select_and_scatter_add(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    source, operand = ins[0], ins[1]
    if not (isinstance(source, str) and isinstance(operand, str)):
        raise NoLowering("scalar operand")
    p = eqn.params
    sel = str(getattr(p["select_prim"], "name", p["select_prim"]))
    if sel not in ("ge", "le"):
        raise NoLowering(f"select_prim {sel}")
    red, ident = _SELECT[sel]
    win, strides, pads = p["window_dimensions"], p["window_strides"], p["padding"]
    start = len(ctx.b.nodes)
    xr, xs, dt = ctx.ranks(operand), ctx.shape(operand), ctx.dtype(operand)
    ss = ctx.shape(source)
    windowed = [d for d in range(len(xs)) if win[d] != 1 or strides[d] != 1 or pads[d] != (0, 0)]
    if not windowed:
        raise NoLowering("no window")
    ctx.b.bind(source, [xr[d] if d not in windowed else family(xr[d]) + "*" for d in range(len(xs))])
    sr = ctx.ranks(source)
    taken = set(sr) | set(xr)
    krs = []
    for d in windowed:
        krs.append(ctx.b.rank("R", int(win[d]), taken))
        taken.add(krs[-1])
    idx: list[Any] = []
    border: dict[str, tuple[int, int]] = {}
    for d in range(len(xs)):
        if d not in windowed:
            idx.append(expr(sr[d]))
            continue
        k = krs[windowed.index(d)]
        lo = int(pads[d][0])
        idx.append(expr(f"{strides[d]}*{sr[d]} + {k} - {lo}" if lo >= 0 else f"{strides[d]}*{sr[d]} + {k} + {-lo}"))
        over = max(0, strides[d] * (ss[d] - 1) + win[d] - 1 - lo - (xs[d] - 1))
        if lo > 0 or over:
            border[xr[d]] = (max(lo, 0), over)
    patches = ctx.tensor(list(sr) + krs, dt, "patches")
    ctx.b.copy(patches, ctx.op, list(sr) + krs, [Access(operand, tuple(idx))], access(patches, list(sr) + krs),
               pad={operand: border} if border else None, fill=ident if border else None, location=ctx.location)
    flat = reshape(ctx, patches, list(ss) + [int(np.prod([win[d] for d in windowed]))], suffix="window")
    fr = ctx.ranks(flat)
    pick = ctx.tensor(fr[:-1], "int32", "pick")
    ctx.b.einsum(pick, ctx.op, list(fr), [access(flat, fr)], access(pick, fr[:-1]), "identity", red,
                 location=ctx.location)
    offsets = np.unravel_index(np.arange(int(np.prod([win[d] for d in windowed]))), [win[d] for d in windowed])
    out_idx: list[Any] = []
    positions = []
    for d in range(len(xs)):
        if d not in windowed:
            out_idx.append(expr(fr[d]))
            continue
        table = (strides[d] * np.arange(ss[d]) - int(pads[d][0]))[:, None] + offsets[windowed.index(d)][None, :]
        # a function of its indices, computed where it is used: generated (no bytes)
        t = ctx.b.tensor(f"{ctx.name}.offsets{d}", [fr[d], fr[-1]], "int32", "constant", generated=True)
        ctx.const_data[t] = table.astype(np.int32)
        pos = ctx.tensor(fr[:-1], "int32", f"pos{d}")
        ctx.b.copy(pos, ctx.op, list(fr[:-1]), [Access(t, (expr(fr[d]), Indirect(pick))), access(pick, fr[:-1])],
                   access(pos, fr[:-1]), location=ctx.location)
        positions.append(pos)
        out_idx.append(Indirect(pos))
    zeros = ctx.b.tensor(f"{ctx.name}.zeros", xr, ctx.out_dtype(), "constant", 0.0)
    summed = ctx.tensor(xr, ctx.out_dtype(), "scattered")
    ctx.b.einsum(summed, ctx.op, list(fr[:-1]), [access(source, fr[:-1])] + [access(q, fr[:-1]) for q in positions]
                 + [Access(zeros, tuple(out_idx))], Access(summed, tuple(out_idx)), "identity", "add", init=zeros,
                 attrs={"window": [int(v) for v in win], "stride": [int(v) for v in strides]}, location=ctx.location)
    # the result is written whole (the zeros between the selected elements too), not only where it scatters
    out = ctx.tensor(xr, ctx.out_dtype())
    ctx.b.copy(out, ctx.op, list(xr), [access(summed, xr)], access(out, xr), location=ctx.location)
    ctx.b.nodes[start:] = [replace(n, kernel=ctx.name) for n in ctx.b.nodes[start:]]
    return [out]
