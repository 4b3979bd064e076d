"""Pooling 1d-3d: max and average (padding, dilation, ceil_mode, count_include_pad), adaptive.

A pooling window is a reduced rank per spatial dim in the input's index expression,
``x[N, C, s*P + d*R - p]``; the padding is a border filled with ``-inf`` (max) or 0 (avg).
The divisor of an average pool is a constant when every window has the same size, else
it is counted exactly by the same window sum over a tensor of ones.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ...common.builder import access, family
from ..ctx import Args, LowerCtx, T
from ..registry import NoLowering, rule


def _tuple(v: int | Sequence[int] | None, n: int, default: list[int] | None = None) -> list[int]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return list(default) if default is not None else [1] * n
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    return v * n if len(v) == 1 else v


def window(ctx: LowerCtx, x: T, nsp: int, kernel: list[int], stride: list[int], pads: list[int],
           dilation: list[int], osp: list[int], reduce: str, fill: float, suffix: str | None = None,
           dtype: str | None = None) -> T:
    """Reduce windows of the last ``nsp`` dims of ``x`` with ``reduce`` (border value ``fill``)."""
    xs, xr = ctx.shape(x), ctx.ranks(x)
    lead = list(xr[:len(xs) - nsp])
    taken = set(lead)
    outs, ks = [], []
    hints = {1: ["KW"], 2: ["KH", "KW"], 3: ["KD", "KH", "KW"]}.get(nsp, ["KW"] * nsp)
    for i in range(nsp):
        o = ctx.b.rank(family(xr[len(lead) + i]), osp[i], taken)
        taken.add(o)
        outs.append(o)
    for i in range(nsp):
        k = ctx.b.rank(hints[i], kernel[i], taken)
        taken.add(k)
        ks.append(k)
    idx = list(lead)
    border = {}
    for i in range(nsp):
        n = xs[len(lead) + i]
        idx.append(f"{stride[i]}*{outs[i]} + {dilation[i]}*{ks[i]} - {pads[i]}")
        over = max(0, stride[i] * (osp[i] - 1) + dilation[i] * (kernel[i] - 1) - pads[i] - (n - 1))
        if pads[i] or over:
            border[xr[len(lead) + i]] = (pads[i], over)
    out_ranks = lead + outs
    y = ctx.tensor(out_ranks, dtype or ctx.dtype(x), suffix)
    ctx.b.einsum(y.name, ctx.op, out_ranks + ks, [access(x.name, idx)], access(y.name, out_ranks), "identity",
                 reduce, pad={x.name: border} if border else None,
                 fill=fill if border and fill != 0 else None,
                 attrs={"kernel": kernel, "stride": stride, "padding": pads, "dilation": dilation},
                 location=ctx.location)
    return y


def _nsp(ctx: LowerCtx) -> int:
    return int(re.search(r"pool(\d)d", ctx.op).group(1))  # type: ignore[union-attr]


@rule("aten.max_pool1d", "aten.max_pool2d", "aten.max_pool3d", "aten.max_pool2d_with_indices",
      "aten.max_pool3d_with_indices", "aten.max_pool1d_with_indices")
def max_pool(ctx: LowerCtx, a: Args) -> T | tuple:
    nsp = _nsp(ctx)
    kernel = _tuple(a.kernel_size, nsp)
    stride = _tuple(a.stride, nsp, kernel)
    pads, dil = _tuple(a.padding, nsp, [0] * nsp), _tuple(a.dilation, nsp)
    with_idx = "indices" in ctx.op
    osp = list(ctx.out_shape(0 if with_idx else None)[-nsp:])
    y = window(ctx, a.self, nsp, kernel, stride, pads, dil, osp, "max", float("-inf"))
    if with_idx:
        users = [u for u in ctx.node.users if u.args[1] == 1 and u.users]
        if users:
            raise NoLowering("max pool indices are used (flat window index has no einsum form)")
        return y, None
    return y


def _avg(ctx: LowerCtx, x: T, nsp: int, kernel: list[int], stride: list[int], pads: list[int],
         ceil_mode: bool, count_include_pad: bool, divisor: int | None, osp: list[int]) -> T:
    xs = ctx.shape(x)
    dt = ctx.out_dtype()
    s = window(ctx, x, nsp, kernel, stride, pads, [1] * nsp, osp, "add", 0.0, suffix="sum")
    if divisor:
        return ctx.ew("mul", s, 1.0 / divisor, dtype=dt)
    counts = _counts(xs[-nsp:], kernel, stride, pads, osp, count_include_pad)
    if np.all(counts == counts.flat[0]):
        return ctx.ew("mul", s, 1.0 / float(counts.flat[0]), dtype=dt)
    sp = list(xs[-nsp:]) if not count_include_pad else [n + 2 * p for n, p in zip(xs[-nsp:], pads, strict=True)]
    ones_r = ctx.b.new_ranks([family(r) for r in ctx.ranks(x)[-nsp:]], sp)
    ones = T(ctx.b.tensor(f"{ctx.name}.ones", ones_r, dt, "constant", 1.0))
    shifted = [0] * nsp if count_include_pad else pads
    c = window(ctx, ones, nsp, kernel, stride, shifted, [1] * nsp, osp, "add", 0.0, suffix="count")
    return ctx.ew("div", s, c, dtype=dt)


def _counts(sp: Sequence[int], kernel: list[int], stride: list[int], pads: list[int], osp: list[int],
            include_pad: bool) -> np.ndarray:
    """The number of elements each window averages over (torch's rule)."""
    per_dim = []
    for n, k, s, p, o in zip(sp, kernel, stride, pads, osp, strict=True):
        c = []
        for i in range(o):
            start = i * s - p
            end = min(start + k, n + p)
            if not include_pad:
                start, end = max(start, 0), min(end, n)
            c.append(end - start)
        per_dim.append(np.array(c))
    out = per_dim[0]
    for c in per_dim[1:]:
        out = np.multiply.outer(out, c)
    return out


@rule("aten.avg_pool1d", "aten.avg_pool2d", "aten.avg_pool3d")
def avg_pool(ctx: LowerCtx, a: Args) -> T:
    nsp = _nsp(ctx)
    kernel = _tuple(a.kernel_size, nsp)
    stride = _tuple(a.stride, nsp, kernel)
    pads = _tuple(a.padding, nsp, [0] * nsp)
    osp = list(ctx.out_shape()[-nsp:])
    return _avg(ctx, a.self, nsp, kernel, stride, pads, bool(a.ceil_mode), bool(a.count_include_pad),
                a.divisor_override, osp)


def _adaptive_kernel(ctx: LowerCtx, x: T, nsp: int, osp: list[int]) -> list[int] | None:
    """The uniform window of an adaptive pool, or None when output sizes do not divide inputs."""
    sp = ctx.shape(x)[-nsp:]
    if any(n % o for n, o in zip(sp, osp, strict=True)):
        return None
    return [n // o for n, o in zip(sp, osp, strict=True)]


def _adaptive_uneven(ctx: LowerCtx, x: T, nsp: int, osp: list[int], reduce: str) -> T:
    """Adaptive pooling with windows of varying size, one spatial dim at a time (it is separable).

    Window ``o`` spans ``[floor(o*n/m), ceil((o+1)*n/m))``: a gather ``x[..., @idx]`` of the
    widest window (``idx[o, r]`` clamped into range), a select that blanks taps past the window
    (0 for avg, -inf for max), a reduction over the taps, and for avg a division by the width.
    """
    from ....affine import Access, Indirect
    from ...common.builder import expr

    dt = ctx.out_dtype(0) if reduce == "max" else ctx.out_dtype()
    nd = len(ctx.shape(x))
    for i in range(nsp):
        d = nd - nsp + i
        n, m = ctx.shape(x)[d], osp[i]
        if n == m:
            continue
        starts = [(o * n) // m for o in range(m)]
        ends = [-((-(o + 1) * n) // m) for o in range(m)]
        kmax = max(e - s for s, e in zip(starts, ends, strict=True))
        xr = ctx.ranks(x)
        o_r = ctx.b.rank(family(xr[d]), m, xr)
        k_r = ctx.b.rank("KW", kmax, set(xr) | {o_r})
        idx = np.array([[min(s + r, n - 1) for r in range(kmax)] for s in starts], dtype=np.int64)
        valid = np.array([[r < e - s for r in range(kmax)] for s, e in zip(starts, ends, strict=True)])
        it = ctx.index_table(idx, [o_r, k_r], "int64", suffix=f"d{i}.index", key=("adaptive", n, m))
        mask = ctx.index_table(valid, [o_r, k_r], "bool", suffix=f"d{i}.valid", key=("adaptive_mask", n, m))
        g_ranks = list(xr[:d]) + [o_r, k_r] + list(xr[d + 1:])
        g = ctx.tensor(g_ranks, ctx.dtype(x), f"d{i}.windows")
        x_idx = tuple(expr(r) for r in xr[:d]) + (Indirect(it.name),) + tuple(expr(r) for r in xr[d + 1:])
        ctx.b.copy(g.name, ctx.op, g_ranks, [Access(x.name, x_idx), access(it.name, [o_r, k_r])],
                   access(g.name, g_ranks), location=ctx.location)
        mask_b = ctx.reshape(mask, [m, kmax] + [1] * (nd - d - 1), suffix=f"d{i}.valid_b") if d < nd - 1 else mask
        fill = float("-inf") if reduce == "max" else 0.0
        gm = ctx.ew("where", mask_b, g, fill, suffix=f"d{i}.masked")
        red = ctx.reduce(gm, [d + 1], False, reduce, suffix=f"d{i}.reduced" if reduce != "max" or i < nsp - 1
                         else None, dtype=dt)
        if reduce == "add":
            widths = np.array([e - s for s, e in zip(starts, ends, strict=True)], dtype=np.float32)
            inv = ctx.index_table((1.0 / widths).reshape([m] + [1] * (nd - d - 1)),
                           [o_r] + list(ctx.b.new_ranks(["U"] * (nd - d - 1), [1] * (nd - d - 1), {o_r})),
                           dt, suffix=f"d{i}.inv_width", key=("adaptive_inv", n, m))
            red = ctx.ew("mul", red, inv, dtype=dt, suffix=None if i == nsp - 1 else f"d{i}.avg")
        x = red
    return x


@rule("aten.adaptive_avg_pool1d", "aten.adaptive_avg_pool2d", "aten.adaptive_avg_pool3d",
      "aten._adaptive_avg_pool2d", "aten._adaptive_avg_pool3d")
def adaptive_avg_pool(ctx: LowerCtx, a: Args) -> T:
    nsp = _nsp(ctx)
    osp = list(ctx.out_shape()[-nsp:])
    k = _adaptive_kernel(ctx, a.self, nsp, osp)
    if k is None:
        return _adaptive_uneven(ctx, a.self, nsp, osp, "add")
    return _avg(ctx, a.self, nsp, k, k, [0] * nsp, False, True, None, osp)


@rule("aten.adaptive_max_pool1d", "aten.adaptive_max_pool2d", "aten.adaptive_max_pool3d")
def adaptive_max_pool(ctx: LowerCtx, a: Args) -> tuple:
    nsp = _nsp(ctx)
    osp = list(ctx.out_shape(0)[-nsp:])
    k = _adaptive_kernel(ctx, a.self, nsp, osp)
    users = [u for u in ctx.node.users if u.args[1] == 1 and u.users]
    if users:
        raise NoLowering("adaptive max pool indices are used")
    if k is None:
        return _adaptive_uneven(ctx, a.self, nsp, osp, "max"), None
    return window(ctx, a.self, nsp, k, k, [0] * nsp, [1] * nsp, osp, "max", float("-inf")), None
