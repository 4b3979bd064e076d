"""Normalisations: layer, RMS, batch (inference and training statistics), group and instance norm.

Each is written out as the einsums a kernel must execute: mean (sum, scale), centre,
square, variance (sum, scale), ``+ eps``, ``rsqrt``, normalise, then the affine weight and
bias broadcast along their channel ranks.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ctx import Args, LowerCtx, T
from ..registry import rule
from .reduce import mean


def normalize(ctx: LowerCtx, x: T, dims: Sequence[int], eps: float) -> tuple[T, T, T]:
    """(x - mean) * rsqrt(var + eps) over ``dims`` (biased variance); returns (xhat, mean, rstd)."""
    xhat, m, _, rstd = statistics(ctx, x, dims, eps)
    return xhat, m, rstd


def statistics(ctx: LowerCtx, x: T, dims: Sequence[int], eps: float) -> tuple[T, T, T, T]:
    """:func:`normalize`, also returning the biased variance: (xhat, mean, var, rstd)."""
    m = mean(ctx, x, dims, True, dtype="fp32" if ctx.dtype(x) != "fp64" else "fp64", suffix="mean")
    xc = ctx.ew("sub", x, m, dtype=ctx.dtype(m), suffix="centered")
    v = mean(ctx, ctx.ew("square", xc, suffix="sq"), dims, True, suffix="var")
    rstd = ctx.ew("rsqrt", ctx.ew("add", v, float(eps), suffix="var_eps"), suffix="rstd")
    return ctx.ew("mul", xc, rstd, suffix="xhat"), m, v, rstd


def affine(ctx: LowerCtx, y: T, weight: T | None, bias: T | None, channel_dim: int | None, dtype: str) -> T:
    """``y * weight + bias``; weight/bias span the trailing dims, or dim ``channel_dim`` alone."""
    yr, ys = ctx.ranks(y), ctx.shape(y)
    out = y
    for i, p in enumerate((weight, bias)):
        if p is None:
            continue
        ps = ctx.shape(p)
        if channel_dim is None:
            ctx.b.bind(p.name, list(yr[len(yr) - len(ps):]))
        else:
            ctx.b.bind(p.name, [yr[channel_dim]])
            tail = len(ys) - channel_dim - 1
            if tail:
                p = ctx.reshape(p, list(ps) + [1] * tail, suffix="w" if i == 0 else "b")
        last = i == 1 or bias is None
        out = ctx.ew("mul" if i == 0 else "add", out, p, dtype=dtype if last else None,
                     suffix=None if last else "scaled")
    return ctx.cast(out, dtype, suffix="cast") if out is y else out


@rule("aten.layer_norm", "aten.native_layer_norm")
def layer_norm(ctx: LowerCtx, a: Args) -> T | tuple[T, T, T]:
    x, k = a.input, len(a.normalized_shape)
    nd = len(ctx.shape(x))
    dims = list(range(nd - k, nd))
    xhat, m, rstd = normalize(ctx, x, dims, a.eps if a.eps is not None else 1e-5)
    y = affine(ctx, xhat, a.weight, a.bias, None, ctx.out_dtype(0 if ctx.op == "aten.native_layer_norm" else None))
    if ctx.op == "aten.native_layer_norm":
        return y, m, rstd
    return y


@rule("aten.rms_norm", "aten._fused_rms_norm")
def rms_norm(ctx: LowerCtx, a: Args) -> T | tuple[T, T]:
    import torch

    x, k = a.input, len(a.normalized_shape)
    nd = len(ctx.shape(x))
    dims = list(range(nd - k, nd))
    eps = a.eps if a.eps is not None else float(torch.finfo(ctx.node.args[0].meta["val"].dtype).eps)
    ms = mean(ctx, ctx.ew("square", x, dtype="fp32", suffix="sq"), dims, True, suffix="ms")
    rstd = ctx.ew("rsqrt", ctx.ew("add", ms, float(eps), suffix="ms_eps"), suffix="rstd")
    xhat = ctx.ew("mul", x, rstd, suffix="xhat")
    dt = ctx.out_dtype(0) if ctx.op == "aten._fused_rms_norm" else ctx.out_dtype()
    y = affine(ctx, xhat, a.weight, None, None, dt)
    return (y, rstd) if ctx.op == "aten._fused_rms_norm" else y


@rule("aten.batch_norm", "aten._native_batch_norm_legit_no_training", "aten._native_batch_norm_legit",
      "aten.native_batch_norm", "aten._native_batch_norm_legit_functional", "aten._batch_norm_with_update",
      "aten.instance_norm")
def batch_norm(ctx: LowerCtx, a: Args) -> T | tuple:
    x = a.input
    nd = len(ctx.shape(x))
    xr = ctx.ranks(x)
    op = ctx.op
    training = a.training if op != "aten.instance_norm" else a.use_input_stats
    if op == "aten._native_batch_norm_legit_no_training":
        training = False
    if op == "aten._batch_norm_with_update":
        training = True
    if a.running_mean is None:
        training = True
    eps = float(a.eps)
    tuple_out = op not in ("aten.batch_norm", "aten.instance_norm")
    dt = ctx.out_dtype(0) if tuple_out else ctx.out_dtype()
    var = None
    if training:
        dims = [0] + list(range(2, nd)) if op != "aten.instance_norm" else list(range(2, nd))
        y, m, var, rstd = statistics(ctx, x, dims, eps)
    else:
        rm, rv = a.running_mean, a.running_var
        for s in (rm, rv):
            ctx.b.bind(s.name, [xr[1]])
        tail = [1] * (nd - 2)
        rstd = ctx.ew("rsqrt", ctx.ew("add", rv, eps, suffix="var_eps"), suffix="rstd")
        m = rm
        m_b = ctx.reshape(rm, [ctx.shape(rm)[0]] + tail, suffix="mean_b") if tail else rm
        r_b = ctx.reshape(rstd, [ctx.shape(rstd)[0]] + tail, suffix="rstd_b") if tail else rstd
        y = ctx.ew("mul", ctx.ew("sub", x, m_b, suffix="centered"), r_b, suffix="xhat")
    y = affine(ctx, y, a.weight, a.bias, 1, dt)
    if not tuple_out:
        return y
    return (y, *_batch_norm_extras(ctx, a, m, var, rstd, training))


def _batch_norm_extras(ctx: LowerCtx, a: Args, m: T, var: T | None, rstd: T, training: bool) -> list[T | None]:
    """The results after ``out`` of a tuple-returning batch norm, shaped as the op returns them: the
    saved mean and rstd (per channel in training; outside it None, as eager returns them empty),
    then, for the functional op, the updated running mean and variance: ``(1 - momentum) * running
    + momentum * batch statistic``, the variance unbiased (times n / (n - 1)). An empty result
    (``reserve``) is None."""
    vals = ctx.node.meta["val"]
    c = ctx.shape(a.input)[1]
    per_channel = {1: m, 2: rstd} if training else {}
    if training and var is not None and a.running_mean is not None and len(vals) >= 5:
        n = ctx.b.numel(a.input.name) // c
        mom = float(a.momentum)
        for i, run, stat, scale in ((3, a.running_mean, m, 1.0), (4, a.running_var, var, n / max(n - 1, 1))):
            ctx.b.bind(run.name, [ctx.ranks(a.input)[1]])
            flat = ctx.reshape(stat, [c], suffix="stat")
            part = ctx.ew("mul", flat, mom * scale, suffix="momentum")
            per_channel[i] = ctx.ew("add", ctx.ew("mul", run, 1.0 - mom, suffix="decayed"), part,
                                    dtype=ctx.dtype(run), suffix="running")
    out: list[T | None] = []
    for i, v in enumerate(vals[1:], start=1):
        t = per_channel.get(i)
        shape = [int(s) for s in v.shape]
        if t is None or 0 in shape:
            out.append(None)
        else:
            out.append(ctx.reshape(t, shape, suffix="saved") if ctx.shape(t) != tuple(shape) else t)
    return out


@rule("aten.group_norm", "aten.native_group_norm")
def group_norm(ctx: LowerCtx, a: Args) -> T | tuple[T, T, T]:
    x = a.input
    xs = ctx.shape(x)
    g = a.num_groups if a.num_groups is not None else a.group
    n, c = xs[0], xs[1]
    grouped = ctx.reshape(x, [n, g, c // g] + list(xs[2:]), suffix="grouped")
    dims = list(range(2, len(xs) + 1))
    xhat, m, rstd = normalize(ctx, grouped, dims, float(a.eps))
    y = ctx.reshape(xhat, list(xs), suffix="ungrouped")
    native = ctx.op == "aten.native_group_norm"
    y = affine(ctx, y, a.weight, a.bias, 1, ctx.out_dtype(0 if native else None))
    if native:
        return y, ctx.reshape(m, [n, g], suffix="mean_out"), ctx.reshape(rstd, [n, g], suffix="rstd_out")
    return y
