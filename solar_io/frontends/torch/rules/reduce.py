"""Reductions, softmax and scans: sum/mean/max/min/argmax/prod/var/std/norm/logsumexp/softmax/cumsum.

Reductions keep the reduced dims as size-1 ranks internally (keepdim) so the elementwise
nodes that follow broadcast against them; softmax is max, subtract, exp, sum, divide.
``cumsum``/``cumprod`` have no rule on purpose: format v1 has no scan primitive, and writing a
scan as einsums (a Hillis-Steele ladder: n·log2(n) combines; or a triangular contraction: n²)
would count more work than a sequential scan needs (n - 1 combines per row), so the bound would
no longer be a lower bound. They become opaque nodes (bytes counted, compute reported unknown).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..ctx import Args, LowerCtx, T
from ..registry import NoLowering, rule


def _dims(ctx: LowerCtx, x: T, dim: int | Sequence[int] | None) -> list[int]:
    nd = len(ctx.shape(x))
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(nd))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return sorted({d % nd for d in dims}) if nd else []


def _count(ctx: LowerCtx, x: T, dims: Sequence[int]) -> int:
    n = 1
    for d in dims:
        n *= ctx.shape(x)[d]
    return n


def mean(ctx: LowerCtx, x: T, dims: Sequence[int], keepdim: bool, dtype: str | None = None,
         suffix: str | None = None) -> T:
    s = ctx.reduce(x, dims, keepdim, "add", dtype=dtype, suffix="sum")
    return ctx.ew("mul", s, 1.0 / max(1, _count(ctx, x, dims)), dtype=dtype, suffix=suffix)


@rule("aten.sum")
def sum_(ctx: LowerCtx, a: Args) -> T:
    return ctx.reduce(a.self, _dims(ctx, a.self, a.dim), bool(a.keepdim), "add", dtype=ctx.out_dtype())


@rule("aten.mean")
def mean_(ctx: LowerCtx, a: Args) -> T:
    return mean(ctx, a.self, _dims(ctx, a.self, a.dim), bool(a.keepdim), dtype=ctx.out_dtype())


@rule("aten.prod")
def prod_(ctx: LowerCtx, a: Args) -> T:
    return ctx.reduce(a.self, _dims(ctx, a.self, a.dim), bool(a.keepdim), "mul", dtype=ctx.out_dtype())


@rule("aten.amax", "aten.amin")
def amax(ctx: LowerCtx, a: Args) -> T:
    red = "max" if ctx.op == "aten.amax" else "min"
    return ctx.reduce(a.self, _dims(ctx, a.self, a.dim), bool(a.keepdim), red, dtype=ctx.out_dtype())


@rule("aten.all", "aten.any")
def all_any(ctx: LowerCtx, a: Args) -> T:
    x = a.self
    if ctx.dtype(x) != "bool":
        x = ctx.ew("ne", x, 0, suffix="nz")
    red = "min" if ctx.op == "aten.all" else "max"
    return ctx.reduce(x, _dims(ctx, x, a.dim), bool(a.keepdim), red, dtype="bool")


@rule("aten.max", "aten.min")
def max_min(ctx: LowerCtx, a: Args) -> T | tuple[T, T]:
    red = "max" if ctx.op == "aten.max" else "min"
    if a.other is not None:
        return ctx.ew(red, a.self, a.other, dtype=ctx.out_dtype())
    if a.dim is None:
        return ctx.reduce(a.self, None, False, red, dtype=ctx.out_dtype())
    dims = _dims(ctx, a.self, a.dim)
    vals = ctx.reduce(a.self, dims, bool(a.keepdim), red, dtype=ctx.out_dtype(0), suffix="values")
    idx = ctx.reduce(a.self, dims, bool(a.keepdim), "arg" + red, dtype="int64", suffix="indices")
    return vals, idx


@rule("aten.argmax", "aten.argmin")
def argmax(ctx: LowerCtx, a: Args) -> T:
    x = a.self
    red = "argmax" if ctx.op == "aten.argmax" else "argmin"
    if a.dim is None:
        x = ctx.reshape(x, [ctx.b.numel(x.name)], suffix="flat")
        y = ctx.reduce(x, [0], False, red, dtype="int64")
        return ctx.reshape(y, ctx.out_shape(), suffix="shaped") if ctx.out_shape() != () else y
    return ctx.reduce(x, _dims(ctx, x, a.dim), bool(a.keepdim), red, dtype="int64")


def var(ctx: LowerCtx, x: T, dims: Sequence[int], correction: float, keepdim: bool, suffix: str | None = None) -> T:
    """Variance with Bessel-style ``correction`` (n - correction in the denominator)."""
    m = mean(ctx, x, dims, True, suffix="mean")
    xc = ctx.ew("sub", x, m, suffix="centered")
    sq = ctx.ew("square", xc, suffix="sq")
    s = ctx.reduce(sq, dims, keepdim, "add", suffix="sumsq")
    n = _count(ctx, x, dims)
    return ctx.ew("mul", s, 1.0 / max(n - correction, 0) if n - correction > 0 else math.inf, suffix=suffix)


def _correction(a: Args) -> float:
    if a.correction is not None:
        return float(a.correction)
    if a.unbiased is not None:
        return 1.0 if a.unbiased else 0.0
    return 1.0


@rule("aten.var", "aten.std")
def var_std(ctx: LowerCtx, a: Args) -> T:
    x = a.self
    v = var(ctx, x, _dims(ctx, x, a.dim), _correction(a), bool(a.keepdim), suffix="var" if ctx.op == "aten.std"
            else None)
    return ctx.ew("sqrt", v) if ctx.op == "aten.std" else v


@rule("aten.var_mean", "aten.std_mean")
def var_mean(ctx: LowerCtx, a: Args) -> tuple[T, T]:
    x = a.self
    dims = _dims(ctx, x, a.dim)
    v = var(ctx, x, dims, _correction(a), bool(a.keepdim), suffix="var")
    if ctx.op == "aten.std_mean":
        v = ctx.ew("sqrt", v, suffix="std")
    return v, mean(ctx, x, dims, bool(a.keepdim), suffix="mean")


@rule("aten.logsumexp")
def logsumexp(ctx: LowerCtx, a: Args) -> T:
    x = a.self
    dims = _dims(ctx, x, a.dim)
    m = ctx.reduce(x, dims, True, "max", suffix="max")
    e = ctx.ew("exp", ctx.ew("sub", x, m, suffix="shifted"), suffix="exp")
    s = ctx.reduce(e, dims, True, "add", suffix="sum")
    lse = ctx.ew("add", ctx.ew("log", s, suffix="log"), m, suffix="lse" if not a.keepdim else None)
    if a.keepdim:
        return lse
    return ctx.reshape(lse, ctx.out_shape())


def vector_norm(ctx: LowerCtx, x: T, p: float, dims: Sequence[int], keepdim: bool, dtype: str) -> T:
    """The p-norm of ``x`` over ``dims``."""
    if p == 2:
        s = ctx.reduce(ctx.ew("square", x, suffix="sq"), dims, keepdim, "add", suffix="sumsq")
        return ctx.ew("sqrt", s, dtype=dtype)
    if p == 1:
        return ctx.reduce(ctx.ew("abs", x, suffix="abs"), dims, keepdim, "add", dtype=dtype)
    if math.isinf(p):
        return ctx.reduce(ctx.ew("abs", x, suffix="abs"), dims, keepdim, "max" if p > 0 else "min", dtype=dtype)
    if p == 0:
        nz = ctx.ew("ne", x, 0.0, suffix="nz")
        return ctx.reduce(ctx.cast(nz, dtype, suffix="f"), dims, keepdim, "add", dtype=dtype)
    pw = ctx.ew("pow", ctx.ew("abs", x, suffix="abs"), p, suffix="pow")
    s = ctx.reduce(pw, dims, keepdim, "add", suffix="sum")
    return ctx.ew("pow", s, 1.0 / p, dtype=dtype)


@rule("aten.linalg_vector_norm")
def linalg_vector_norm(ctx: LowerCtx, a: Args) -> T:
    x = a.self
    return vector_norm(ctx, x, float(a.ord), _dims(ctx, x, a.dim), bool(a.keepdim), ctx.out_dtype())


@rule("aten.norm", "aten.frobenius_norm")
def norm(ctx: LowerCtx, a: Args) -> T:
    x = a.self
    p = a.p if a.p is not None else 2.0
    if isinstance(p, str):
        if p != "fro":
            raise NoLowering(f"norm p={p}")
        p = 2.0
    return vector_norm(ctx, x, float(p), _dims(ctx, x, a.dim), bool(a.keepdim), ctx.out_dtype())


def softmax(ctx: LowerCtx, x: T, dim: int, log: bool, dtype: str, suffix: str | None = None) -> T:
    """(log-)softmax of ``x`` along ``dim`` as max, subtract, exp, sum, divide (log: log, subtract)."""
    dims = _dims(ctx, x, dim)
    x = ctx.cast(x, dtype, suffix="in")
    m = ctx.reduce(x, dims, True, "max", suffix="max")
    sh = ctx.ew("sub", x, m, suffix="shifted")
    e = ctx.ew("exp", sh, suffix="exp")
    s = ctx.reduce(e, dims, True, "add", suffix="sum")
    if log:
        return ctx.ew("sub", sh, ctx.ew("log", s, suffix="logsum"), dtype=dtype, suffix=suffix)
    return ctx.ew("div", e, s, dtype=dtype, suffix=suffix)


@rule("aten.softmax", "aten._softmax", "aten._safe_softmax", "aten.log_softmax", "aten._log_softmax",
      "aten.special_softmax", "aten.special_log_softmax")
def softmax_(ctx: LowerCtx, a: Args) -> T:
    return softmax(ctx, a.self, a.dim, "log" in ctx.op, ctx.out_dtype())


