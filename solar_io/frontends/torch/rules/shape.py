"""Views, reshapes and data movement: view/reshape/permute/expand/slice/select/cat/stack/split/pad/...

View-only ops (view, permute, transpose, expand, slice, select, unfold) are ``view: true``
data movement that moves no bytes; ops that materialise (clone, contiguous of a view, cat,
flip, pad, a reshape of a non-contiguous view) move their bytes. Aliases (detach, dropout at
inference, a cast to the same dtype) emit nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from ....affine import Access, Indirect
from ...common.builder import access, expr, family
from ..lower import Args, LowerCtx, T, file_dtype
from ..registry import NoLowering, rule


@rule("aten.view", "aten.reshape", "aten._unsafe_view", "aten._reshape_alias")
def view(ctx: LowerCtx, a: Args) -> T:
    return ctx.reshape(a.self, list(a.size if a.size is not None else a.shape))


@rule("aten.flatten")
def flatten(ctx: LowerCtx, a: Args) -> T:
    return ctx.reshape(a.self, ctx.out_shape())


@rule("aten.unflatten", "aten.unsqueeze", "aten.squeeze", "aten.view_as", "aten.reshape_as")
def unsqueeze(ctx: LowerCtx, a: Args) -> T:
    return ctx.reshape(a.self, ctx.out_shape())


@rule("aten.permute")
def permute(ctx: LowerCtx, a: Args) -> T:
    return ctx.permute(a.self, a.dims)


@rule("aten.transpose", "aten.swapaxes", "aten.swapdims")
def transpose(ctx: LowerCtx, a: Args) -> T:
    x = a.self
    n = len(ctx.shape(x))
    d0, d1 = (a.dim0 if a.dim0 is not None else a.axis0), (a.dim1 if a.dim1 is not None else a.axis1)
    perm = list(range(n))
    if n:
        d0, d1 = d0 % n, d1 % n
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return ctx.permute(x, perm)


@rule("aten.t", "aten.numpy_T")
def t(ctx: LowerCtx, a: Args) -> T:
    return ctx.permute(a.self, list(reversed(range(len(ctx.shape(a.self))))))


@rule("aten.alias", "aten.detach", "aten.lift_fresh_copy", "aten.dropout", "aten.feature_dropout",
      "aten.alpha_dropout", "aten.lift_fresh", "aten.contiguous")
def alias(ctx: LowerCtx, a: Args) -> T:
    x = a.self if a.self is not None else a.input
    if ctx.op == "aten.contiguous" and x.name in ctx.noncontig:
        return ctx.copy(x)
    return x


@rule("aten.clone")
def clone(ctx: LowerCtx, a: Args) -> T:
    return ctx.copy(a.self)


@rule("aten._to_copy", "aten.to", "aten.type_as")
def to(ctx: LowerCtx, a: Args) -> T:
    return ctx.cast(a.self, ctx.out_dtype())


def expand_to(ctx: LowerCtx, x: T, shape: Sequence[int], suffix: str | None = None) -> T:
    """``x`` broadcast to ``shape`` (a view)."""
    xs, xr = ctx.shape(x), ctx.ranks(x)
    shape = [int(s) for s in shape]
    off = len(shape) - len(xs)
    shape = [xs[i - off] if s == -1 else s for i, s in enumerate(shape)]
    if tuple(shape) == xs:
        return x
    picked = []
    for j, s in enumerate(shape):
        k = j - off
        if k >= 0 and xs[k] == s:
            picked.append(xr[k])
        else:
            picked.append(ctx.b.rank(family(xr[k]) if k >= 0 and family(xr[k]) != "U" else "B", s, xr))
    out_ranks = list(ctx.b.distinct(picked))
    idx = [out_ranks[k + off] if xs[k] == shape[k + off] else 0 for k in range(len(xs))]
    out = ctx.tensor(out_ranks, ctx.dtype(x), suffix)
    ctx.b.copy(out.name, ctx.op, out_ranks, [access(x.name, idx)], access(out.name, out_ranks), view=True,
               location=ctx.location)
    ctx.noncontig.add(out.name)
    return out


@rule("aten.expand", "aten.broadcast_to", "aten.expand_as")
def expand(ctx: LowerCtx, a: Args) -> T:
    return expand_to(ctx, a.self, ctx.out_shape())


def slice_dim(ctx: LowerCtx, x: T, dim: int, start: int | None, end: int | None, step: int = 1,
              suffix: str | None = None) -> T:
    """``x[..., start:end:step, ...]`` along ``dim`` (a view)."""
    xs, xr = ctx.shape(x), ctx.ranks(x)
    dim %= len(xs)
    n = xs[dim]
    start, end, step = slice(start, end, step).indices(n)
    m = max(0, (end - start + step - 1) // step)
    if start == 0 and m == n and step == 1:
        return x
    if m == 0:
        raise NoLowering("empty slice")
    r = ctx.b.rank(family(xr[dim]) if m != 1 else "U", m, xr)
    out_ranks = list(xr)
    out_ranks[dim] = r
    idx: list[str] = list(xr)
    idx[dim] = f"{step}*{r} + {start}" if step != 1 else f"{r} + {start}"
    out = ctx.tensor(out_ranks, ctx.dtype(x), suffix)
    ctx.b.copy(out.name, ctx.op, out_ranks, [access(x.name, idx)], access(out.name, out_ranks), view=True,
               location=ctx.location)
    if dim != 0 and any(s != 1 for s in xs[:dim]):
        ctx.noncontig.add(out.name)
    if x.name in ctx.noncontig or step != 1:
        ctx.noncontig.add(out.name)
    return out


@rule("aten.slice")
def slice_(ctx: LowerCtx, a: Args) -> T:
    return slice_dim(ctx, a.self, a.dim, a.start, a.end, a.step or 1)


@rule("aten.narrow")
def narrow(ctx: LowerCtx, a: Args) -> T:
    return slice_dim(ctx, a.self, a.dim, a.start, a.start + a.length, 1)


def select_dim(ctx: LowerCtx, x: T, dim: int, index: int, suffix: str | None = None) -> T:
    """``x`` at ``index`` along ``dim``, that dim dropped (a view)."""
    xs, xr = ctx.shape(x), ctx.ranks(x)
    dim %= len(xs)
    index %= xs[dim]
    out_ranks = [r for i, r in enumerate(xr) if i != dim]
    idx: list[str | int] = list(xr)
    idx[dim] = index
    out = ctx.tensor(out_ranks, ctx.dtype(x), suffix)
    ctx.b.copy(out.name, ctx.op, out_ranks, [access(x.name, idx)], access(out.name, out_ranks), view=True,
               location=ctx.location)
    if x.name in ctx.noncontig or (dim != 0 and any(s != 1 for s in xs[:dim])):
        ctx.noncontig.add(out.name)
    return out


@rule("aten.select")
def select(ctx: LowerCtx, a: Args) -> T:
    return select_dim(ctx, a.self, a.dim, a.index)


@rule("aten.unbind")
def unbind(ctx: LowerCtx, a: Args) -> tuple[T, ...]:
    x, d = a.self, a.dim
    return tuple(select_dim(ctx, x, d, i, suffix=str(i)) for i in range(ctx.shape(x)[d]))


def _split(ctx: LowerCtx, x: T, sizes: Sequence[int], dim: int) -> tuple[T, ...]:
    out, start = [], 0
    for i, s in enumerate(sizes):
        out.append(slice_dim(ctx, x, dim, start, start + s, 1, suffix=str(i)))
        start += s
    return tuple(out)


@rule("aten.split", "aten.split_with_sizes", "aten.chunk", "aten.tensor_split")
def split(ctx: LowerCtx, a: Args) -> tuple[T, ...]:
    vals = ctx.node.meta["val"]
    dim = a.dim if a.dim is not None else 0
    dim %= len(ctx.shape(a.self))
    return _split(ctx, a.self, [int(v.shape[dim]) for v in vals], dim)


@rule("aten.cat", "aten.concat", "aten.concatenate")
def cat(ctx: LowerCtx, a: Args) -> T:
    xs = [x for x in a.tensors if ctx.b.numel(x.name) > 0]
    if len(xs) == 1:
        return ctx.copy(xs[0])
    dim = (a.dim if a.dim is not None else 0) % len(ctx.shape(xs[0]))
    return concat(ctx, xs, dim)


def concat(ctx: LowerCtx, xs: Sequence[T], dim: int, suffix: str | None = None) -> T:
    """``xs`` joined along ``dim``."""
    r0 = ctx.ranks(xs[0])
    total = sum(ctx.shape(x)[dim] for x in xs)
    axis = ctx.b.rank(family(r0[dim]) if family(r0[dim]) != "U" else "J", total, r0)
    out_ranks = list(r0)
    out_ranks[dim] = axis
    dt = ctx.dtype(xs[0])
    srcs = [ctx.cast(x, dt, suffix=f"cast{i}") for i, x in enumerate(xs)]
    out = ctx.tensor(out_ranks, dt, suffix)
    ctx.b.concat(out.name, ctx.op, [s.name for s in srcs], out.name, axis, attrs={"dim": dim},
                 location=ctx.location)
    return out


@rule("aten.stack")
def stack(ctx: LowerCtx, a: Args) -> T:
    xs = list(a.tensors)
    nd = len(ctx.shape(xs[0])) + 1
    dim = (a.dim or 0) % nd
    parts = []
    for i, x in enumerate(xs):
        s = list(ctx.shape(x))
        s.insert(dim, 1)
        parts.append(ctx.reshape(x, s, suffix=f"u{i}"))
    return concat(ctx, parts, dim)


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
    mask = np.tril(np.ones((n, m), bool), k) if ctx.op == "aten.tril" else np.triu(np.ones((n, m), bool), k)
    t = ctx.data(mask, xr[-2:], "bool", suffix="mask")
    return ctx.ew("where", t, x, 0.0 if not ctx.dtype(x).startswith(("int", "bool")) else 0,
                  dtype=ctx.out_dtype())


# --------------------------------------------------------------------------- gathers


@rule("aten.embedding")
def embedding(ctx: LowerCtx, a: Args) -> T:
    w, ids = a.weight, a.indices
    ir = ctx.ranks(ids)
    ctx.b.bind(w.name, ["V", "D"])
    wr = ctx.ranks(w)
    (d,) = ctx.b.distinct([wr[1]], ir)
    out_ranks = list(ir) + [d]
    out = ctx.tensor(out_ranks, ctx.dtype(w))
    ctx.b.copy(out.name, ctx.op, out_ranks, [Access(w.name, (Indirect(ids.name), expr(d))), access(ids.name, ir)],
               access(out.name, out_ranks), location=ctx.location)
    return out


def gather_dim(ctx: LowerCtx, x: T, dim: int, idx: T) -> T:
    """``x`` with dim ``dim`` indexed by integer tensor ``idx`` (index_select / index)."""
    xs, xr = ctx.shape(x), ctx.ranks(x)
    dim %= len(xs)
    ir = ctx.ranks(idx)
    before, after = list(xr[:dim]), list(xr[dim + 1:])
    names = ctx.b.distinct(before + list(ir) + after)
    nb, ni = len(before), len(ir)
    out_ranks = list(names)
    x_idx = [expr(r) for r in names[:nb]] + [Indirect(idx.name)] + [expr(r) for r in names[nb + ni:]]
    out = ctx.tensor(out_ranks, ctx.dtype(x))
    ctx.b.copy(out.name, ctx.op, out_ranks, [Access(x.name, tuple(x_idx)), access(idx.name, names[nb:nb + ni])],
               access(out.name, out_ranks), location=ctx.location)
    return out


@rule("aten.index_select")
def index_select(ctx: LowerCtx, a: Args) -> T:
    return gather_dim(ctx, a.self, a.dim, a.index)


@rule("aten.index")
def index(ctx: LowerCtx, a: Args) -> T:
    idx = list(a.indices)
    used = [i for i, v in enumerate(idx) if v is not None]
    if len(used) != 1:
        raise NoLowering("advanced indexing with several index tensors")
    v = idx[used[0]]
    if ctx.dtype(v) == "bool":
        raise NoLowering("boolean mask indexing (data-dependent shape)")
    return gather_dim(ctx, a.self, used[0], v)


@rule("aten.gather")
def gather(ctx: LowerCtx, a: Args) -> T:
    x, dim, idx = a.self, a.dim, a.index
    xs = ctx.shape(x)
    dim %= len(xs)
    ir = ctx.ranks(idx)
    x_idx = [expr(r) if i != dim else Indirect(idx.name) for i, r in enumerate(ir)]
    out = ctx.tensor(ir, ctx.dtype(x))
    ctx.b.copy(out.name, ctx.op, ir, [Access(x.name, tuple(x_idx)), access(idx.name, ir)],
               access(out.name, ir), location=ctx.location)
    return out


# --------------------------------------------------------------------------- creation


@rule("aten.zeros", "aten.ones", "aten.full", "aten.zeros_like", "aten.ones_like", "aten.full_like",
      "aten.new_zeros", "aten.new_ones", "aten.new_full", "aten.empty", "aten.empty_like", "aten.new_empty",
      "aten.scalar_tensor", "aten.fill", "aten.empty_strided")
def full(ctx: LowerCtx, a: Args) -> T:
    op = ctx.op
    if "zeros" in op or "empty" in op:
        v = 0.0
    elif "ones" in op:
        v = 1.0
    elif op == "aten.scalar_tensor":
        v = float(a.s)
    else:
        v = a.fill_value if a.fill_value is not None else a.value
        if isinstance(v, T):
            raise NoLowering("fill with a tensor value")
        v = float(v)
    shape = ctx.out_shape()
    ranks = ctx.b.new_ranks(["A"] * len(shape), shape)
    return T(ctx.b.tensor(ctx.name, ranks, ctx.out_dtype(), "constant", v))


@rule("aten.arange")
def arange(ctx: LowerCtx, a: Args) -> T:
    import numpy as np

    start = a.start if a.start is not None else 0
    end = a.end
    step = a.step if a.step is not None else 1
    if any(isinstance(v, T) for v in (start, end, step)):
        raise NoLowering("arange with tensor bounds")
    val = ctx.node.meta["val"]
    arr = np.arange(start, end, step).astype(str(val.dtype).replace("torch.", ""))
    if arr.shape[0] != int(val.shape[0]):
        raise NoLowering("arange length mismatch")
    r = ctx.b.rank("S", int(val.shape[0]))
    return ctx.data(arr, [r], file_dtype(val.dtype), suffix="arange")
