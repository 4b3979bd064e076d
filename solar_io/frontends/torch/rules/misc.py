"""Functionalised in-place writes (slice_scatter, select_scatter, copy), im2col, addbmm,
elementwise odds and ends (isnan, isinf, trunc, frac, floor_divide, outer) and export's
metadata assertion (``_assert_tensor_metadata``: checked when the program is traced, no work).

``x[a:b] = src`` reaches the graph as ``slice_scatter``: the result is the concat of the
untouched slices of ``x`` around ``src`` (step 1), so its bytes are those of a real copy. Into a
graph input (``cache[:, :, a:b] = k`` on the cache the program is given, functionalised) it is a
scatter starting from the input instead, as a strided slice is: returned, the input updated in
place (format 1.5 ``updates``) moves only the slice; returned as a new tensor it is written whole.
"""

from __future__ import annotations

from ...common.builder import access, family
from ..ctx import Args, LowerCtx, T
from ..registry import NoLowering, rule
from .matmul import matmul
from .scatter import scatter_positions
from .shape import concat, expand_to, slice_dim


def _scatter_slice(ctx: LowerCtx, x: T, src: T, dim: int, start: int, end: int) -> T:
    n = ctx.shape(x)[dim]
    parts = []
    if start > 0:
        parts.append(slice_dim(ctx, x, dim, 0, start, 1, "before"))
    parts.append(ctx.cast(src, ctx.dtype(x), suffix="src"))
    if end < n:
        parts.append(slice_dim(ctx, x, dim, end, n, 1, "after"))
    return concat(ctx, parts, dim) if len(parts) > 1 else ctx.copy(parts[0])


@rule("aten.slice_scatter")
def slice_scatter(ctx: LowerCtx, a: Args) -> T:
    x, src = a.self, a.src
    dim = (a.dim or 0) % len(ctx.shape(x))
    start, end, step = slice(a.start, a.end, a.step or 1).indices(ctx.shape(x)[dim])
    if step != 1 or _graph_input(ctx, x):
        return _scatter_strided(ctx, x, src, dim, start, step)
    return _scatter_slice(ctx, x, src, dim, start, end)


def _graph_input(ctx: LowerCtx, x: T) -> bool:
    """True when ``x`` is a user input of the program (the memory an in-place update writes into)."""
    t = ctx.b.tensors.get(x.name)
    return t is not None and t.role == "input"


def _scatter_strided(ctx: LowerCtx, x: T, src: T, dim: int, start: int, step: int) -> T:
    """``x[..., start::step, ...] = src``: one scatter starting from ``x`` (:func:`.scatter.scatter_positions`)."""
    return scatter_positions(ctx, x, src, {dim: (start, step)})


@rule("aten.select_scatter")
def select_scatter(ctx: LowerCtx, a: Args) -> T:
    x, src = a.self, a.src
    dim = a.dim % len(ctx.shape(x))
    i = a.index % ctx.shape(x)[dim]
    shape = list(ctx.shape(src))
    shape.insert(dim, 1)
    src = ctx.reshape(src, shape, suffix="unsqueezed")
    if _graph_input(ctx, x):
        return _scatter_strided(ctx, x, src, dim, i, 1)
    return _scatter_slice(ctx, x, src, dim, i, i + 1)


@rule("aten.copy")
def copy(ctx: LowerCtx, a: Args) -> T:
    src = expand_to(ctx, a.src, ctx.shape(a.self), suffix="expanded")
    src = ctx.cast(src, ctx.dtype(a.self), suffix="cast") if ctx.dtype(src) != ctx.dtype(a.self) else src
    return ctx.copy(src)


@rule("aten.isnan")
def isnan(ctx: LowerCtx, a: Args) -> T:
    return ctx.ew("ne", a.self, a.self, dtype="bool")


@rule("aten.isinf")
def isinf(ctx: LowerCtx, a: Args) -> T:
    return ctx.ew("eq", ctx.ew("abs", a.self, suffix="abs"), float("inf"), dtype="bool")


@rule("aten.frac")
def frac(ctx: LowerCtx, a: Args) -> T:
    return ctx.ew("sub", a.self, ctx.ew("trunc", a.self, suffix="trunc"), dtype=ctx.out_dtype())


@rule("aten.floor_divide")
def floor_divide(ctx: LowerCtx, a: Args) -> T:
    if ctx.out_dtype().startswith(("int", "uint")):
        raise NoLowering("integer floor division")
    return ctx.ew("floor", ctx.ew("div", a.self, a.other, suffix="q"), dtype=ctx.out_dtype())


@rule("aten.addbmm")
def addbmm(ctx: LowerCtx, a: Args) -> T:
    """``beta * self + alpha * sum_b batch1[b] @ batch2[b]``: one contraction over (b, k)."""
    p = matmul(ctx, a.batch1, a.batch2, "bmm")
    s = ctx.reduce(p, [0], False, "add", suffix="sum")
    if float(a.alpha) != 1:
        s = ctx.ew("mul", s, float(a.alpha), suffix="alpha")
    bias = a.self if float(a.beta) == 1 else ctx.ew("mul", a.self, float(a.beta), suffix="beta")
    return ctx.ew("add", bias, s, dtype=ctx.out_dtype())


@rule("aten.im2col")
def im2col(ctx: LowerCtx, a: Args) -> T:
    """``F.unfold``: every window as a column, written [N, C, KH, KW, P, Q] then viewed [N, C*KH*KW, P*Q]."""
    x = a.self
    xs, xr = ctx.shape(x), ctx.ranks(x)
    if len(xs) != 4:
        raise NoLowering("im2col of an unbatched input")
    k, d, p, s = (list(v) for v in (a.kernel_size, a.dilation, a.padding, a.stride))
    osp = [(xs[2 + i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    taken = set(xr)
    ks, outs, idx, border = [], [], list(xr[:2]), {}
    for i, hint in enumerate(("KH", "KW")):
        ks.append(ctx.b.rank(hint, k[i], taken))
        taken.add(ks[-1])
    for i in range(2):
        outs.append(ctx.b.rank(family(xr[2 + i]), osp[i], taken))
        taken.add(outs[-1])
        idx.append(f"{s[i]}*{outs[i]} + {d[i]}*{ks[i]} - {p[i]}")
        over = max(0, s[i] * (osp[i] - 1) + d[i] * (k[i] - 1) - p[i] - (xs[2 + i] - 1))
        if p[i] or over:
            border[xr[2 + i]] = (p[i], over)
    out_ranks = list(xr[:2]) + ks + outs
    cols = ctx.tensor(out_ranks, ctx.dtype(x), "cols")
    ctx.b.copy(cols.name, ctx.op, out_ranks, [access(x.name, idx)], access(cols.name, out_ranks),
               pad={x.name: border} if border else None, location=ctx.location)
    return ctx.reshape(cols, ctx.out_shape())


@rule("aten.outer", "aten.ger")
def outer(ctx: LowerCtx, a: Args) -> T:
    """``outer(x, y)[i, j] = x[i] * y[j]`` (rotary angles: positions times frequencies), one product
    per output element."""
    x, y = a.self, a.vec2
    (n,), (m,) = ctx.shape(x), ctx.shape(y)
    return ctx.ew("mul", ctx.reshape(x, [n, 1], suffix="col"), ctx.reshape(y, [1, m], suffix="row"),
                  dtype=ctx.out_dtype())


@rule("aten._assert_tensor_metadata")
def assert_tensor_metadata(ctx: LowerCtx, a: Args) -> None:
    """torch.export's check of a tensor's dtype/device before a ``.to``: decided when the program is
    traced (shapes and dtypes are fixed), nothing at run time."""
    return None
