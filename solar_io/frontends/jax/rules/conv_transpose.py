"""Convolutions with lhs dilation (transposed convolutions): one einsum per output phase.

``conv_general_dilated`` with ``lhs_dilation`` ``l > 1`` convolves a dilated input whose
interior holes are zeros. Along one spatial dim with window stride ``s``, rhs dilation
``d``, low padding ``lo`` and ``K`` taps, output ``o`` reads dilated position
``j = s*o + d*k - lo``, which holds ``x[j / l]`` when ``l`` divides ``j`` and 0 otherwise.
Split the outputs into ``q = l / gcd(l, s)`` phases ``o = q*A + phi``: the taps reaching
phase ``phi`` are ``k = k0 + (l/g2)*T`` (``g2 = gcd(d, l)``, ``k0`` the first one) and read
``x[(s/g)*A + c + (d/g2)*T]`` (``g = gcd(l, s)``, ``c = (s*phi + d*k0 - lo) / l``). So each
phase is an ordinary convolution einsum that never multiplies a hole (a phase no tap reaches, as in
a 1x1 kernel's gradient through a stride, is a constant of zeros): the MACs are those of
the products with a possibly non-zero input (taps that land in the padding border count, as
for a forward convolution), not XLA's, which include every hole.

The phase results ``[.., A, 1, ..]`` are padded to a common ``A`` where phases differ,
joined by concats along their phase dims, reshaped row-major to ``[.., A*q, ..]`` (the
interleave) and cropped to the output size.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import product
from math import gcd
from typing import Any

from ...common.builder import access, family
from ..lower import Lowerer
from ..registry import NoLowering
from .helpers import lin

_SPATIAL = {1: ["W"], 2: ["H", "W"], 3: ["T", "H", "W"]}

_KERNEL = {1: ["KW"], 2: ["KH", "KW"], 3: ["KD", "KH", "KW"]}


def bind_image(ctx: Lowerer, x: str, spec: Any) -> None:
    """Name the dims of a still unbound image operand by the convolution's dimension numbers
    (``N``, ``C``, then ``H, W`` / ``T, H, W`` / ``W``, as the PyTorch frontend names images)."""
    nsp = len(spec) - 2
    if nsp not in _SPATIAL:
        return
    hints: list[str | None] = [None] * len(spec)
    hints[spec[0]], hints[spec[1]] = "N", "C"
    for i in range(nsp):
        hints[spec[2 + i]] = _SPATIAL[nsp][i]
    ctx.b.bind(x, hints)


def image_family(x_ranks: tuple[str, ...], spec: Any, dim: int) -> str:
    """The rank family for image dim ``dim`` (0 batch, 1 channels, 2.. spatial) of an operand
    laid out by ``spec``: its own family unless that is the generic ``A``/``U``, then the image
    name (``N``, ``C``, ``H``, ``W``, ...)."""
    fam = family(x_ranks[spec[dim]])
    if fam not in ("A", "U"):
        return fam
    nsp = len(spec) - 2
    return ["N", "C"][dim] if dim < 2 else _SPATIAL.get(nsp, ["W"] * nsp)[dim - 2]


def _phases(l: int, s: int, d: int, lo: int, k: int, o: int) -> tuple[int, list[tuple[int, int, int, int]]]:
    """The phase period ``q`` of one spatial dim and, per phase, (outputs A, first tap k0,
    taps T, input offset c); see the module docstring."""
    g, g2 = gcd(l, s), gcd(d, l)
    q, step = l // g, l // g2
    out = []
    for phi in range(q):
        n_a = -(-(o - phi) // q)
        k0 = next((t for t in range(min(step, k)) if (s * phi + d * t - lo) % l == 0), None)
        if n_a <= 0:
            raise NoLowering("a transposed-convolution phase with no output")
        if k0 is None:  # every tap of this phase reads a hole: its outputs are zeros
            out.append((n_a, -1, 0, 0))
            continue
        out.append((n_a, k0, -(-(k - k0) // step), (s * phi + d * k0 - lo) // l))
    return q, out


def conv_lhs_dilated(ctx: Lowerer, eqn: Any, x: str, w: str) -> str:
    """Lower a ``conv_general_dilated`` with lhs dilation (see the module docstring)."""
    p = eqn.params
    if p["feature_group_count"] != 1 or p["batch_group_count"] != 1:
        raise NoLowering("grouped convolution with lhs dilation")
    lhs, rhs, osp = p["dimension_numbers"]
    xs, ws, oshape = ctx.shape(x), ctx.shape(w), ctx.out_shape()
    nsp = len(xs) - 2
    if nsp not in _SPATIAL:
        raise NoLowering(f"{nsp} spatial dims")
    bind_image(ctx, x, lhs)
    xr = ctx.ranks(x)
    whints: list[str | None] = [None] * len(ws)
    whints[rhs[0]], whints[rhs[1]] = image_family(xr, lhs, 1) + "*", xr[lhs[1]]
    for i in range(nsp):
        whints[rhs[2 + i]] = _KERNEL[nsp][i]
    ctx.b.bind(w, whints)
    wr = ctx.ranks(w)
    dims = [_phases(p["lhs_dilation"][i], p["window_strides"][i], p["rhs_dilation"][i], p["padding"][i][0],
                    ws[rhs[2 + i]], oshape[osp[2 + i]]) for i in range(nsp)]
    n_rank = xr[lhs[0]]
    taken = {n_rank}
    kr = ctx.b.distinct([wr[rhs[0]]], taken)[0]
    taken.add(kr)
    cr = ctx.b.distinct([wr[rhs[1]]], taken)[0]
    taken.add(cr)
    units = []
    for _ in range(nsp):
        units.append(ctx.b.rank("U", 1, taken))
        taken.add(units[-1])
    a_max = [max(ph[0] for ph in phases) for _, phases in dims]
    pieces: dict[tuple[int, ...], str] = {}
    for phis in product(*(range(q) for q, _ in dims)):
        pieces[phis] = _phase_piece(ctx, eqn, x, w, phis, dims, a_max, units, (n_rank, kr, cr), taken)
    joined = _join(ctx, pieces, dims, units, osp)
    jr = ctx.ranks(joined)
    merged: list[str] = []
    final: list[str] = []
    for j in range(len(oshape)):
        if j == osp[0]:
            merged.append(n_rank)
            final.append(n_rank)
        elif j == osp[1]:
            merged.append(kr)
            final.append(kr)
        else:
            i = list(osp[2:]).index(j)
            fam = image_family(xr, lhs, 2 + i)
            merged.append(ctx.b.rank(fam, a_max[i] * dims[i][0], set(merged) | set(jr)))
            final.append(ctx.b.rank(fam, oshape[j], set(final) | {n_rank, kr}))
    flat = ctx.tensor(merged, ctx.out_dtype(), "interleaved")
    ctx.b.reshape(flat, ctx.op, joined, flat, view=True, location=ctx.location)
    if tuple(ctx.shape(flat)) == tuple(oshape):
        return flat
    y = ctx.tensor(final, ctx.out_dtype())
    ctx.b.copy(y, ctx.op, final, [access(flat, final)], access(y, final), view=True, location=ctx.location)
    return y


def _phase_piece(ctx: Lowerer, eqn: Any, x: str, w: str, phis: tuple[int, ...], dims: list, a_max: list[int],
                 units: list[str], lead: tuple[str, str, str], taken: set[str]) -> str:
    """The einsum of one output phase, ``[.., A_i, 1, ..]`` in the output layout, padded to ``a_max``."""
    p = eqn.params
    lhs, rhs, osp = p["dimension_numbers"]
    n_rank, kr, cr = lead
    xr, wr = ctx.ranks(x), ctx.ranks(w)
    nsp = len(phis)
    if any(dims[i][1][phis[i]][1] < 0 for i in range(nsp)):
        return _zero_piece(ctx, phis, osp, lead, a_max, units, taken, xr, lhs)
    used = set(taken)
    a_r, t_r = [], []
    x_idx: list[Any] = [None] * len(xr)
    w_idx: list[Any] = [None] * len(wr)
    x_idx[lhs[0]], x_idx[lhs[1]] = lin(0, (1, n_rank)), lin(0, (1, cr))
    w_idx[rhs[0]], w_idx[rhs[1]] = lin(0, (1, kr)), lin(0, (1, cr))
    border: dict[str, tuple[int, int]] = {}
    for i in range(nsp):
        n_a, k0, n_t, c = dims[i][1][phis[i]]
        l, s, d = p["lhs_dilation"][i], p["window_strides"][i], p["rhs_dilation"][i]
        g, g2 = gcd(l, s), gcd(d, l)
        a_r.append(ctx.b.rank(image_family(xr, lhs, 2 + i), n_a, used))
        used.add(a_r[-1])
        t_r.append(ctx.b.rank(family(wr[rhs[2 + i]]), n_t, used))
        used.add(t_r[-1])
        x_idx[lhs[2 + i]] = lin(c, (s // g, a_r[i]), (d // g2, t_r[i]))
        w_idx[rhs[2 + i]] = lin(k0, (l // g2, t_r[i]))
        hi = (s // g) * (n_a - 1) + c + (d // g2) * (n_t - 1)
        size = ctx.shape(x)[lhs[2 + i]]
        if c < 0 or hi > size - 1:
            border[xr[lhs[2 + i]]] = (max(0, -c), max(0, hi - (size - 1)))
    out_ranks = output_ranks(osp, n_rank, [kr], lambda i: [a_r[i], units[i]])
    tag = "phase" + "_".join(map(str, phis))
    y = ctx.tensor(out_ranks, ctx.out_dtype(), tag)
    ctx.b.einsum(y, ctx.op, out_ranks + [cr] + t_r, [access(x, x_idx), access(w, w_idx)], access(y, out_ranks),
                 "mul", "add", pad={x: border} if border else None,
                 attrs={"lhs_dilation": [int(v) for v in p["lhs_dilation"]], "phase": list(phis)},
                 location=ctx.location)
    short = {a_r[i]: (0, a_max[i] - dims[i][1][phis[i]][0]) for i in range(nsp) if dims[i][1][phis[i]][0] < a_max[i]}
    if not short:
        return y
    full: list[str] = []
    for r in out_ranks:
        full.append(ctx.b.rank(family(r), a_max[a_r.index(r)], set(out_ranks) | set(full)) if r in short else r)
    z = ctx.tensor(full, ctx.out_dtype(), tag + ".padded")
    ctx.b.copy(z, ctx.op, full, [access(y, full)], access(z, full), pad={y: short}, location=ctx.location)
    return z


def output_ranks(osp: Any, n_rank: str, feature: list[str], spatial: Callable[[int], list[str]]) -> list[str]:
    """A convolution output's ranks in its dimension order (``osp``: batch dim, feature dim, spatial
    dims): the batch rank, the feature ranks (one, or (G, Kg) when grouped), and for each spatial
    dimension ``spatial(i)`` (its rank, and a phase piece's size-1 phase rank), called in output order."""
    out: list[str] = []
    for j in range(len(osp)):
        if j == osp[0]:
            out.append(n_rank)
        elif j == osp[1]:
            out += feature
        else:
            out += spatial(list(osp[2:]).index(j))
    return out


def _zero_piece(ctx: Lowerer, phis: tuple[int, ...], osp: Any, lead: tuple[str, str, str], a_max: list[int],
                units: list[str], taken: set[str], xr: tuple[str, ...], lhs: Any) -> str:
    """A phase no tap reaches (a 1x1 kernel's gradient through a stride, say): ``[.., a_max, 1, ..]``
    zeros, a constant of one value (no bytes read; the output's bytes are written by the join)."""
    n_rank, kr, _ = lead
    used = set(taken)

    def spatial(i: int) -> list[str]:
        a = ctx.b.rank(image_family(xr, lhs, 2 + i), a_max[i], used)
        used.add(a)
        return [a, units[i]]

    out_ranks = output_ranks(osp, n_rank, [kr], spatial)
    return ctx.b.tensor(f"{ctx.name}.zeros" + "_".join(map(str, phis)), out_ranks, ctx.out_dtype(), "constant", 0.0)


def _join(ctx: Lowerer, pieces: dict[tuple[int, ...], str], dims: list, units: list[str], osp: Any) -> str:
    """Concat the phase pieces along their size-1 phase dims (innermost spatial dim first)."""
    nsp = len(units)

    def join(prefix: tuple[int, ...], i: int) -> str:
        if i == nsp:
            return pieces[prefix]
        parts = [join(prefix + (phi,), i + 1) for phi in range(dims[i][0])]
        if len(parts) == 1:
            return parts[0]
        r0 = list(ctx.ranks(parts[0]))
        k = r0.index(units[i])
        r0[k] = ctx.b.rank("PH", len(parts), set(r0))
        out = ctx.tensor(r0, ctx.dtype(parts[0]), "phases")
        ctx.b.concat(out, ctx.op, parts, out, r0[k], location=ctx.location)
        return out

    return join((), 0)
