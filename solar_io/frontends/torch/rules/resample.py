"""Upsampling (nearest and (bi/tri)linear).

Nearest upsampling is one gather: ``x[N, C, @ih, @iw]`` with constant source-index tensors
per spatial dim (exact for any scale). Linear upsampling is separable: per spatial dim, two
gathers (the lower and upper source rows) and ``lo * (1 - t) + hi * t`` with constant weights,
the source coordinates computed as PyTorch does (``align_corners``, explicit scales).
"""

from __future__ import annotations

import numpy as np

from ....affine import Access, Indirect
from ...common.builder import access, expr, family
from ..ctx import Args, LowerCtx, T
from ..registry import NoLowering, rule


def _scales(a: Args, nsp: int) -> list[float | None]:
    """The explicit scale factor of each spatial dim (None: derived from the sizes)."""
    if a.scale_factors is not None:
        s = list(a.scale_factors)
    else:
        names = {1: ["scales"], 2: ["scales_h", "scales_w"], 3: ["scales_d", "scales_h", "scales_w"]}[nsp]
        s = [getattr(a, n) for n in names]
    return s if len(s) == nsp else [None] * nsp


def _gather_dim(ctx: LowerCtx, x: T, dim: int, src: np.ndarray, suffix: str) -> T:
    """``x`` with dim ``dim`` replaced by ``x[..., src[o], ...]`` (a constant index tensor)."""
    xs, xr = ctx.shape(x), ctx.ranks(x)
    o = ctx.b.rank(family(xr[dim]), len(src), xr)
    idx = ctx.index_table(src.astype(np.int64), [o], "int64", suffix=f"{suffix}_index", key=("resample", tuple(src)))
    out_ranks = list(xr)
    out_ranks[dim] = o
    x_idx = tuple(expr(r) if i != dim else Indirect(idx.name) for i, r in enumerate(xr))
    y = ctx.tensor(out_ranks, ctx.dtype(x), suffix)
    ctx.b.copy(y.name, ctx.op, out_ranks, [Access(x.name, x_idx), access(idx.name, [o])], access(y.name, out_ranks),
               location=ctx.location)
    del xs
    return y


def _nearest_index(n_in: int, n_out: int, scale: float | None, exact: bool) -> np.ndarray:
    s = (1.0 / scale) if scale else n_in / n_out
    o = np.arange(n_out, dtype=np.float64)
    src = np.floor((o + 0.5) * s) if exact else np.floor(o * np.float32(s))
    return np.minimum(src, n_in - 1).astype(np.int64)


@rule("aten.upsample_nearest1d", "aten.upsample_nearest2d", "aten.upsample_nearest3d",
      "aten._upsample_nearest_exact1d", "aten._upsample_nearest_exact2d", "aten._upsample_nearest_exact3d")
def upsample_nearest(ctx: LowerCtx, a: Args) -> T:
    x = a.input if a.input is not None else a.self
    nsp = int(ctx.op[-2])
    osp = list(ctx.out_shape()[-nsp:])
    scales = _scales(a, nsp)
    exact = "exact" in ctx.op
    nd = len(ctx.shape(x))
    for i in range(nsp):
        d = nd - nsp + i
        n_in = ctx.shape(x)[d]
        if n_in == osp[i]:
            continue
        x = _gather_dim(ctx, x, d, _nearest_index(n_in, osp[i], scales[i], exact),
                        "up" if i < nsp - 1 else None)  # type: ignore[arg-type]
    return x


def _linear_coords(n_in: int, n_out: int, align: bool, scale: float | None) -> tuple[np.ndarray, np.ndarray,
                                                                                      np.ndarray]:
    o = np.arange(n_out, dtype=np.float32)
    if align:
        s = np.float32((n_in - 1) / (n_out - 1)) if n_out > 1 else np.float32(0)
        src = o * s
    else:
        s = np.float32(1.0 / scale) if scale else np.float32(n_in / n_out)
        src = np.maximum((o + np.float32(0.5)) * s - np.float32(0.5), 0)
    lo = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    hi = np.minimum(lo + 1, n_in - 1)
    t = (src - lo).astype(np.float32)
    return lo, hi, t


@rule("aten.upsample_linear1d", "aten.upsample_bilinear2d", "aten.upsample_trilinear3d")
def upsample_linear(ctx: LowerCtx, a: Args) -> T:
    x = a.input if a.input is not None else a.self
    nsp = int(ctx.op[-2])
    osp = list(ctx.out_shape()[-nsp:])
    scales = _scales(a, nsp)
    nd = len(ctx.shape(x))
    if a.align_corners is None:
        raise NoLowering("linear upsampling without align_corners")
    for i in range(nsp):
        d = nd - nsp + i
        n_in = ctx.shape(x)[d]
        if n_in == osp[i] and not a.align_corners:
            continue
        lo, hi, t = _linear_coords(n_in, osp[i], bool(a.align_corners), scales[i])
        x = _lerp_dim(ctx, x, d, lo, hi, t, f"d{i}", i == nsp - 1)
    return x


def _lerp_dim(ctx: LowerCtx, x: T, d: int, lo: np.ndarray, hi: np.ndarray, t: np.ndarray, tag: str,
              last: bool) -> T:
    glo = _gather_dim(ctx, x, d, lo, f"{tag}.lo")
    ghi = _gather_dim(ctx, x, d, hi, f"{tag}.hi")
    r = ctx.ranks(glo)[d]
    nd = len(ctx.shape(x))
    shape = [len(t)] + [1] * (nd - d - 1)
    w_hi = ctx.index_table(t.reshape(shape), [r] + list(ctx.b.new_ranks(["U"] * (nd - d - 1), [1] * (nd - d - 1), {r})),
                    ctx.dtype(x), suffix=f"{tag}.w", key=("lerp", tuple(t)))
    diff = ctx.ew("sub", ghi, glo, suffix=f"{tag}.diff")
    step = ctx.ew("mul", diff, w_hi, suffix=f"{tag}.step")
    return ctx.ew("add", glo, step, dtype=ctx.out_dtype(), suffix=None if last else f"{tag}.out")
