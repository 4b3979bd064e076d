"""Data movement: reshape, squeeze, transpose, broadcast, slices, concat, pad, iota."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...common.builder import access, family
from ..lower import Lowerer, Operand
from ..registry import NoLowering, rule
from .helpers import _bound, lin, reshape


@rule("reshape")
def reshape_rule(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    if eqn.params.get("dimensions") is not None:
        raise NoLowering("reshape with dimensions")
    return [reshape(ctx, ins[0], eqn.params["new_sizes"])]


@rule("squeeze", "expand_dims")
def squeeze(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    x = ins[0]
    if not isinstance(x, str):
        return [x]
    return [reshape(ctx, x, ctx.out_shape())]


@rule("transpose")
def transpose(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    x = ins[0]
    xr = ctx.ranks(x)
    perm = eqn.params["permutation"]
    out_ranks = [xr[p] for p in perm]
    out = ctx.tensor(out_ranks, ctx.dtype(x))
    ctx.b.copy(out, ctx.op, out_ranks, [access(x, xr)], access(out, out_ranks), view=True, location=ctx.location)
    return [out]


@rule("broadcast_in_dim")
def broadcast_in_dim(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    x = ins[0]
    shape = ctx.out_shape()
    dims = eqn.params["broadcast_dimensions"]
    if not isinstance(x, str):
        x = ctx.scalar(float(x), ctx.out_dtype())
    xs = ctx.shape(x)
    xr = ctx.ranks(x)
    hints = ["U*" if s == 1 else "A*" for s in shape]
    for j, d in enumerate(dims):
        if xs[j] == shape[d]:
            hints[d] = xr[j]
    out_ranks = ctx.b.new_ranks(hints, shape)
    idx: list[str | int] = [out_ranks[d] if xs[j] == shape[d] else 0 for j, d in enumerate(dims)]
    out = ctx.tensor(out_ranks, ctx.dtype(x))
    ctx.b.copy(out, ctx.op, out_ranks, [access(x, idx)], access(out, out_ranks), view=True, location=ctx.location)
    if x in ctx.bcast:  # a broadcast of a broadcast: compose
        src, inner = ctx.bcast[x]
        ctx.bcast[out] = (src, [dims[d] if d >= 0 and xs[d] == shape[dims[d]] else -1 for d in inner])
    else:
        ctx.bcast[out] = (x, [d if xs[j] == shape[d] else -1 for j, d in enumerate(dims)])
    return [out]


@rule("slice")
def slice_rule(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    x = ins[0]
    xr, xs = ctx.ranks(x), ctx.shape(x)
    start = eqn.params["start_indices"]
    strides = eqn.params["strides"] or [1] * len(xs)
    shape = ctx.out_shape()
    hints = [xr[i] if shape[i] == xs[i] else family(xr[i]) + "*" for i in range(len(xs))]
    out_ranks = ctx.b.new_ranks(hints, shape)
    idx = [f"{strides[i]}*{out_ranks[i]} + {start[i]}" for i in range(len(xs))]
    out = ctx.tensor(out_ranks, ctx.dtype(x))
    ctx.b.copy(out, ctx.op, out_ranks, [access(x, idx)], access(out, out_ranks), location=ctx.location)
    return [out]


@rule("split")
def split(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    x = ins[0]
    axis, sizes = eqn.params["axis"], eqn.params["sizes"]
    xr, xs = ctx.ranks(x), ctx.shape(x)
    outs, start = [], 0
    for k, n in enumerate(sizes):
        shape = list(xs)
        shape[axis] = n = int(n)
        hints = [xr[i] if shape[i] == xs[i] else family(xr[i]) + "*" for i in range(len(xs))]
        out_ranks = ctx.b.new_ranks(hints, shape)
        idx = [f"{out_ranks[i]} + {start}" if i == axis else out_ranks[i] for i in range(len(xs))]
        out = ctx.tensor(out_ranks, ctx.dtype(x), str(k))
        ctx.b.copy(out, ctx.op, out_ranks, [access(x, idx)], access(out, out_ranks), location=ctx.location)
        outs.append(out)
        start += n
    return outs


@rule("concatenate")
def concatenate(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    if not all(isinstance(x, str) for x in ins):
        raise NoLowering("scalar operand")
    return [_concat(ctx, ins, eqn.params["dimension"])]


@rule("stack")
def stack(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    """``stack[axis=d]``: each operand gains a size-1 dim ``d`` (a view), then they are concatenated."""
    if not all(isinstance(x, str) for x in ins):
        raise NoLowering("scalar operand")
    d = eqn.params["axis"]
    grown = [reshape(ctx, x, [*ctx.shape(x)[:d], 1, *ctx.shape(x)[d:]]) for x in ins]
    return [_concat(ctx, grown, d)]


def _concat(ctx: Lowerer, ins: list[str], d: int) -> str:
    """The equation's output: ``ins`` concatenated along dim ``d``."""
    shape = ctx.out_shape()
    lead = next((x for x in ins if _bound(ctx, x)), ins[0])
    lr = ctx.ranks(lead)
    hints = [lr[i] if i != d else family(lr[i]) + "*" for i in range(len(shape))]
    out_ranks = ctx.b.new_ranks(hints, shape)
    for x in ins:
        ctx.b.bind(x, [lr[i] if i != d else None for i in range(len(shape))])
    out = ctx.tensor(out_ranks, ctx.out_dtype())
    ctx.b.concat(out, ctx.op, list(ins), out, out_ranks[d], location=ctx.location)
    return out


@rule("pad")
def pad(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    x, v = ins
    if isinstance(v, str):
        raise NoLowering("tensor padding value")
    cfg = eqn.params["padding_config"]
    if any(lo < 0 or hi < 0 or it != 0 for lo, hi, it in cfg):
        raise NoLowering("negative or interior padding")
    xr, xs = ctx.ranks(x), ctx.shape(x)
    shape = ctx.out_shape()
    hints = [xr[i] if shape[i] == xs[i] else family(xr[i]) + "*" for i in range(len(xs))]
    out_ranks = ctx.b.new_ranks(hints, shape)
    idx = [f"{out_ranks[i]} - {cfg[i][0]}" for i in range(len(xs))]
    border = {xr[i]: (int(cfg[i][0]), int(cfg[i][1])) for i in range(len(xs)) if cfg[i][0] or cfg[i][1]}
    out = ctx.tensor(out_ranks, ctx.dtype(x))
    ctx.b.copy(out, ctx.op, out_ranks, [access(x, idx)], access(out, out_ranks), pad={x: border} if border else None,
               fill=float(v) if border and float(v) != 0 else None, location=ctx.location)
    return [out]


@rule("iota")
def iota(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    shape = ctx.out_shape()
    d = eqn.params["dimension"]
    arr = np.broadcast_to(np.arange(shape[d]).reshape([-1 if i == d else 1 for i in range(len(shape))]), shape)
    out = ctx.data(np.ascontiguousarray(arr).astype(np.dtype(eqn.outvars[0].aval.dtype)), ctx.out_dtype())
    ctx.iota_tables.add(out)
    return [out]


@rule("rev")
def rev(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    """``jnp.flip``: a view with index ``n - 1 - R`` along the reversed dims."""
    x = ins[0]
    xr, xs = ctx.ranks(x), ctx.shape(x)
    dims = {int(d) % len(xs) for d in eqn.params["dimensions"]}
    idx = [lin(xs[i] - 1, (-1, r)) if i in dims else lin(0, (1, r)) for i, r in enumerate(xr)]
    out = ctx.tensor(xr, ctx.dtype(x))
    ctx.b.copy(out, ctx.op, xr, [access(x, idx)], access(out, xr), view=True, location=ctx.location)
    return [out]


@rule("optimization_barrier")
def optimization_barrier(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    return list(ins)
