"""Control flow and scans: ``scan`` and counted ``while`` unrolled per step, ``cond`` on a constant
index inlined, cumulative ops as format-1.1 scans; data-dependent loops and branches opaque."""

from __future__ import annotations

from typing import Any

from jax.extend import core as jcore

from ...common.builder import access
from ..lower import Lowerer, Operand, file_dtype
from ..registry import NoLowering, rule
from .helpers import as_tensor, lin, reshape

#: the most steps a scan or a static while loop is unrolled to
MAX_STEPS = 256


@rule("scan")
def scan(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    """A scan with a static length, unrolled: body per step on slices of the scanned inputs."""
    p = eqn.params
    length, nc, ncarry = int(p["length"]), p["num_consts"], p["num_carry"]
    if length > MAX_STEPS:
        raise NoLowering(f"scan of {length} steps (unrolled up to {MAX_STEPS})")
    body = p["jaxpr"]
    consts, carry, xs = ins[:nc], list(ins[nc:nc + ncarry]), ins[nc + ncarry:]
    ys_steps: list[list[Operand]] = []
    steps = range(length - 1, -1, -1) if p["reverse"] else range(length)
    eqn0 = eqn
    for t in steps:
        xt = []
        for x in xs:
            ctx.eqn = eqn0
            xt.append(_index0(ctx, x, t))
        outs = ctx.run_closed(body, list(consts) + carry + xt)
        carry = outs[:ncarry]
        ys_steps.append(outs[ncarry:])
    ctx.eqn = eqn0
    if p["reverse"]:
        ys_steps.reverse()
    ys = []
    for k, v in enumerate(eqn.outvars[ncarry:]):
        parts = []
        for step in ys_steps:
            y = as_tensor(ctx, step[k], file_dtype(v.aval.dtype))
            parts.append(reshape(ctx, y, (1,) + ctx.shape(y), suffix="step"))
        if len(parts) == 1:
            ys.append(parts[0])
            continue
        shape = tuple(int(s) for s in v.aval.shape)
        r0 = ctx.ranks(parts[0])
        out_ranks = ctx.b.new_ranks(["T*"] + list(r0[1:]), shape)
        out = ctx.tensor(out_ranks, ctx.dtype(parts[0]), "ys")
        ctx.b.concat(out, ctx.op, parts, out, out_ranks[0], location=ctx.location)
        ys.append(out)
    return carry + ys


def _index0(ctx: Lowerer, x: Operand, t: int) -> str:
    """``x[t]`` as a copy of one slice along the leading dim."""
    out_ranks = ctx.ranks(x)[1:]
    out = ctx.tensor(out_ranks, ctx.dtype(x), f"x{t}")
    ctx.b.copy(out, ctx.op, out_ranks, [access(x, [t] + list(out_ranks))], access(out, out_ranks), view=True,
               location=ctx.location)
    return out


#: cumulative primitives and the reduce their inclusive prefix applies
_CUMULATIVE = {"cumsum": "add", "cumprod": "mul", "cummax": "max", "cummin": "min"}


@rule(*_CUMULATIVE)
def cumulative(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    """An inclusive prefix along ``axis`` (format 1.1 ``scan``): n - 1 combines per row, the
    fewest any algorithm needs. ``reverse`` reads and writes through reversed views."""
    x = ins[0]
    if not isinstance(x, str):
        raise NoLowering("scalar operand")
    axis = int(eqn.params["axis"]) % len(ctx.shape(x))
    reverse = bool(eqn.params.get("reverse", False))
    xr = ctx.ranks(x)
    src = _reversed(ctx, x, axis, "rev") if reverse else x
    out = ctx.tensor(xr, ctx.out_dtype(), "scan" if reverse else None)
    ctx.b.einsum(out, ctx.op, xr, [access(src, xr)], access(out, xr), "identity", _CUMULATIVE[eqn.primitive.name],
                 scan=xr[axis], location=ctx.location)
    return [_reversed(ctx, out, axis, None) if reverse else out]


def _reversed(ctx: Lowerer, x: str, axis: int, suffix: str | None) -> str:
    """``x`` reversed along ``axis``: a view with index ``n - 1 - R``."""
    xr, n = ctx.ranks(x), ctx.shape(x)[axis]
    out = ctx.tensor(xr, ctx.dtype(x), suffix)
    idx = [lin(n - 1, (-1, r)) if i == axis else lin(0, (1, r)) for i, r in enumerate(xr)]
    ctx.b.copy(out, ctx.op, xr, [access(x, idx)], access(out, xr), view=True, location=ctx.location)
    return out


@rule("cumlogsumexp")
def cumlogsumexp(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    raise NoLowering("cumlogsumexp: a prefix of log-add-exp has no reduce operator in the format")


@rule("cond")
def cond(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    """``lax.cond``/``switch`` on a constant index: the chosen branch, inlined. On a data-dependent
    index which branch runs is unknown (opaque)."""
    index, *ops = ins
    if isinstance(index, str):
        raise NoLowering("cond on a data-dependent predicate: which branch runs is unknown")
    branches = eqn.params["branches"]
    outs = ctx.run_closed(branches[min(max(int(index), 0), len(branches) - 1)], ops)
    ctx.eqn = eqn
    return outs


@rule("while")
def while_loop(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    """A while loop with a static counter (``fori_loop`` with traced bounds, ``i < n`` loops)
    unrolled like a scan; any other loop is opaque (its trip count depends on data)."""
    p = eqn.params
    cn, bn = p["cond_nconsts"], p["body_nconsts"]
    cconsts, bconsts, carry = ins[:cn], ins[cn:cn + bn], list(ins[cn + bn:])
    trips = static_trip_count(p["cond_jaxpr"], p["body_jaxpr"], cconsts, bn, carry)
    if trips is None:
        raise NoLowering("while loop: trip count not static")
    if trips > MAX_STEPS:
        raise NoLowering(f"while loop of {trips} steps (unrolled up to {MAX_STEPS})")
    for _ in range(trips):
        carry = ctx.run_closed(p["body_jaxpr"], list(bconsts) + carry)
    ctx.eqn = eqn
    return carry


def static_trip_count(cond: Any, body: Any, cconsts: list[Operand], bn: int, init: list[Operand]) -> int | None:
    """The trip count of ``while counter < limit`` (or ``<=``) where the body adds 1 to the
    counter, the counter starts at a constant and the limit is a constant or a carry the body
    passes through unchanged; None for any other loop."""
    cj, bj = getattr(cond, "jaxpr", cond), getattr(body, "jaxpr", body)
    if len(cj.eqns) != 1 or cj.eqns[0].primitive.name not in ("lt", "le", "gt", "ge"):
        return None
    e = cj.eqns[0]
    if e.outvars[0] is not cj.outvars[0]:
        return None
    a, b = e.invars
    if e.primitive.name in ("gt", "ge"):
        a, b = b, a
    cn = len(cconsts)

    def carry_index(v: Any) -> int | None:
        return cj.invars.index(v) - cn if v in cj.invars[cn:] else None

    def value(v: Any) -> int | None:
        if isinstance(v, jcore.Literal):
            return int(v.val)
        if v in cj.invars[:cn]:
            c = cconsts[cj.invars.index(v)]
            return c if isinstance(c, int) else None
        k = carry_index(v)
        if k is None or not isinstance(init[k], int) or bj.outvars[k] is not bj.invars[bn + k]:
            return None
        return init[k]

    k, limit = carry_index(a), value(b)
    if k is None or limit is None or not isinstance(init[k], int) or not _adds_one(bj, bn + k, k):
        return None
    return max(0, limit - init[k] + (1 if e.primitive.name in ("le", "ge") else 0))


def _adds_one(bj: Any, invar: int, outvar: int) -> bool:
    """True when the body computes output ``outvar`` as input ``invar`` + 1."""
    for e in bj.eqns:
        if bj.outvars[outvar] in e.outvars:
            if e.primitive.name != "add":
                return False
            ops = list(e.invars)
            lits = [v for v in ops if isinstance(v, jcore.Literal)]
            return (len(lits) == 1 and int(lits[0].val) == 1 and bj.invars[invar] in ops)
    return False
