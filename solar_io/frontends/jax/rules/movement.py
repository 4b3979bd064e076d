"""Data movement: reshape, squeeze, transpose, broadcast, slices, concat, pad (edge, interior, negative), iota."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ...common.builder import access, family
from ..lower import Lowerer, Operand
from ..registry import NoLowering, rule
from .helpers import _bound, lin, reshape


@rule("reshape")
def reshape_rule(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    dims = eqn.params.get("dimensions")
    x = ins[0]
    if dims is not None and tuple(dims) != tuple(range(len(dims))):  # transpose first, then row-major
        xr, xs = ctx.ranks(x), ctx.shape(x)
        perm = [xr[int(d)] for d in dims]
        # moving only size-1 dims keeps the layout: a view; else the transpose moves the data
        same = [d for d in dims if xs[d] != 1] == sorted(d for d in dims if xs[d] != 1)
        t = ctx.tensor(perm, ctx.dtype(x), "transposed")
        ctx.b.copy(t, ctx.op, perm, [access(x, xr)], access(t, perm), view=same, location=ctx.location)
        x = t
    return [reshape(ctx, x, eqn.params["new_sizes"])]


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
    cfg = [(int(lo), int(hi), int(it)) for lo, hi, it in eqn.params["padding_config"]]
    if any(lo < 0 or hi < 0 or it != 0 for lo, hi, it in cfg):
        return [_general_pad(ctx, x, float(v), cfg)]
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


def _general_pad(ctx: Lowerer, x: str, v: float, cfg: list[tuple[int, int, int]]) -> str:
    """``lax.pad`` with interior (``it`` holes between neighbours, as the backward of a strided slice or
    pooling writes) or negative (cropping) padding, as one kernel of three nodes:

    1. a copy of ``x`` viewed ``[.., n, 1, ..]`` into ``[.., n, it + 1, ..]``, the ``it`` new entries
       read from the border (the padding value): each element followed by its holes;
    2. a view of that as ``[.., n * (it + 1), ..]``;
    3. a copy to the output, index ``R - lo`` with a border of ``max(lo, 0)`` below and
       ``max(hi - it, 0)`` above (the trailing ``it`` holes belong to no element: a negative high
       pad crops more), negative pads cropping.

    The kernel reads ``x`` and writes the output once; its inner tensors never cross memory.

    >>> n, lo, hi, it = 5, 0, 0, 1  # the gradient of x[::2] for 9 elements
    >>> lo + n + (n - 1) * it + hi, n * (it + 1) + lo + (hi - it)
    (9, 9)
    """
    start = len(ctx.b.nodes)
    xs, dt = ctx.shape(x), ctx.dtype(x)
    grown = [s for i, n in enumerate(xs) for s in ((n, 1) if cfg[i][2] else (n,))]
    xv = reshape(ctx, x, grown, suffix="grown")
    gr = ctx.ranks(xv)
    hints, border, k = [], {}, 0
    for i in range(len(xs)):
        hints.append(gr[k])
        if cfg[i][2]:
            hints.append(family(gr[k]) + "*")
            border[gr[k + 1]] = (0, cfg[i][2])
            k += 1
        k += 1
    holes_shape = [s for i, n in enumerate(xs) for s in ((n, cfg[i][2] + 1) if cfg[i][2] else (n,))]
    hr = ctx.b.new_ranks(hints, holes_shape)
    holes = xv
    if border:
        holes = ctx.tensor(hr, dt, "holes")
        ctx.b.copy(holes, ctx.op, hr, [access(xv, hr)], access(holes, hr), pad={xv: border},
                   fill=v if v != 0 else None, location=ctx.location)
    flat = reshape(ctx, holes, [n * (it + 1) for n, (_, _, it) in zip(xs, cfg, strict=True)], suffix="flat")
    fr, fs = ctx.ranks(flat), ctx.shape(flat)
    shape = ctx.out_shape()
    out_ranks = ctx.b.new_ranks([fr[i] if shape[i] == fs[i] else family(fr[i]) + "*" for i in range(len(fs))], shape)
    edge = {fr[i]: (max(lo, 0), max(hi - it, 0)) for i, (lo, hi, it) in enumerate(cfg) if lo > 0 or hi - it > 0}
    out = ctx.tensor(out_ranks, dt)
    ctx.b.copy(out, ctx.op, out_ranks, [access(flat, [lin(-lo, (1, r)) for r, (lo, _, _) in zip(out_ranks, cfg,
                                                                                                  strict=True)])],
               access(out, out_ranks), pad={flat: edge} if edge else None, fill=v if edge and v != 0 else None,
               location=ctx.location)
    ctx.b.nodes[start:] = [replace(n, kernel=ctx.name) for n in ctx.b.nodes[start:]]
    return out


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
