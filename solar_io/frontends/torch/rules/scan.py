"""Scans: cumsum, cumprod, cummax/cummin (values), logcumsumexp, as einsums with ``scan`` (format 1.1).

A scan node applies its reduce op as an inclusive prefix along one rank and is counted as a
sequential scan: n - 1 combines per row, the fewest any scan algorithm does, so the bound
stays a lower bound (a Hillis-Steele ladder of einsums would count n·log2(n)).

``cummax``/``cummin`` lower only when their indices are unused: the indices need a compare
and a select per element besides the running maximum, and the einsums that express them
(an equality map, a select, a second max-scan) count one operation per element more than a
kernel that updates value and index together, so such a capture stays opaque instead.
"""

from __future__ import annotations

import operator

from ...common.builder import access
from ..ctx import Args, LowerCtx, T
from ..registry import NoLowering, rule

_REDUCE = {"aten.cumsum": "add", "aten.cumprod": "mul", "aten.cummax": "max", "aten.cummin": "min"}


def scan(ctx: LowerCtx, x: T, dim: int, reduce: str, dtype: str, suffix: str | None = None) -> T:
    """The inclusive ``reduce``-prefix of ``x`` along ``dim`` (one einsum node with ``scan``)."""
    xr = ctx.ranks(x)
    if not xr:  # a 0-d tensor: the prefix of one element is the element
        return ctx.cast(x, dtype, suffix=suffix)
    rank = xr[dim % len(xr)]
    out = ctx.tensor(xr, dtype, suffix)
    ctx.b.einsum(out.name, ctx.op, xr, [access(x.name, xr)], access(out.name, xr), "identity", reduce,
                 location=ctx.location, scan=rank)
    return out


@rule("aten.cumsum", "aten.cumprod")
def cumsum(ctx: LowerCtx, a: Args) -> T:
    return scan(ctx, a.self, a.dim, _REDUCE[ctx.op], ctx.out_dtype())


def _indices_used(ctx: LowerCtx) -> bool:
    """True when something reads the second result of the current (tuple-valued) node."""
    return any(u.target is not operator.getitem or (u.args[1] != 0 and u.users) for u in ctx.node.users)


@rule("aten.cummax", "aten.cummin")
def cummax(ctx: LowerCtx, a: Args) -> tuple[T, T | None]:
    if _indices_used(ctx):
        raise NoLowering(f"{ctx.op} indices: an einsum form would count more work than a kernel needs")
    return scan(ctx, a.self, a.dim, _REDUCE[ctx.op], ctx.out_dtype(0), suffix="values"), None


@rule("aten.logcumsumexp")
def logcumsumexp(ctx: LowerCtx, a: Args) -> T:
    """log(cumsum(exp(x - m))) + m with m the maximum along the dim, as logsumexp is lowered."""
    x, dt = a.self, ctx.out_dtype()
    if not ctx.ranks(x):
        return ctx.cast(x, dt)
    dim = a.dim % len(ctx.ranks(x))
    m = ctx.reduce(x, [dim], True, "max", suffix="max")
    e = ctx.ew("exp", ctx.ew("sub", x, m, suffix="shifted"), suffix="exp")
    c = scan(ctx, e, dim, "add", ctx.dtype(e), suffix="cumsum")
    return ctx.ew("add", ctx.ew("log", c, suffix="log"), m, dtype=dt)
