"""Lowering rules of jaxpr primitives, one registry (``registry.RULES``).

Elementwise primitives are einsums with reduce ``none`` (operands of a jaxpr equation have
the output's shape; scalar literals become immediates); reductions reduce over their axes;
``dot_general`` is one contraction over its contracting dims with its batch dims shared;
``conv_general_dilated`` and ``reduce_window_*`` put the window in the input's affine index
(``s*O + d*K - lo``) with the padding a declared border; data movement (transpose, slice,
pad, broadcast) are copies, reshapes are row-major views; ``gather`` of whole rows along one
axis (``jnp.take``, embeddings) is an indirect copy; ``scan`` with a static length is unrolled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...affine import Access, Indirect
from ...ops import MAP_OPS
from ..common.builder import access, expr, family
from .lower import Lowerer, Operand, file_dtype
from .registry import NoLowering, rule

# --------------------------------------------------------------------------- helpers


def _bound(ctx: Lowerer, x: str) -> bool:
    return ctx.b.tensors[x].ranks is not None


def ew(ctx: Lowerer, map: str, ins: Sequence[Operand], dtype: str | None = None) -> str:
    """An elementwise einsum; size-1 dims of an operand broadcast, scalars are immediates."""
    shape = ctx.out_shape()
    tensors = [x for x in ins if isinstance(x, str)]
    if not tensors:
        raise NoLowering("no tensor operand")
    for x in tensors:
        xs = ctx.shape(x)
        if xs == () and shape != ():
            continue
        if len(xs) != len(shape) or any(a != b and a != 1 for a, b in zip(xs, shape, strict=True)):
            raise NoLowering(f"operand shape {xs} does not broadcast to the output's {shape}")
    full = [x for x in tensors if ctx.shape(x) == shape]
    lead = next((x for x in full if _bound(ctx, x)), full[0] if full else None)
    if lead is not None:
        for x in full:
            ctx.b.bind(x, list(ctx.ranks(lead)))
    picked: list[str] = []
    for j, s in enumerate(shape):
        r = None
        for x in sorted(tensors, key=lambda t: (t in ctx.bcast, not _bound(ctx, t))):
            if len(ctx.shape(x)) == len(shape) and ctx.shape(x)[j] == s:
                r = ctx.ranks(x)[j]
                break
        picked.append(r if r is not None else ctx.b.rank("A", s))
    out_ranks = ctx.b.distinct(picked)
    dtype = dtype or ctx.out_dtype()
    dts = [ctx.dtype(t) for t in tensors]
    inputs = []
    for x in ins:
        if isinstance(x, str):
            xs = ctx.shape(x)
            if x in ctx.bcast:  # read the broadcast's source directly: no materialised copy
                src, dims = ctx.bcast[x]
                inputs.append(access(src, [out_ranks[d] if d >= 0 and xs[d] == shape[d] else 0 for d in dims]))
            elif xs == () and shape != ():
                inputs.append(access(x, []))
            else:
                inputs.append(access(x, [out_ranks[j] if xs[j] == shape[j] else 0 for j in range(len(xs))]))
        else:
            inputs.append(access(ctx.scalar(float(x), dts[-1]), []))
    out = ctx.tensor(out_ranks, dtype)
    ctx.b.einsum(out, ctx.op, out_ranks, inputs, access(out, out_ranks), map, "none", location=ctx.location)
    return out


def reduce(ctx: Lowerer, x: str, axes: Sequence[int], red: str, map: str = "identity",
           dtype: str | None = None) -> str:
    xr = ctx.ranks(x)
    axes = {a % len(xr) for a in axes}
    out_ranks = [r for i, r in enumerate(xr) if i not in axes]
    out = ctx.tensor(out_ranks, dtype or ctx.out_dtype())
    ctx.b.einsum(out, ctx.op, xr, [access(x, xr)], access(out, out_ranks), map, red, location=ctx.location)
    return out


def as_tensor(ctx: Lowerer, x: Operand, dtype: str) -> str:
    return x if isinstance(x, str) else ctx.scalar(float(x), dtype)


def reshape_ranks(ctx: Lowerer, xr: Sequence[str], xs: Sequence[int], shape: Sequence[int]) -> tuple[str, ...]:
    """Ranks of a row-major reshape: the matching leading and trailing dims keep their ranks."""
    n, m = len(xs), len(shape)
    hints: list[str] = ["A*"] * m
    i = 0
    while i < min(n, m) and xs[i] == shape[i]:
        hints[i] = xr[i]
        i += 1
    j = 0
    while j < min(n, m) - i and xs[n - 1 - j] == shape[m - 1 - j]:
        hints[m - 1 - j] = xr[n - 1 - j]
        j += 1
    hints = [h if h != "A*" or s != 1 else "U*" for h, s in zip(hints, shape, strict=True)]
    return ctx.b.new_ranks(hints, shape)


def reshape(ctx: Lowerer, x: str, shape: Sequence[int], suffix: str | None = None) -> str:
    shape = tuple(int(s) for s in shape)
    if ctx.shape(x) == shape:
        return x
    out = ctx.tensor(reshape_ranks(ctx, ctx.ranks(x), ctx.shape(x), shape), ctx.dtype(x), suffix)
    ctx.b.reshape(out, ctx.op, x, out, view=True, location=ctx.location)
    return out


# --------------------------------------------------------------------------- elementwise

_EW = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "max", "min": "min", "pow": "pow",
       "neg": "neg", "abs": "abs", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "tanh": "tanh",
       "sin": "sin", "cos": "cos", "erf": "erf", "logistic": "sigmoid", "sign": "sign", "floor": "floor",
       "ceil": "ceil", "round": "round", "square": "square", "eq": "eq", "ne": "ne", "lt": "lt", "le": "le",
       "gt": "gt", "ge": "ge", "add_any": "add"}


def _ew_rule(prim: str, map: str) -> None:
    @rule(prim)
    def lower(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
        if not any(isinstance(x, str) for x in ins):  # scalars only: fold now
            dt = np.dtype(eqn.outvars[0].aval.dtype)
            return [MAP_OPS[map].fn(*(np.asarray(x, dtype=dt) for x in ins)).astype(dt).item()]
        if prim == "round" and int(eqn.params.get("rounding_method", 1)) != 1:
            raise NoLowering("round half away from zero")
        if prim == "div" and ctx.out_dtype().startswith(("int", "uint")):
            raise NoLowering("integer division")
        return [ew(ctx, map, ins)]


for _p, _m in _EW.items():
    _ew_rule(_p, _m)


@rule("and", "or", "not")
def logical(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    if ctx.out_dtype() != "bool":
        raise NoLowering("bitwise operation on integers")
    return [ew(ctx, eqn.primitive.name, ins)]


@rule("integer_pow")
def integer_pow(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    y = int(eqn.params["y"])
    if y == 2:
        return [ew(ctx, "square", ins)]
    if y == 1:
        return [ew(ctx, "identity", ins)]
    if y == -1:
        return [ew(ctx, "reciprocal", ins)]
    if 2 < y <= 4:
        return [ew(ctx, "mul", [ins[0]] * y)]
    return [ew(ctx, "pow", [ins[0], float(y)])]


@rule("erfc")
def erfc(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    return [ew(ctx, "sub", [1.0, ew(ctx, "erf", ins)])]


@rule("exp2")
def exp2(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    return [ew(ctx, "pow", [2.0, ins[0]])]


@rule("log1p")
def log1p(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    one = ew(ctx, "add", [ins[0], 1.0])
    return [ew(ctx, "log", [one])]


@rule("expm1")
def expm1(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    e = ew(ctx, "exp", [ins[0]])
    return [ew(ctx, "sub", [e, 1.0])]


@rule("tan")
def tan(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    return [ew(ctx, "div", [ew(ctx, "sin", ins), ew(ctx, "cos", ins)])]


@rule("convert_element_type", "copy", "reduce_precision")
def convert(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    x = ins[0]
    if not isinstance(x, str):
        return [x]
    dt = ctx.out_dtype()
    if dt == ctx.dtype(x) and eqn.primitive.name != "copy":
        return [x]
    if dt == "bool" or (dt.startswith(("int", "uint")) and not ctx.dtype(x).startswith(("int", "uint", "bool"))):
        raise NoLowering(f"conversion {ctx.dtype(x)} -> {dt} (truncation or != 0)")
    return [ew(ctx, "identity", [x], dtype=dt)]


@rule("stop_gradient")
def passthrough(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    return [ins[0]]


@rule("select_n")
def select_n(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    if len(ins) != 3:
        raise NoLowering(f"select_n with {len(ins) - 1} cases")
    pred, f, t = ins
    if isinstance(pred, str) and ctx.dtype(pred) != "bool":
        raise NoLowering("integer selector")
    return [ew(ctx, "where", [pred, t, f])]


@rule("clamp")
def clamp(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    lo, x, hi = ins
    return [ew(ctx, "min", [ew(ctx, "max", [x, lo]), hi])]


# --------------------------------------------------------------------------- reductions

@rule("reduce_sum", "reduce_max", "reduce_min", "reduce_prod")
def reduce_rule(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    red = {"reduce_sum": "add", "reduce_max": "max", "reduce_min": "min", "reduce_prod": "mul"}[eqn.primitive.name]
    return [reduce(ctx, as_tensor(ctx, ins[0], ctx.out_dtype()), eqn.params["axes"], red)]


@rule("reduce_or", "reduce_and")
def reduce_bool(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    if ctx.out_dtype() != "bool":
        raise NoLowering("bitwise reduction of integers")
    red = "max" if eqn.primitive.name == "reduce_or" else "min"
    return [reduce(ctx, as_tensor(ctx, ins[0], "bool"), eqn.params["axes"], red)]


@rule("argmax", "argmin")
def argmax(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    axes = eqn.params["axes"]
    if len(axes) != 1:
        raise NoLowering("argmax over several axes")
    return [reduce(ctx, ins[0], axes, eqn.primitive.name)]


# --------------------------------------------------------------------------- contraction

@rule("dot_general")
def dot_general(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    x, w = ins
    if not (isinstance(x, str) and isinstance(w, str)):
        raise NoLowering("scalar operand")
    if not _bound(ctx, x) and _bound(ctx, w):
        x, w, lc, rc, lb, rb, swapped = w, x, rc, lc, rb, lb, True
    else:
        swapped = False
    xr = ctx.ranks(x)
    hints: list[str | None] = [None] * len(ctx.shape(w))
    for a, c in zip(lc, rc, strict=True):
        hints[c] = xr[a]
    for a, c in zip(lb, rb, strict=True):
        hints[c] = xr[a]
    free_w = [i for i in range(len(hints)) if i not in rc and i not in rb]
    for i in free_w:
        hints[i] = "N*" if len(free_w) == 1 else None
    ctx.b.bind(w, hints)
    wr = ctx.ranks(w)
    batch = [xr[a] for a in lb]
    contract = [xr[a] for a in lc]
    xfree = [xr[i] for i in range(len(xr)) if i not in lc and i not in lb]
    wfree = list(ctx.b.distinct([wr[i] for i in free_w], set(xr)))
    w_idx: list[str] = [""] * len(wr)
    for a, c in zip(lc, rc, strict=True):
        w_idx[c] = xr[a]
    for a, c in zip(lb, rb, strict=True):
        w_idx[c] = xr[a]
    for i, r in zip(free_w, wfree, strict=True):
        w_idx[i] = r
    out_ranks = batch + (wfree + xfree if swapped else xfree + wfree)
    out = ctx.tensor(out_ranks, ctx.out_dtype())
    ins_acc = [access(x, xr), access(w, w_idx)]
    if swapped:
        ins_acc.reverse()
    ctx.b.einsum(out, ctx.op, out_ranks + contract, ins_acc, access(out, out_ranks), "mul", "add",
                 location=ctx.location)
    return [out]


# --------------------------------------------------------------------------- data movement

@rule("reshape")
def reshape_rule(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    if eqn.params.get("dimensions") is not None:
        raise NoLowering("reshape with dimensions")
    return [reshape(ctx, ins[0], eqn.params["new_sizes"])]


@rule("squeeze", "expand_dims")
def squeeze(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    x = ins[0]
    if not isinstance(x, str):
        return [x]
    return [reshape(ctx, x, ctx.out_shape())]


@rule("transpose")
def transpose(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    x = ins[0]
    xr = ctx.ranks(x)
    perm = eqn.params["permutation"]
    out_ranks = [xr[p] for p in perm]
    out = ctx.tensor(out_ranks, ctx.dtype(x))
    ctx.b.copy(out, ctx.op, out_ranks, [access(x, xr)], access(out, out_ranks), view=True, location=ctx.location)
    return [out]


@rule("broadcast_in_dim")
def broadcast_in_dim(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    x = ins[0]
    shape = ctx.out_shape()
    dims = eqn.params["broadcast_dimensions"]
    if not isinstance(x, str):
        x = ctx.scalar(float(x), ctx.out_dtype())
    xs = ctx.shape(x)
    xr = ctx.ranks(x)
    hints = ["U*" if s == 1 else "A*" for s in shape]
    for j, d in enumerate(dims):
        if xs[j] == shape[d]:
            hints[d] = xr[j]
    out_ranks = ctx.b.new_ranks(hints, shape)
    idx: list[str | int] = [out_ranks[d] if xs[j] == shape[d] else 0 for j, d in enumerate(dims)]
    out = ctx.tensor(out_ranks, ctx.dtype(x))
    ctx.b.copy(out, ctx.op, out_ranks, [access(x, idx)], access(out, out_ranks), view=True, location=ctx.location)
    if x in ctx.bcast:  # a broadcast of a broadcast: compose
        src, inner = ctx.bcast[x]
        ctx.bcast[out] = (src, [dims[d] if d >= 0 and xs[d] == shape[dims[d]] else -1 for d in inner])
    else:
        ctx.bcast[out] = (x, [d if xs[j] == shape[d] else -1 for j, d in enumerate(dims)])
    return [out]


@rule("slice")
def slice_rule(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    x = ins[0]
    xr, xs = ctx.ranks(x), ctx.shape(x)
    start = eqn.params["start_indices"]
    strides = eqn.params["strides"] or [1] * len(xs)
    shape = ctx.out_shape()
    hints = [xr[i] if shape[i] == xs[i] else family(xr[i]) + "*" for i in range(len(xs))]
    out_ranks = ctx.b.new_ranks(hints, shape)
    idx = [f"{strides[i]}*{out_ranks[i]} + {start[i]}" for i in range(len(xs))]
    out = ctx.tensor(out_ranks, ctx.dtype(x))
    ctx.b.copy(out, ctx.op, out_ranks, [access(x, idx)], access(out, out_ranks), location=ctx.location)
    return [out]


@rule("split")
def split(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    x = ins[0]
    axis, sizes = eqn.params["axis"], eqn.params["sizes"]
    xr, xs = ctx.ranks(x), ctx.shape(x)
    outs, start = [], 0
    for k, n in enumerate(sizes):
        shape = list(xs)
        shape[axis] = n = int(n)
        hints = [xr[i] if shape[i] == xs[i] else family(xr[i]) + "*" for i in range(len(xs))]
        out_ranks = ctx.b.new_ranks(hints, shape)
        idx = [f"{out_ranks[i]} + {start}" if i == axis else out_ranks[i] for i in range(len(xs))]
        out = ctx.tensor(out_ranks, ctx.dtype(x), str(k))
        ctx.b.copy(out, ctx.op, out_ranks, [access(x, idx)], access(out, out_ranks), location=ctx.location)
        outs.append(out)
        start += n
    return outs


@rule("dynamic_slice")
def dynamic_slice(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    x, *starts = ins
    if any(isinstance(s, str) for s in starts):
        raise NoLowering("data-dependent start index")
    xs = ctx.shape(x)
    shape = ctx.out_shape()
    st = [min(max(int(s), 0), xs[i] - shape[i]) for i, s in enumerate(starts)]
    xr = ctx.ranks(x)
    hints = [xr[i] if shape[i] == xs[i] else family(xr[i]) + "*" for i in range(len(xs))]
    out_ranks = ctx.b.new_ranks(hints, shape)
    out = ctx.tensor(out_ranks, ctx.dtype(x))
    ctx.b.copy(out, ctx.op, out_ranks, [access(x, [f"{r} + {s}" for r, s in zip(out_ranks, st, strict=True)])],
               access(out, out_ranks), location=ctx.location)
    return [out]


@rule("concatenate")
def concatenate(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    if not all(isinstance(x, str) for x in ins):
        raise NoLowering("scalar operand")
    d = eqn.params["dimension"]
    shape = ctx.out_shape()
    lead = next((x for x in ins if _bound(ctx, x)), ins[0])
    lr = ctx.ranks(lead)
    hints = [lr[i] if i != d else family(lr[i]) + "*" for i in range(len(shape))]
    out_ranks = ctx.b.new_ranks(hints, shape)
    for x in ins:
        ctx.b.bind(x, [lr[i] if i != d else None for i in range(len(shape))])
    out = ctx.tensor(out_ranks, ctx.out_dtype())
    ctx.b.concat(out, ctx.op, list(ins), out, out_ranks[d], location=ctx.location)
    return [out]


@rule("pad")
def pad(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    x, v = ins
    if isinstance(v, str):
        raise NoLowering("tensor padding value")
    cfg = eqn.params["padding_config"]
    if any(lo < 0 or hi < 0 or it != 0 for lo, hi, it in cfg):
        raise NoLowering("negative or interior padding")
    xr, xs = ctx.ranks(x), ctx.shape(x)
    shape = ctx.out_shape()
    hints = [xr[i] if shape[i] == xs[i] else family(xr[i]) + "*" for i in range(len(xs))]
    out_ranks = ctx.b.new_ranks(hints, shape)
    idx = [f"{out_ranks[i]} - {cfg[i][0]}" for i in range(len(xs))]
    border = {xr[i]: (int(cfg[i][0]), int(cfg[i][1])) for i in range(len(xs)) if cfg[i][0] or cfg[i][1]}
    out = ctx.tensor(out_ranks, ctx.dtype(x))
    ctx.b.copy(out, ctx.op, out_ranks, [access(x, idx)], access(out, out_ranks), pad={x: border} if border else None,
               fill=float(v) if border and float(v) != 0 else None, location=ctx.location)
    return [out]


@rule("iota")
def iota(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    shape = ctx.out_shape()
    d = eqn.params["dimension"]
    arr = np.broadcast_to(np.arange(shape[d]).reshape([-1 if i == d else 1 for i in range(len(shape))]), shape)
    return [ctx.data(np.ascontiguousarray(arr).astype(np.dtype(eqn.outvars[0].aval.dtype)), ctx.out_dtype())]


@rule("gather")
def gather(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    """Whole slices along one axis (``jnp.take(x, ids, axis)``, embedding lookups)."""
    x, ids = ins
    if not isinstance(ids, str):
        raise NoLowering("constant index")
    dn = eqn.params["dimension_numbers"]
    xs = ctx.shape(x)
    ids_s = ctx.shape(ids)
    sizes = eqn.params["slice_sizes"]
    if (len(dn.start_index_map) != 1 or tuple(dn.collapsed_slice_dims) != tuple(dn.start_index_map)
            or getattr(dn, "operand_batching_dims", ()) or ids_s[-1:] != (1,)):
        raise NoLowering("not a take along one axis")
    axis = dn.start_index_map[0]
    if any(sizes[i] != xs[i] for i in range(len(xs)) if i != axis):
        raise NoLowering("partial slices")
    mode = str(eqn.params.get("mode", ""))
    if "CLIP" not in mode and "PROMISE" not in mode and "FILL" not in mode:
        raise NoLowering(f"mode {mode}")
    ids2 = reshape(ctx, ids, ids_s[:-1], suffix="ids")
    ctx.b.bind(x, ["V" if i == axis else ("D" if i == len(xs) - 1 else None) for i in range(len(xs))])
    xr, ir = ctx.ranks(x), ctx.ranks(ids2)
    shape = ctx.out_shape()
    offset = list(dn.offset_dims)
    kept = [xr[i] for i in range(len(xs)) if i != axis]
    kept = list(ctx.b.distinct(kept, set(ir)))
    out_ranks: list[str] = []
    ki = ii = 0
    for j in range(len(shape)):
        if j in offset:
            out_ranks.append(kept[ki])
            ki += 1
        else:
            out_ranks.append(ir[ii])
            ii += 1
    idx: list[Any] = []
    ki = 0
    for i in range(len(xs)):
        if i == axis:
            idx.append(Indirect(ids2))
        else:
            idx.append(expr(kept[ki]))
            ki += 1
    out = ctx.tensor(out_ranks, ctx.dtype(x))
    ctx.b.copy(out, ctx.op, out_ranks, [Access(x, tuple(idx)), access(ids2, ir)], access(out, out_ranks),
               location=ctx.location)
    return [out]


# --------------------------------------------------------------------------- convolution and pooling

@rule("conv_general_dilated")
def conv(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    p = eqn.params
    x, w = ins
    if any(d != 1 for d in p["lhs_dilation"]):
        raise NoLowering("lhs dilation (transposed convolution)")
    if p["batch_group_count"] != 1:
        raise NoLowering("batch_group_count")
    lhs, rhs, osp = p["dimension_numbers"]
    groups = p["feature_group_count"]
    xs, ws = ctx.shape(x), ctx.shape(w)
    nsp = len(xs) - 2
    xr = ctx.ranks(x)
    oshape = ctx.out_shape()
    strides, dil, pads = p["window_strides"], p["rhs_dilation"], p["padding"]
    k_out, cg = ws[rhs[0]], ws[rhs[1]]
    ksz = [ws[rhs[2 + i]] for i in range(nsp)]
    hints: list[str | None] = [None] * len(ws)
    hints[rhs[0]] = family(xr[lhs[1]]) + "*"
    hints[rhs[1]] = xr[lhs[1]] if groups == 1 else "C*"
    for i in range(nsp):
        hints[rhs[2 + i]] = ["KD", "KH", "KW"][3 - nsp + i] if nsp <= 3 else "K*"
    ctx.b.bind(w, hints)
    wr = ctx.ranks(w)
    N = xr[lhs[0]]
    taken = {N}
    outs = []
    for i in range(nsp):
        r = ctx.b.rank(family(xr[lhs[2 + i]]), oshape[osp[2 + i]], taken)
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
        if lo < 0 or _hi < 0:
            raise NoLowering("negative padding")
        x_idx[lhs[2 + i]] = f"{s}*{outs[i]} + {d}*{kdims[i]} - {lo}"
        reach_hi = s * (oshape[osp[2 + i]] - 1) + d * (ksz[i] - 1) - lo
        over = max(0, reach_hi - (xs[lhs[2 + i]] - 1))
        if lo or over:
            border[xr[lhs[2 + i]]] = (lo, over)
    w_idx: list[str] = [""] * len(ws)
    w_idx[rhs[0]] = head[0] if groups == 1 else f"{k_out // groups}*{head[0]} + {head[1]}"
    w_idx[rhs[1]] = cr
    for i in range(nsp):
        w_idx[rhs[2 + i]] = kdims[i]
    # output ranks in the output layout; the feature dim is (G, Kg) when grouped
    out_ranks: list[str] = []
    for j in range(len(oshape)):
        if j == osp[0]:
            out_ranks.append(N)
        elif j == osp[1]:
            out_ranks.extend(head)
        else:
            out_ranks.append(outs[list(osp[2:]).index(j)])
    attrs = {"stride": [int(v) for v in strides], "padding": [int(q[0]) for q in pads],
             "dilation": [int(v) for v in dil], "groups": int(groups)}
    y = ctx.tensor(out_ranks, ctx.out_dtype(), "grouped" if groups != 1 else None)
    ctx.b.einsum(y, ctx.op, out_ranks + [cr] + kdims, [access(x, x_idx), access(w, w_idx)], access(y, out_ranks),
                 "mul", "add", pad={x: border} if border else None, attrs=attrs, location=ctx.location)
    if groups != 1:
        y = reshape(ctx, y, oshape)
    return [y]


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


# --------------------------------------------------------------------------- loops

@rule("scan")
def scan(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    """A scan with a static length, unrolled: body per step on slices of the scanned inputs."""
    p = eqn.params
    length, nc, ncarry = int(p["length"]), p["num_consts"], p["num_carry"]
    if length > 256:
        raise NoLowering(f"scan of {length} steps (unrolled up to 256)")
    body = p["jaxpr"]
    consts, carry, xs = ins[:nc], list(ins[nc:nc + ncarry]), ins[nc + ncarry:]
    ys_steps: list[list[Operand]] = []
    steps = range(length - 1, -1, -1) if p["reverse"] else range(length)
    eqn0 = eqn
    for t in steps:
        xt = []
        for x in xs:
            ctx.eqn = eqn0
            xt.append(_index0(ctx, x, t))
        outs = ctx.run_closed(body, list(consts) + carry + xt)
        carry = outs[:ncarry]
        ys_steps.append(outs[ncarry:])
    ctx.eqn = eqn0
    if p["reverse"]:
        ys_steps.reverse()
    ys = []
    for k, v in enumerate(eqn.outvars[ncarry:]):
        parts = []
        for step in ys_steps:
            y = as_tensor(ctx, step[k], file_dtype(v.aval.dtype))
            parts.append(reshape(ctx, y, (1,) + ctx.shape(y), suffix="step"))
        if len(parts) == 1:
            ys.append(parts[0])
            continue
        shape = tuple(int(s) for s in v.aval.shape)
        r0 = ctx.ranks(parts[0])
        out_ranks = ctx.b.new_ranks(["T*"] + list(r0[1:]), shape)
        out = ctx.tensor(out_ranks, ctx.dtype(parts[0]), "ys")
        ctx.b.concat(out, ctx.op, parts, out, out_ranks[0], location=ctx.location)
        ys.append(out)
    return carry + ys


def _index0(ctx: Lowerer, x: Operand, t: int) -> str:
    """``x[t]`` as a copy of one slice along the leading dim."""
    out_ranks = ctx.ranks(x)[1:]
    out = ctx.tensor(out_ranks, ctx.dtype(x), f"x{t}")
    ctx.b.copy(out, ctx.op, out_ranks, [access(x, [t] + list(out_ranks))], access(out, out_ranks), view=True,
               location=ctx.location)
    return out


@rule("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp")
def cumulative(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    # as on the PyTorch side: format v1 has no scan primitive, and a ladder or triangular
    # einsum would count more work than a sequential scan needs (no longer a lower bound)
    raise NoLowering("cumulative scan: format v1 has no scan primitive (compute not bounded by einsums)")


@rule("while")
def while_loop(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    raise NoLowering("while loop: trip count not static")


@rule("custom_call", "pure_callback", "io_callback", "ffi_call")
def custom_call(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    raise NoLowering("custom call: compute unknown")
