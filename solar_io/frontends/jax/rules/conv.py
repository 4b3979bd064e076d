"""Convolutions (``conv_general_dilated``: feature groups, batch groups, negative padding) and pooling
windows (``reduce_window_*``)."""

from __future__ import annotations

from typing import Any

from ...common.builder import access, family
from ..lower import Lowerer, Operand
from ..registry import NoLowering, rule
from .conv_transpose import bind_image, conv_lhs_dilated, image_family, output_ranks
from .helpers import reshape


@rule("conv_general_dilated")
def conv(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    p = eqn.params
    x, w = ins
    if not (isinstance(x, str) and isinstance(w, str)):
        raise NoLowering("scalar operand")
    if any(d != 1 for d in p["lhs_dilation"]):
        return [conv_lhs_dilated(ctx, eqn, x, w)]
    if p["batch_group_count"] != 1:
        return [_batch_grouped(ctx, eqn, x, w)]
    lhs, rhs, osp = p["dimension_numbers"]
    bind_image(ctx, x, lhs)
    groups = p["feature_group_count"]
    xs, ws = ctx.shape(x), ctx.shape(w)
    nsp = len(xs) - 2
    xr = ctx.ranks(x)
    oshape = ctx.out_shape()
    strides, dil, pads = p["window_strides"], p["rhs_dilation"], p["padding"]
    k_out, cg = ws[rhs[0]], ws[rhs[1]]
    ksz = [ws[rhs[2 + i]] for i in range(nsp)]
    hints: list[str | None] = [None] * len(ws)
    hints[rhs[0]] = image_family(xr, lhs, 1) + "*"
    hints[rhs[1]] = xr[lhs[1]] if groups == 1 else "C*"
    for i in range(nsp):
        hints[rhs[2 + i]] = ["KD", "KH", "KW"][3 - nsp + i] if nsp <= 3 else "K*"
    ctx.b.bind(w, hints)
    wr = ctx.ranks(w)
    N = xr[lhs[0]]
    taken = {N}
    outs = []
    for i in range(nsp):
        r = ctx.b.rank(image_family(xr, lhs, 2 + i), oshape[osp[2 + i]], taken)
        taken.add(r)
        outs.append(r)
    if groups == 1:
        kr = ctx.b.distinct([wr[rhs[0]]], taken)[0]
        head = [kr]
    else:
        g = ctx.b.rank("G", groups, taken)
        kg = ctx.b.rank(family(wr[rhs[0]]), k_out // groups, taken | {g})
        head = [g, kg]
    taken.update(head)
    cr = ctx.b.distinct([wr[rhs[1]]], taken)[0]
    taken.add(cr)
    kdims = list(ctx.b.distinct([wr[rhs[2 + i]] for i in range(nsp)], taken))
    x_idx: list[str] = [""] * len(xs)
    x_idx[lhs[0]] = N
    x_idx[lhs[1]] = cr if groups == 1 else f"{cg}*{head[0]} + {cr}"
    border: dict[str, tuple[int, int]] = {}
    for i in range(nsp):
        s, d, (lo, _hi) = strides[i], dil[i], pads[i]
        # a negative pad crops: the window starts -lo elements in, or never reaches the last ones
        x_idx[lhs[2 + i]] = f"{s}*{outs[i]} + {d}*{kdims[i]} " + (f"- {lo}" if lo >= 0 else f"+ {-lo}")
        reach_hi = s * (oshape[osp[2 + i]] - 1) + d * (ksz[i] - 1) - lo
        over = max(0, reach_hi - (xs[lhs[2 + i]] - 1))
        if lo > 0 or over:
            border[xr[lhs[2 + i]]] = (max(lo, 0), over)
    w_idx: list[str] = [""] * len(ws)
    w_idx[rhs[0]] = head[0] if groups == 1 else f"{k_out // groups}*{head[0]} + {head[1]}"
    w_idx[rhs[1]] = cr
    for i in range(nsp):
        w_idx[rhs[2 + i]] = kdims[i]
    # output ranks in the output layout; the feature dim is (G, Kg) when grouped
    out_ranks = output_ranks(osp, N, list(head), lambda i: [outs[i]])
    attrs = {"stride": [int(v) for v in strides], "padding": [int(q[0]) for q in pads],
             "dilation": [int(v) for v in dil], "groups": int(groups)}
    y = ctx.tensor(out_ranks, ctx.out_dtype(), "grouped" if groups != 1 else None)
    ctx.b.einsum(y, ctx.op, out_ranks + [cr] + kdims, [access(x, x_idx), access(w, w_idx)], access(y, out_ranks),
                 "mul", "add", pad={x: border} if border else None, attrs=attrs, location=ctx.location)
    if groups != 1:
        y = reshape(ctx, y, oshape)
    return [y]


def _batch_grouped(ctx: Lowerer, eqn: Any, x: str, w: str) -> str:
    """``batch_group_count = G`` (the weight gradient of a grouped or depthwise convolution): the input's
    batch dim splits into G blocks of ``B/G``, the kernel's output features into G blocks of ``K/G``, and
    block g of the features reads block g of the batch only::

        out[b, (K/G)*g + kg, O..] = sum_{c, Kw..} x[(B/G)*g + b, c, s*O + d*Kw - lo] w[(K/G)*g + kg, c, Kw..]

    one einsum over ``(b, g, kg, O.., c, Kw..)``, its output's feature dim as ``(g, kg)`` then viewed whole.
    """
    p = eqn.params
    groups = p["batch_group_count"]
    if p["feature_group_count"] != 1:
        raise NoLowering("batch and feature groups together")
    lhs, rhs, osp = p["dimension_numbers"]
    bind_image(ctx, x, lhs)
    xs, ws, oshape = ctx.shape(x), ctx.shape(w), ctx.out_shape()
    nsp = len(xs) - 2
    batch, k_out = xs[lhs[0]], ws[rhs[0]]
    if batch % groups or k_out % groups:
        raise NoLowering("batch or output features not divisible by batch_group_count")
    xr = ctx.ranks(x)
    hints: list[str | None] = [None] * len(ws)
    hints[rhs[0]], hints[rhs[1]] = image_family(xr, lhs, 1) + "*", xr[lhs[1]]
    for i in range(nsp):
        hints[rhs[2 + i]] = ["KD", "KH", "KW"][3 - nsp + i] if nsp <= 3 else "K*"
    ctx.b.bind(w, hints)
    wr = ctx.ranks(w)
    taken: set[str] = set()

    def new(fam: str, size: int) -> str:
        r = ctx.b.rank(fam, size, taken)
        taken.add(r)
        return r

    b_r, g_r = new(family(xr[lhs[0]]), batch // groups), new("G", groups)
    kg_r = new(family(wr[rhs[0]]), k_out // groups)
    outs = [new(image_family(xr, lhs, 2 + i), oshape[osp[2 + i]]) for i in range(nsp)]
    cr = new(family(xr[lhs[1]]), xs[lhs[1]])
    kdims = [new(family(wr[rhs[2 + i]]), ws[rhs[2 + i]]) for i in range(nsp)]
    x_idx: list[str] = [""] * len(xs)
    x_idx[lhs[0]], x_idx[lhs[1]] = f"{batch // groups}*{g_r} + {b_r}", cr
    border: dict[str, tuple[int, int]] = {}
    for i in range(nsp):
        s, d, (lo, _hi) = p["window_strides"][i], p["rhs_dilation"][i], p["padding"][i]
        x_idx[lhs[2 + i]] = f"{s}*{outs[i]} + {d}*{kdims[i]} " + (f"- {lo}" if lo >= 0 else f"+ {-lo}")
        reach_hi = s * (oshape[osp[2 + i]] - 1) + d * (ws[rhs[2 + i]] - 1) - lo
        over = max(0, reach_hi - (xs[lhs[2 + i]] - 1))
        if lo > 0 or over:
            border[xr[lhs[2 + i]]] = (max(lo, 0), over)
    w_idx: list[str] = [""] * len(ws)
    w_idx[rhs[0]], w_idx[rhs[1]] = f"{k_out // groups}*{g_r} + {kg_r}", cr
    for i in range(nsp):
        w_idx[rhs[2 + i]] = kdims[i]
    out_ranks = output_ranks(osp, b_r, [g_r, kg_r], lambda i: [outs[i]])
    y = ctx.tensor(out_ranks, ctx.out_dtype(), "batch_grouped")
    ctx.b.einsum(y, ctx.op, out_ranks + [cr] + kdims, [access(x, x_idx), access(w, w_idx)], access(y, out_ranks),
                 "mul", "add", pad={x: border} if border else None,
                 attrs={"stride": [int(v) for v in p["window_strides"]], "batch_groups": int(groups)},
                 location=ctx.location)
    return reshape(ctx, y, oshape)


@rule("reduce_window_sum", "reduce_window_max", "reduce_window_min")
def reduce_window(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    p = eqn.params
    x = ins[0]
    if any(d != 1 for d in p["base_dilation"]):
        raise NoLowering("base dilation")
    red = {"reduce_window_sum": "add", "reduce_window_max": "max", "reduce_window_min": "min"}[eqn.primitive.name]
    fill = {"add": 0.0, "max": float("-inf"), "min": float("inf")}[red]
    xr, xs = ctx.ranks(x), ctx.shape(x)
    shape = ctx.out_shape()
    win, strides, dil, pads = p["window_dimensions"], p["window_strides"], p["window_dilation"], p["padding"]
    out_ranks: list[str] = []
    wins: list[str] = []
    idx: list[str] = []
    border: dict[str, tuple[int, int]] = {}
    taken: set[str] = set()
    for i in range(len(xs)):
        lo = pads[i][0]
        if win[i] == 1 and strides[i] == 1 and lo == 0 and pads[i][1] == 0:
            out_ranks.append(xr[i])
            taken.add(xr[i])
            idx.append(xr[i])
            continue
        o = ctx.b.rank(family(xr[i]), shape[i], taken | set(xr))
        taken.add(o)
        out_ranks.append(o)
        k = ctx.b.rank("R", win[i], taken | set(xr))
        taken.add(k)
        wins.append(k)
        idx.append(f"{strides[i]}*{o} + {dil[i]}*{k} - {lo}")
        over = max(0, strides[i] * (shape[i] - 1) + dil[i] * (win[i] - 1) - lo - (xs[i] - 1))
        if lo or over:
            border[xr[i]] = (lo, over)
    out = ctx.tensor(out_ranks, ctx.out_dtype())
    ctx.b.einsum(out, ctx.op, out_ranks + wins, [access(x, idx)], access(out, out_ranks), "identity", red,
                 pad={x: border} if border else None, fill=fill if border and fill != 0 else None,
                 attrs={"window": [int(v) for v in win], "stride": [int(v) for v in strides]}, location=ctx.location)
    return [out]
