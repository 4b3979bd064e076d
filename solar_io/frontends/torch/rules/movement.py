"""Data movement that rewrites indexes: pad (all modes), flip, roll, repeat, unfold, tril/triu.

Every one is exact: a copy whose index expressions reach into a declared border (pad), run
backwards (flip), or step through windows (unfold); or slices and concats (roll, reflect and
replicate padding); ``tril``/``triu`` select with a stored boolean mask.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...common.builder import access, family
from ..ctx import Args, LowerCtx, T
from ..registry import NoLowering, rule
from .shape import concat, expand_to, slice_dim


@rule("aten.constant_pad_nd", "aten.pad")
def pad(ctx: LowerCtx, a: Args) -> T:
    if ctx.op == "aten.pad" and (a.mode or "constant") != "constant":
        return _pad_nonconstant(ctx, a)
    return constant_pad(ctx, a.self, list(a.pad), float(a.value or 0.0))


def constant_pad(ctx: LowerCtx, x: T, pads: Sequence[int], value: float, suffix: str | None = None) -> T:
    """``F.pad(x, pads, value=value)``: a copy reading into a declared border."""
    xs, xr = ctx.shape(x), ctx.ranks(x)
    nd = len(xs)
    out_ranks, idx = list(xr), list(xr)
    border: dict[str, tuple[int, int]] = {}
    for k in range(len(pads) // 2):
        d = nd - 1 - k
        lo, hi = int(pads[2 * k]), int(pads[2 * k + 1])
        if lo == 0 and hi == 0:
            continue
        m = xs[d] + lo + hi
        r = ctx.b.rank(family(xr[d]), m, set(out_ranks))
        out_ranks[d] = r
        idx[d] = f"{r} - {lo}" if lo >= 0 else f"{r} + {-lo}"
        if lo > 0 or hi > 0:
            border[xr[d]] = (max(lo, 0), max(hi, 0))
    out = ctx.tensor(out_ranks, ctx.dtype(x), suffix)
    ctx.b.copy(out.name, ctx.op, out_ranks, [access(x.name, idx)], access(out.name, out_ranks),
               pad={x.name: border} if border else None, fill=value if border and value != 0 else None,
               attrs={"pad": list(pads)}, location=ctx.location)
    return out


def _pad_nonconstant(ctx: LowerCtx, a: Args) -> T:
    """Reflect / replicate / circular padding as slices (flipped for reflect) and concats."""
    x, pads, mode = a.self, list(a.pad), a.mode
    nd = len(ctx.shape(x))
    for k in range(len(pads) // 2):
        d = nd - 1 - k
        lo, hi = int(pads[2 * k]), int(pads[2 * k + 1])
        n = ctx.shape(x)[d]
        parts = []
        if lo > 0:
            if mode == "reflect":
                parts.append(flip_dim(ctx, slice_dim(ctx, x, d, 1, lo + 1, 1, f"l{d}"), d, f"lf{d}"))
            elif mode == "replicate":
                parts.append(_repeat_edge(ctx, x, d, 0, lo, f"l{d}"))
            elif mode == "circular":
                parts.append(slice_dim(ctx, x, d, n - lo, n, 1, f"l{d}"))
            else:
                raise NoLowering(f"pad mode {mode}")
        parts.append(x)
        if hi > 0:
            if mode == "reflect":
                parts.append(flip_dim(ctx, slice_dim(ctx, x, d, n - 1 - hi, n - 1, 1, f"h{d}"), d, f"hf{d}"))
            elif mode == "replicate":
                parts.append(_repeat_edge(ctx, x, d, n - 1, hi, f"h{d}"))
            elif mode == "circular":
                parts.append(slice_dim(ctx, x, d, 0, hi, 1, f"h{d}"))
            else:
                raise NoLowering(f"pad mode {mode}")
        if len(parts) > 1:
            x = concat(ctx, parts, d, suffix=f"cat{d}")
    return ctx.copy(x) if x == a.self else x


def _repeat_edge(ctx: LowerCtx, x: T, d: int, index: int, times: int, suffix: str) -> T:
    edge = slice_dim(ctx, x, d, index, index + 1, 1, suffix)
    shape = list(ctx.shape(edge))
    shape[d] = times
    return expand_to(ctx, edge, shape, suffix=f"{suffix}x")


def flip_dim(ctx: LowerCtx, x: T, dim: int, suffix: str | None = None, dims: Sequence[int] = ()) -> T:
    """``x`` reversed along ``dim`` (and ``dims``): a copy with index ``n - 1 - r``."""
    xs, xr = ctx.shape(x), ctx.ranks(x)
    all_dims = {d % len(xs) for d in (list(dims) or [dim])}
    idx = [f"{xs[i] - 1} - {r}" if i in all_dims else r for i, r in enumerate(xr)]
    out = ctx.tensor(xr, ctx.dtype(x), suffix)
    ctx.b.copy(out.name, ctx.op, xr, [access(x.name, idx)], access(out.name, xr), location=ctx.location)
    return out


@rule("aten.flip")
def flip(ctx: LowerCtx, a: Args) -> T:
    return flip_dim(ctx, a.self, 0, dims=list(a.dims))


@rule("aten.roll")
def roll(ctx: LowerCtx, a: Args) -> T:
    x = a.self
    shifts, dims = list(a.shifts), list(a.dims or [])
    if not dims:
        raise NoLowering("roll without dims (flattened)")
    for s, d in zip(shifts, dims, strict=True):
        n = ctx.shape(x)[d]
        s %= n
        if s == 0:
            continue
        tail = slice_dim(ctx, x, d, n - s, n, 1, f"t{d}")
        head = slice_dim(ctx, x, d, 0, n - s, 1, f"h{d}")
        x = concat(ctx, [tail, head], d % len(ctx.shape(x)), suffix=f"r{d}")
    return x if x != a.self else ctx.copy(x)


@rule("aten.repeat")
def repeat(ctx: LowerCtx, a: Args) -> T:
    x, reps = a.self, list(a.repeats)
    xs = list(ctx.shape(x))
    xs = [1] * (len(reps) - len(xs)) + xs
    x = ctx.reshape(x, xs, suffix="lead") if len(xs) != len(ctx.shape(x)) else x
    inter = []
    for s in xs:
        inter += [1, s]
    x = ctx.reshape(x, inter, suffix="split")
    big = []
    for r, s in zip(reps, xs, strict=True):
        big += [r, s]
    x = expand_to(ctx, x, big, suffix="expand")
    return ctx.reshape(x, ctx.out_shape())


@rule("aten.repeat_interleave")
def repeat_interleave(ctx: LowerCtx, a: Args) -> T:
    x, r = a.self, a.repeats
    if not isinstance(r, int) or x is None:
        raise NoLowering("repeat_interleave with tensor repeats")
    d = a.dim
    if d is None:
        x = ctx.reshape(x, [ctx.b.numel(x.name)], suffix="flat")
        d = 0
    xs = list(ctx.shape(x))
    d %= len(xs)
    x = ctx.reshape(x, xs[:d + 1] + [1] + xs[d + 1:], suffix="split")
    x = expand_to(ctx, x, xs[:d + 1] + [r] + xs[d + 1:], suffix="expand")
    return ctx.reshape(x, ctx.out_shape())


@rule("aten.unfold")
def unfold(ctx: LowerCtx, a: Args) -> T:
    x, d, size, step = a.self, a.dimension, a.size, a.step
    xs, xr = ctx.shape(x), ctx.ranks(x)
    d %= len(xs)
    nw = (xs[d] - size) // step + 1
    w = ctx.b.rank(family(xr[d]), nw, xr)
    k = ctx.b.rank("K", size, set(xr) | {w})
    out_ranks = list(xr)
    out_ranks[d] = w
    out_ranks.append(k)
    idx = list(xr)
    idx[d] = f"{step}*{w} + {k}"
    out = ctx.tensor(out_ranks, ctx.dtype(x))
    ctx.b.copy(out.name, ctx.op, out_ranks, [access(x.name, idx)], access(out.name, out_ranks), view=True,
               attrs={"size": size, "step": step}, location=ctx.location)
    ctx.noncontig.add(out.name)
    return out


@rule("aten.tril", "aten.triu")
def tril(ctx: LowerCtx, a: Args) -> T:
    import numpy as np

    x, k = a.self, a.diagonal or 0
    xs, xr = ctx.shape(x), ctx.ranks(x)
    n, m = xs[-2], xs[-1]
    tri = np.tril if ctx.op == "aten.tril" else np.triu
    t = ctx.index_table(lambda: tri(np.ones((n, m), bool), k), xr[-2:], "bool", suffix="mask", key=(ctx.op, k))
    return ctx.ew("where", t, x, 0.0 if not ctx.dtype(x).startswith(("int", "bool")) else 0,
                  dtype=ctx.out_dtype())
