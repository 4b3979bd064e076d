"""Views and reshapes: view/reshape/permute/transpose/expand/slice/select/split/cat/stack/alias.

View-only ops (view, permute, transpose, expand, slice, select) are ``view: true`` data
movement that moves no bytes; ops that materialise (clone, contiguous of a view, cat, a
reshape whose input strides admit no view, as eager decides) move their bytes. Aliases (detach, dropout at inference,
a cast to the same dtype) emit nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...common.builder import access, family
from ..ctx import Args, LowerCtx, T
from ..registry import NoLowering, rule


@rule("aten.view", "aten.reshape", "aten._unsafe_view")
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


@rule("aten.pixel_shuffle", "aten.pixel_unshuffle")
def pixel_shuffle(ctx: LowerCtx, a: Args) -> T:
    """``[*, C r r, H, W] <-> [*, C, H r, W r]``: a split of dims, a permute and a merge (the merge of the
    permuted view is its copy, as eager makes)."""
    x = a.self
    *lead, c, h, w = ctx.shape(x)
    n = len(lead)
    if ctx.op == "aten.pixel_shuffle":
        r = int(a.upscale_factor)
        split = ctx.reshape(x, [*lead, c // (r * r), r, r, h, w], suffix="split")
        moved = ctx.permute(split, [*range(n), n, n + 3, n + 1, n + 4, n + 2], suffix="moved")
        return ctx.reshape(moved, [*lead, c // (r * r), h * r, w * r])
    r = int(a.downscale_factor)
    split = ctx.reshape(x, [*lead, c, h // r, r, w // r, r], suffix="split")
    moved = ctx.permute(split, [*range(n), n, n + 2, n + 4, n + 1, n + 3], suffix="moved")
    return ctx.reshape(moved, [*lead, c * r * r, h // r, w // r])


@rule("aten.moveaxis")
def moveaxis(ctx: LowerCtx, a: Args) -> T:
    """``movedim``: the dims ``source`` go to the places ``destination``, the rest keep their order."""
    n = len(ctx.shape(a.self))
    src = [d % n for d in ([a.source] if isinstance(a.source, int) else a.source)]
    dst = [d % n for d in ([a.destination] if isinstance(a.destination, int) else a.destination)]
    rest = iter(d for d in range(n) if d not in src)
    placed = dict(zip(dst, src, strict=True))
    return ctx.permute(a.self, [placed[i] if i in placed else next(rest) for i in range(n)])


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
      "aten.alpha_dropout", "aten.contiguous")
def alias(ctx: LowerCtx, a: Args) -> T:
    x = a.self if a.self is not None else a.input
    if ctx.op == "aten.contiguous" and x.name in ctx.noncontig:
        return ctx.copy(x)
    return x


@rule("aten.native_dropout")
def native_dropout(ctx: LowerCtx, a: Args) -> tuple[T, T]:
    """Dropout lowered as inference (the identity); its keep-mask is all true."""
    x = a.input
    mask = T(ctx.b.tensor(f"{ctx.name}.mask", ctx.ranks(x), "bool", "constant", 1.0))
    return x, mask


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
    hints: list[str | None] = [xr[j - off] if j >= off and xs[j - off] == s else None for j, s in enumerate(shape)]
    out_ranks = list(ctx.b.new_ranks(ctx.b.guess(hints, shape), shape))
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
    return concat(ctx, xs, dim, dtype=ctx.out_dtype())


def concat(ctx: LowerCtx, xs: Sequence[T], dim: int, suffix: str | None = None, dtype: str | None = None) -> T:
    """``xs`` joined along ``dim``, each cast to ``dtype`` (torch's promotion of the parts, as ``cat`` and
    ``stack`` give it; the first part's dtype when not given)."""
    r0 = ctx.ranks(xs[0])
    total = sum(ctx.shape(x)[dim] for x in xs)
    axis = ctx.b.rank(family(r0[dim]) if family(r0[dim]) != "U" else "J", total, r0)
    out_ranks = list(r0)
    out_ranks[dim] = axis
    dt = dtype or ctx.dtype(xs[0])
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
    return concat(ctx, parts, dim, dtype=ctx.out_dtype())
