"""``aten._scaled_mm`` in its NVFP4 form: a block-scaled fp4 GEMM (:mod:`..nvfp4` holds the formula).

The node set is the dequantisation the precision policy recognises (``backends/roofline/chains.py``)
followed by one contraction, all of one source op (one kernel):

    >>> # a: uint8 [M, K/2] (packed fp4 as bytes), scale_a: fp8_e4m3 [M*K/16] (blocked layout)
    >>> # codes  a % 16, a / 16                  (uint8; low nibble = even k)
    >>> # values e2m1[@codes] (a generated 16-entry table), stacked -> [M, K/2, 2] -> [M, K]
    >>> # scales scale_a viewed [M/128, K/64, 32, 4, 4], permuted, copied to [M, K/16], cast to fp32
    >>> # a_deq  values[M, K/16, 16] * scales[M, K/16, 1];  the same for b [K/2, N] along its dim 0
    >>> # out    a_deq @ b_deq (fp32) [* scale_result] [+ bias] -> out_dtype

so the contraction is priced at the chip's fp4 rate (dequant ``fp4_e2m1 -> fp4``, scale bytes
counted) and its kernel moves the packed operands (``M*K/2``, ``N*K/2`` bytes), the scales
(``M*K/16``, ``N*K/16`` bytes) and the output. Any other ``_scaled_mm`` (fp8 tensor-wise or row-wise
scales) has no rule yet: opaque, listed.
"""

from __future__ import annotations

import numpy as np

from ....affine import Access, Indirect
from ...common.builder import access
from ..ctx import Args, LowerCtx, T
from ..nvfp4 import BLOCK, E2M1, TILE
from ..registry import NoLowering, rule
from .matmul import matmul
from .shape import concat


def _table(ctx: LowerCtx) -> T:
    return ctx.index_table(np.array(E2M1, np.float32), [ctx.b.rank("C", len(E2M1))], "fp32", suffix="e2m1",
                           key=("e2m1",))


def _values(ctx: LowerCtx, packed: T, dim: int, name: str) -> T:
    """fp32 values of packed fp4 bytes ``[.., K/2 (dim), ..]`` as ``[.., K, ..]``."""
    table = _table(ctx)
    parts = []
    for half, op in (("lo", "remainder"), ("hi", "div")):
        codes = ctx.ew(op, packed, 16, dtype="uint8", suffix=f"{name}.{half}_codes")
        ranks = list(ctx.ranks(codes))
        v = ctx.tensor(ranks, "fp32", suffix=f"{name}.{half}")
        ctx.b.copy(v.name, ctx.op, ranks, [Access(table.name, (Indirect(codes.name),)), access(codes.name, ranks)],
                   access(v.name, ranks), location=ctx.location)
        shape = list(ctx.shape(v))
        shape.insert(dim + 1, 1)
        parts.append(ctx.reshape(v, shape, suffix=f"{name}.{half}_u"))
    pairs = concat(ctx, parts, dim + 1, suffix=f"{name}.pairs")
    shape = list(ctx.shape(packed))
    shape[dim] *= 2
    return ctx.reshape(pairs, shape, suffix=f"{name}.values")


def _scales(ctx: LowerCtx, flat: T, rows: int, cols: int, name: str) -> T:
    """The fp32 ``[rows, cols]`` scale matrix of a flat e4m3 tensor in the blocked layout."""
    tiled = ctx.reshape(flat, [rows // TILE[0], cols // TILE[1], 32, 4, TILE[1]], suffix=f"{name}.tiles")
    rowmajor = ctx.permute(tiled, [0, 3, 2, 1, 4], suffix=f"{name}.unblocked")
    return ctx.cast(ctx.reshape(rowmajor, [rows, cols], suffix=f"{name}.matrix"), "fp32", suffix=f"{name}.fp32")


def _dequant(ctx: LowerCtx, packed: T, flat_scale: T, dim: int, name: str) -> T:
    """``values * scale`` of one operand, its 16-element blocks along ``dim`` (0 or 1 of a matrix)."""
    vals = _values(ctx, packed, dim, name)
    shape = list(ctx.shape(vals))
    k, rows = shape[dim], shape[1 - dim]
    scale = _scales(ctx, flat_scale, rows, k // BLOCK, name)  # [rows, K/16]
    if dim == 0:
        scale = ctx.permute(scale, [1, 0], suffix=f"{name}.scale_t")  # [K/16, rows]
    blocks = shape[:dim] + [k // BLOCK, BLOCK] + shape[dim + 1:]
    sshape = list(ctx.shape(scale))
    sshape.insert(dim + 1, 1)
    s = ctx.reshape(scale, sshape, suffix=f"{name}.scale_b")
    deq = ctx.ew("mul", ctx.reshape(vals, blocks, suffix=f"{name}.blocks"), s, dtype="fp32", suffix=f"{name}.deq")
    return ctx.reshape(deq, shape, suffix=f"{name}.dequantised")


@rule("aten._scaled_mm")
def scaled_mm(ctx: LowerCtx, a: Args) -> T:
    x, w = a.self, a.mat2
    if not (ctx.dtype(x) == ctx.dtype(w) == "uint8" and ctx.dtype(a.scale_a) == ctx.dtype(a.scale_b) == "fp8_e4m3"):
        raise NoLowering("_scaled_mm other than NVFP4 (two packed fp4 operands, 1x16 e4m3 block scales)")
    (m, half), (half_b, n) = ctx.shape(x), ctx.shape(w)
    k = 2 * half
    fits = half == half_b and k % BLOCK == 0 and (k // BLOCK) % TILE[1] == 0 and m % TILE[0] == 0 \
        and n % TILE[0] == 0 and ctx.b.numel(a.scale_a.name) == m * k // BLOCK \
        and ctx.b.numel(a.scale_b.name) == n * k // BLOCK
    if not fits:
        raise NoLowering("NVFP4 _scaled_mm whose scales are not M*K/16 and N*K/16 in the blocked layout "
                         "(M, N multiples of 128, K of 64)")
    out_dtype = ctx.out_dtype()
    if not out_dtype.startswith(("fp", "bf")) or out_dtype == "fp4_e2m1":
        raise NoLowering(f"NVFP4 _scaled_mm with out_dtype {out_dtype}")
    out = matmul(ctx, _dequant(ctx, x, a.scale_a, 1, "a"), _dequant(ctx, w, a.scale_b, 0, "b"), "mm")
    if a.scale_result is not None:
        out = ctx.ew("mul", out, ctx.cast(a.scale_result, "fp32", suffix="scale_result"), dtype="fp32",
                     suffix="scaled")
    if a.bias is not None:
        out = ctx.ew("add", out, a.bias, dtype="fp32", suffix="bias")
    return ctx.cast(out, out_dtype)
