"""Convolutions 1d/2d/3d: strided, dilated, padded, grouped, depthwise, and transposed.

A forward convolution is one contraction with the window in the input's index expressions,
``x[N, C, s*P + d*R - p]``, the padding a declared border. With ``groups`` the channels
split into ``G`` ranks: the output is written as ``[N, G, Kg, ...]`` and reshaped (a view).

A transposed convolution is a contraction onto ``z[N, K, I, R]`` (every input point times
every tap: the MACs ``FlopCounterMode`` counts) followed by *col2im*, which adds the taps
that land on each output point: for stride 1 ``y[O] = sum_R z[O + p - d*R, R]``; for stride
``s > 1`` (dilation 1) the taps are split into phases ``R = s*R1 + R0`` so that
``y'[A, R0] = sum_R1 z[A - R1, s*R1 + R0]`` and ``y = y'.reshape(A*s)[p : p + O]``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...common.builder import access, family
from ..ctx import Args, LowerCtx, T
from ..registry import NoLowering, rule

_KHINTS = {1: ["KW"], 2: ["KH", "KW"], 3: ["KD", "KH", "KW"]}


def _tuple(v: int | Sequence[int], n: int) -> list[int]:
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    return v * n if len(v) == 1 else v


def conv(ctx: LowerCtx, x: T, w: T, bias: T | None, stride: Sequence[int], padding: Sequence[int] | str,
         dilation: Sequence[int], groups: int, out_shape: Sequence[int]) -> T:
    """A forward convolution (see the module docstring)."""
    xs, xr = ctx.shape(x), ctx.ranks(x)
    nsp = len(xs) - 2
    if nsp < 1:
        raise NoLowering("convolution of an unbatched input")
    ws = ctx.shape(w)
    k_out, cg, ksz = ws[0], ws[1], list(ws[2:])
    stride, dilation = _tuple(stride, nsp), _tuple(dilation, nsp)
    if isinstance(padding, str):
        if padding == "valid":
            pads = [(0, 0)] * nsp
        else:  # same
            pads = []
            for d, k in zip(dilation, ksz, strict=True):
                tot = d * (k - 1)
                pads.append((tot // 2, tot - tot // 2))
    else:
        pads = [(p, p) for p in _tuple(padding, nsp)]
    ctx.b.bind(w.name, [family(xr[1]) + "*", xr[1] if groups == 1 else "C*"] + _KHINTS.get(nsp, ["KW"] * nsp))
    wr = ctx.ranks(w)
    osp = list(out_shape[2:])
    N = xr[0]
    taken = {N}
    outs = []
    for i in range(nsp):
        r = ctx.b.rank(family(xr[2 + i]), osp[i], taken)
        taken.add(r)
        outs.append(r)
    if groups == 1:
        kr = ctx.b.distinct([wr[0]], taken)[0]
        taken.add(kr)
        head = [kr]
    else:
        g = ctx.b.rank("G", groups, taken)
        taken.add(g)
        kg = ctx.b.rank(family(wr[0]), k_out // groups, taken)
        taken.add(kg)
        head = [g, kg]
    cr = ctx.b.distinct([wr[1]], taken)[0]
    taken.add(cr)
    kdims = list(ctx.b.distinct(list(wr[2:]), taken))
    x_idx: list[str] = [N, cr if groups == 1 else f"{cg}*{head[0]} + {cr}"]
    border: dict[str, tuple[int, int]] = {}
    for i in range(nsp):
        s, d, (lo, _hi) = stride[i], dilation[i], pads[i]
        x_idx.append(f"{s}*{outs[i]} + {d}*{kdims[i]} - {lo}")
        reach_hi = s * (osp[i] - 1) + d * (ksz[i] - 1) - lo
        over = max(0, reach_hi - (xs[2 + i] - 1))
        if lo or over:
            border[xr[2 + i]] = (lo, over)
    w_idx = [head[0] if groups == 1 else f"{k_out // groups}*{head[0]} + {head[1]}", cr] + kdims
    out_ranks = [N] + head + outs
    attrs = {"stride": stride, "padding": [p[0] for p in pads], "dilation": dilation, "groups": groups}
    y = ctx.tensor(out_ranks, ctx.out_dtype(), "conv" if (groups != 1 or bias is not None) else None)
    ctx.b.einsum(y.name, ctx.op, out_ranks + [cr] + kdims, [access(x.name, x_idx), access(w.name, w_idx)],
                 access(y.name, out_ranks), "mul", "add", pad={x.name: border} if border else None,
                 attrs=attrs, location=ctx.location)
    if groups != 1:
        y = ctx.reshape(y, list(out_shape), suffix="ungrouped" if bias is not None else None)
    return _bias(ctx, y, bias)


def _bias(ctx: LowerCtx, y: T, bias: T | None) -> T:
    if bias is None:
        return y
    yr = ctx.ranks(y)
    ctx.b.bind(bias.name, [yr[1]])
    tail = len(yr) - 2
    b = ctx.reshape(bias, [ctx.shape(bias)[0]] + [1] * tail, suffix="bias") if tail else bias
    return ctx.ew("add", y, b, dtype=ctx.out_dtype())


def conv_transpose(ctx: LowerCtx, x: T, w: T, bias: T | None, stride: Sequence[int], padding: Sequence[int],
                   output_padding: Sequence[int], dilation: Sequence[int], groups: int,
                   out_shape: Sequence[int]) -> T:
    """A transposed convolution (see the module docstring)."""
    xs, xr = ctx.shape(x), ctx.ranks(x)
    nsp = len(xs) - 2
    ws = ctx.shape(w)
    cg, ksz = ws[0] // groups, list(ws[2:])
    stride, dilation = _tuple(stride, nsp), _tuple(dilation, nsp)
    pads = _tuple(padding, nsp)
    ctx.b.bind(w.name, [xr[1] if groups == 1 else "C*", family(xr[1]) + "*"] + _KHINTS.get(nsp, ["KW"] * nsp))
    wr = ctx.ranks(w)
    N = xr[0]
    taken = {N} | set(xr[2:])
    if groups == 1:
        head = [ctx.b.distinct([wr[1]], taken)[0]]
    else:
        g = ctx.b.rank("G", groups, taken)
        head = [g, ctx.b.distinct([wr[1]], taken | {g})[0]]
    taken |= set(head)
    cr = ctx.b.rank(family(xr[1]), cg, taken)
    taken.add(cr)
    kdims = list(ctx.b.distinct(list(wr[2:]), taken))
    taken |= set(kdims)
    x_idx = [N, cr if groups == 1 else f"{cg}*{head[0]} + {cr}"] + list(xr[2:])
    w_idx = [cr if groups == 1 else f"{cg}*{head[0]} + {cr}", head[-1]] + kdims
    z_ranks = [N] + head + list(xr[2:]) + kdims
    z = ctx.tensor(z_ranks, ctx.out_dtype(), "cols")
    ctx.b.einsum(z.name, ctx.op, z_ranks + [cr], [access(x.name, x_idx), access(w.name, w_idx)],
                 access(z.name, z_ranks), "mul", "add",
                 attrs={"stride": stride, "padding": pads, "dilation": dilation, "groups": groups,
                        "transposed": True}, location=ctx.location)
    if groups != 1:
        z_shape = [xs[0], ws[1] * groups] + list(xs[2:]) + ksz
        z = ctx.reshape(z, z_shape, suffix="cols_ungrouped")
    y = _col2im(ctx, z, nsp, stride, pads, dilation, list(out_shape), bias is None)
    return _bias(ctx, y, bias)


def _col2im(ctx: LowerCtx, z: T, nsp: int, stride: list[int], pads: list[int], dilation: list[int],
            out_shape: list[int], final: bool) -> T:
    """Sum the taps of ``z[N, K, I..., R...]`` onto output points (see the module docstring)."""
    zr, zs = ctx.ranks(z), ctx.shape(z)
    lead = list(zr[:2])
    ins, ks = list(zr[2:2 + nsp]), list(zr[2 + nsp:])
    isz, ksz = list(zs[2:2 + nsp]), list(zs[2 + nsp:])
    osp = out_shape[2:]
    if all(s == 1 for s in stride):
        taken = set(zr)
        outs = []
        for i in range(nsp):
            outs.append(ctx.b.rank(family(ins[i]), osp[i], taken))
            taken.add(outs[-1])
        idx = lead + [f"{outs[i]} + {pads[i]} - {dilation[i]}*{ks[i]}" for i in range(nsp)] + ks
        border = {}
        for i in range(nsp):
            lo = max(0, dilation[i] * (ksz[i] - 1) - pads[i])
            hi = max(0, osp[i] - 1 + pads[i] - (isz[i] - 1))
            if lo or hi:
                border[ins[i]] = (lo, hi)
        out_ranks = lead + outs
        y = ctx.tensor(out_ranks, ctx.dtype(z), None if final else "col2im")
        ctx.b.einsum(y.name, ctx.op, out_ranks + ks, [access(z.name, idx)], access(y.name, out_ranks),
                     "identity", "add", pad={z.name: border} if border else None, location=ctx.location)
        return y
    if any(d > 1 for d in dilation):
        return _col2im_dilated(ctx, z, nsp, stride, pads, dilation, out_shape, final)
    # Stride > 1 (dilation 1): phases R = s*R1 + R0, A = I + R1.
    taken = set(zr)
    space_a, r1s, r0s, idx = [], [], [], list(lead)
    border = {}
    for i in range(nsp):
        s, k = stride[i], ksz[i]
        n1 = -(-k // s)
        a_size = isz[i] + n1 - 1
        a = ctx.b.rank(family(ins[i]), a_size, taken)
        taken.add(a)
        r0 = ctx.b.rank("PH", s, taken)
        taken.add(r0)
        r1 = ctx.b.rank(family(ks[i]), n1, taken)
        taken.add(r1)
        space_a += [a, r0]
        r1s.append(r1)
        r0s.append(r0)
        idx.append(f"{a} - {r1}")
        border[ins[i]] = (n1 - 1, n1 - 1)
        if n1 * s > k:
            border[ks[i]] = (0, n1 * s - k)
    idx += [f"{s}*{r1} + {r0}" for s, r1, r0 in zip(stride, r1s, r0s, strict=True)]
    ph_ranks = lead + space_a
    ph = ctx.tensor(ph_ranks, ctx.dtype(z), "phases")
    ctx.b.einsum(ph.name, ctx.op, ph_ranks + r1s, [access(z.name, idx)], access(ph.name, ph_ranks),
                 "identity", "add", pad={z.name: border}, location=ctx.location)
    full_shape = list(zs[:2]) + [ctx.b.sizes[space_a[2 * i]] * stride[i] for i in range(nsp)]
    flat = ctx.reshape(ph, full_shape, suffix="interleaved")
    fr = ctx.ranks(flat)
    out_ranks = list(fr[:2])
    cidx = list(fr[:2])
    crop = {}
    for i in range(nsp):
        o = ctx.b.rank(family(ins[i]), osp[i], set(out_ranks) | set(fr))
        out_ranks.append(o)
        cidx.append(f"{o} + {pads[i]}")
        over = max(0, osp[i] - 1 + pads[i] - (full_shape[2 + i] - 1))
        if over:
            crop[fr[2 + i]] = (0, over)
    y = ctx.tensor(out_ranks, ctx.dtype(z), None if final else "col2im")
    ctx.b.copy(y.name, ctx.op, out_ranks, [access(flat.name, cidx)], access(y.name, out_ranks),
               pad={flat.name: crop} if crop else None, location=ctx.location)
    return y


def _phase(s: int, d: int, p: int, k: int, phi: int) -> tuple[int, int, int] | None:
    """Taps of output phase ``phi`` (outputs ``o = s*A + phi``) of a strided, dilated col2im.

    Tap ``r`` lands on ``o`` from input ``i = (o + p - d*r) / s``; the taps that can reach phase
    ``phi`` are ``r = r0 + (s/g)*R1`` (g = gcd(s, d)), reading ``i = A + c - (d/g)*R1``.
    Returns (r0, number of taps, c), or None when no tap reaches the phase.
    """
    from math import gcd

    step = s // gcd(s, d)
    for r0 in range(min(step, k)):
        if (d * r0 - phi - p) % s == 0:
            return r0, -(-(k - r0) // step), (phi + p - d * r0) // s
    return None


def _col2im_dilated(ctx: LowerCtx, z: T, nsp: int, stride: list[int], pads: list[int], dilation: list[int],
                    out_shape: list[int], final: bool) -> T:
    """col2im for stride > 1 with dilation > 1: one einsum per output phase, interleaved by concat
    along phase ranks and a reshape, then cropped to the output size."""
    from itertools import product
    from math import gcd

    zr, zs = ctx.ranks(z), ctx.shape(z)
    lead, ins, ks = list(zr[:2]), list(zr[2:2 + nsp]), list(zr[2 + nsp:])
    isz, ksz, osp = list(zs[2:2 + nsp]), list(zs[2 + nsp:]), out_shape[2:]
    taken = set(zr)
    a_r, u_r = [], []
    for i in range(nsp):
        a_r.append(ctx.b.rank(family(ins[i]), -(-osp[i] // stride[i]), taken))
        taken.add(a_r[-1])
    for _ in range(nsp):
        u_r.append(ctx.b.rank("U", 1, taken))
        taken.add(u_r[-1])
    piece_ranks = lead + [x for i in range(nsp) for x in (a_r[i], u_r[i])]
    pieces: dict[tuple[int, ...], T] = {}
    for phis in product(*(range(s) for s in stride)):
        taps = [_phase(stride[i], dilation[i], pads[i], ksz[i], phis[i]) for i in range(nsp)]
        tag = "p" + "_".join(map(str, phis))
        if any(t is None for t in taps):
            pieces[phis] = T(ctx.b.tensor(f"{ctx.name}.{tag}", piece_ranks, ctx.dtype(z), "constant", 0.0))
            continue
        r1 = []
        for i, (_, n1, _) in enumerate(taps):  # type: ignore[misc]
            r1.append(ctx.b.rank(family(ks[i]), n1, taken | set(r1)))
        idx = list(lead)
        border = {}
        for i, (_, n1, c) in enumerate(taps):  # type: ignore[misc]
            dd = dilation[i] // gcd(stride[i], dilation[i])
            idx.append(f"{a_r[i]} {'-' if c < 0 else '+'} {abs(c)} - {dd}*{r1[i]}")
            lo = max(0, -(c - dd * (n1 - 1)))
            hi = max(0, ctx.b.sizes[a_r[i]] - 1 + c - (isz[i] - 1))
            if lo or hi:
                border[ins[i]] = (lo, hi)
        step = [stride[i] // gcd(stride[i], dilation[i]) for i in range(nsp)]
        idx += [f"{step[i]}*{r1[i]} + {taps[i][0]}" for i in range(nsp)]  # type: ignore[index]
        y = ctx.tensor(piece_ranks, ctx.dtype(z), tag)
        ctx.b.einsum(y.name, ctx.op, piece_ranks + r1, [access(z.name, idx)], access(y.name, piece_ranks),
                     "identity", "add", pad={z.name: border} if border else None, location=ctx.location)
        pieces[phis] = y
    full = _interleave(ctx, pieces, stride, nsp)
    fr = ctx.ranks(full)
    out_ranks = list(fr[:2]) + [ctx.b.rank(family(ins[i]), osp[i], set(fr)) for i in range(nsp)]
    y = ctx.tensor(out_ranks, ctx.dtype(z), None if final else "col2im")
    ctx.b.copy(y.name, ctx.op, out_ranks, [access(full.name, out_ranks)], access(y.name, out_ranks), view=True,
               location=ctx.location)
    return y


def _interleave(ctx: LowerCtx, pieces: dict, stride: list[int], nsp: int) -> T:
    """Join phase pieces ``[N, K, A1, 1, A2, 1, ...]`` into ``[N, K, A1*s1, A2*s2, ...]``."""
    from .shape import concat

    def join(prefix: tuple[int, ...], i: int) -> T:
        if i == nsp:
            return pieces[prefix]
        parts = [join(prefix + (phi,), i + 1) for phi in range(stride[i])]
        tag = "phases" + "_".join(map(str, prefix)) if prefix else "phases"
        return concat(ctx, parts, 3 + 2 * i, suffix=f"{tag}.{i}") if len(parts) > 1 else parts[0]

    joined = join((), 0)
    js = ctx.shape(joined)
    shape = list(js[:2]) + [js[2 + 2 * i] * js[3 + 2 * i] for i in range(nsp)]
    return ctx.reshape(joined, shape, suffix="interleaved")


@rule("aten.conv1d", "aten.conv2d", "aten.conv3d")
def conv_nd(ctx: LowerCtx, a: Args) -> T:
    return conv(ctx, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.groups, ctx.out_shape())


@rule("aten.conv_transpose1d", "aten.conv_transpose2d", "aten.conv_transpose3d")
def conv_transpose_nd(ctx: LowerCtx, a: Args) -> T:
    return conv_transpose(ctx, a.input, a.weight, a.bias, a.stride, a.padding, a.output_padding, a.dilation,
                          a.groups, ctx.out_shape())


@rule("aten.convolution", "aten._convolution")
def convolution(ctx: LowerCtx, a: Args) -> T:
    if a.transposed:
        return conv_transpose(ctx, a.input, a.weight, a.bias, a.stride, a.padding, a.output_padding,
                              a.dilation, a.groups, ctx.out_shape())
    return conv(ctx, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.groups, ctx.out_shape())
