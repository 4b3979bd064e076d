"""Helpers shared by the rules: elementwise einsums, reductions, row-major reshapes, affine text.

``ew`` emits an elementwise einsum whose size-1 operand dims broadcast (scalars become
immediates, a ``broadcast_in_dim`` result is read through to its source); ``reduce`` a
reduction over axes; ``reshape`` a row-major view that keeps the ranks of matching leading
and trailing dims; ``lin`` an affine index from integer terms.
"""

from __future__ import annotations

from collections.abc import Sequence

from ....affine import AffineExpr
from ...common.builder import access
from ..lower import Lowerer, Operand
from ..registry import NoLowering


def _bound(ctx: Lowerer, x: str) -> bool:
    return ctx.b.tensors[x].ranks is not None


def ew(ctx: Lowerer, map: str, ins: Sequence[Operand], dtype: str | None = None) -> str:
    """An elementwise einsum; size-1 dims of an operand broadcast, scalars are immediates."""
    shape = ctx.out_shape()
    tensors = [x for x in ins if isinstance(x, str)]
    if not tensors:
        raise NoLowering("no tensor operand")
    for x in tensors:
        xs = ctx.shape(x)
        if xs == () and shape != ():
            continue
        if len(xs) != len(shape) or any(a != b and a != 1 for a, b in zip(xs, shape, strict=True)):
            raise NoLowering(f"operand shape {xs} does not broadcast to the output's {shape}")
    full = [x for x in tensors if ctx.shape(x) == shape]
    lead = next((x for x in full if _bound(ctx, x)), full[0] if full else None)
    if lead is not None:
        for x in full:
            ctx.b.bind(x, list(ctx.ranks(lead)))
    picked: list[str] = []
    for j, s in enumerate(shape):
        r = None
        for x in sorted(tensors, key=lambda t: (t in ctx.bcast, not _bound(ctx, t))):
            if len(ctx.shape(x)) == len(shape) and ctx.shape(x)[j] == s:
                r = ctx.ranks(x)[j]
                break
        picked.append(r if r is not None else ctx.b.rank("A", s))
    out_ranks = ctx.b.distinct(picked)
    dtype = dtype or ctx.out_dtype()
    dts = [ctx.dtype(t) for t in tensors]
    inputs = []
    for x in ins:
        if isinstance(x, str):
            xs = ctx.shape(x)
            if x in ctx.bcast:  # read the broadcast's source directly: no materialised copy
                src, dims = ctx.bcast[x]
                inputs.append(access(src, [out_ranks[d] if d >= 0 and xs[d] == shape[d] else 0 for d in dims]))
            elif xs == () and shape != ():
                inputs.append(access(x, []))
            else:
                inputs.append(access(x, [out_ranks[j] if xs[j] == shape[j] else 0 for j in range(len(xs))]))
        else:
            inputs.append(access(ctx.scalar(float(x), dts[-1]), []))
    out = ctx.tensor(out_ranks, dtype)
    ctx.b.einsum(out, ctx.op, out_ranks, inputs, access(out, out_ranks), map, "none", location=ctx.location)
    return out


def reduce(ctx: Lowerer, x: str, axes: Sequence[int], red: str, map: str = "identity",
           dtype: str | None = None) -> str:
    xr = ctx.ranks(x)
    axes = {a % len(xr) for a in axes}
    out_ranks = [r for i, r in enumerate(xr) if i not in axes]
    out = ctx.tensor(out_ranks, dtype or ctx.out_dtype())
    ctx.b.einsum(out, ctx.op, xr, [access(x, xr)], access(out, out_ranks), map, red, location=ctx.location)
    return out


def as_tensor(ctx: Lowerer, x: Operand, dtype: str) -> str:
    return x if isinstance(x, str) else ctx.scalar(float(x), dtype)


def reshape_ranks(ctx: Lowerer, xr: Sequence[str], xs: Sequence[int], shape: Sequence[int]) -> tuple[str, ...]:
    """Ranks of a row-major reshape: the matching leading and trailing dims keep their ranks."""
    n, m = len(xs), len(shape)
    hints: list[str] = ["A*"] * m
    i = 0
    while i < min(n, m) and xs[i] == shape[i]:
        hints[i] = xr[i]
        i += 1
    j = 0
    while j < min(n, m) - i and xs[n - 1 - j] == shape[m - 1 - j]:
        hints[m - 1 - j] = xr[n - 1 - j]
        j += 1
    hints = [h if h != "A*" or s != 1 else "U*" for h, s in zip(hints, shape, strict=True)]
    return ctx.b.new_ranks(hints, shape)


def reshape(ctx: Lowerer, x: str, shape: Sequence[int], suffix: str | None = None) -> str:
    shape = tuple(int(s) for s in shape)
    if ctx.shape(x) == shape:
        return x
    out = ctx.tensor(reshape_ranks(ctx, ctx.ranks(x), ctx.shape(x), shape), ctx.dtype(x), suffix)
    ctx.b.reshape(out, ctx.op, x, out, view=True, location=ctx.location)
    return out


def lin(const: int, *terms: tuple[int, str]) -> AffineExpr:
    """The affine index ``sum(c * rank) + const`` (terms with coefficient 0 dropped)."""
    acc: dict[str, int] = {}
    for c, r in terms:
        acc[r] = acc.get(r, 0) + int(c)
    return AffineExpr(tuple(sorted((r, c) for r, c in acc.items() if c)), int(const))
