"""Reductions (``reduce_*``, ``argmax``/``argmin``) and ``dot_general`` (one contraction)."""

from __future__ import annotations

from typing import Any

from ...common.builder import access
from ..lower import Lowerer, Operand
from ..registry import NoLowering, rule
from .helpers import _bound, as_tensor, reduce


@rule("reduce_sum", "reduce_max", "reduce_min", "reduce_prod")
def reduce_rule(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    red = {"reduce_sum": "add", "reduce_max": "max", "reduce_min": "min", "reduce_prod": "mul"}[eqn.primitive.name]
    return [reduce(ctx, as_tensor(ctx, ins[0], ctx.out_dtype()), eqn.params["axes"], red)]


@rule("reduce_or", "reduce_and")
def reduce_bool(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    if ctx.out_dtype() != "bool":
        raise NoLowering("bitwise reduction of integers")
    red = "max" if eqn.primitive.name == "reduce_or" else "min"
    return [reduce(ctx, as_tensor(ctx, ins[0], "bool"), eqn.params["axes"], red)]


@rule("argmax", "argmin")
def argmax(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    axes = eqn.params["axes"]
    if len(axes) != 1:
        raise NoLowering("argmax over several axes")
    return [reduce(ctx, ins[0], axes, eqn.primitive.name)]


# --------------------------------------------------------------------------- contraction

@rule("dot_general")
def dot_general(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    x, w = ins
    if not (isinstance(x, str) and isinstance(w, str)):
        raise NoLowering("scalar operand")
    if not _bound(ctx, x) and _bound(ctx, w):
        x, w, lc, rc, lb, rb, swapped = w, x, rc, lc, rb, lb, True
    else:
        swapped = False
    xr = ctx.ranks(x)
    hints: list[str | None] = [None] * len(ctx.shape(w))
    for a, c in zip(lc, rc, strict=True):
        hints[c] = xr[a]
    for a, c in zip(lb, rb, strict=True):
        hints[c] = xr[a]
    free_w = [i for i in range(len(hints)) if i not in rc and i not in rb]
    for i in free_w:
        hints[i] = "D*" if len(free_w) == 1 else None
    ctx.b.bind(w, hints)
    wr = ctx.ranks(w)
    batch = [xr[a] for a in lb]
    contract = [xr[a] for a in lc]
    xfree = [xr[i] for i in range(len(xr)) if i not in lc and i not in lb]
    wfree = list(ctx.b.distinct([wr[i] for i in free_w], set(xr)))
    w_idx: list[str] = [""] * len(wr)
    for a, c in zip(lc, rc, strict=True):
        w_idx[c] = xr[a]
    for a, c in zip(lb, rb, strict=True):
        w_idx[c] = xr[a]
    for i, r in zip(free_w, wfree, strict=True):
        w_idx[i] = r
    out_ranks = batch + (wfree + xfree if swapped else xfree + wfree)
    out = ctx.tensor(out_ranks, ctx.out_dtype())
    ins_acc = [access(x, xr), access(w, w_idx)]
    if swapped:
        ins_acc.reverse()
    ctx.b.einsum(out, ctx.op, out_ranks + contract, ins_acc, access(out, out_ranks), "mul", "add",
                 location=ctx.location)
    return [out]
