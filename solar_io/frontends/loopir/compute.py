"""Builtins that compute outside a kernel: scan, apply_mask, cast, and opaque ops (see :mod:`.builtins`)."""

from __future__ import annotations

import numpy as np

from ...affine import Access
from ...dtypes import numpy_dtype
from ...graph import Node
from .ir import LoopIRError, Value, parse_dims
from .record import check, plain, record
from .state import call_site, mode

_SCANS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def scan(x: Value, dim: str, op: str = "add") -> Value:
    """The inclusive prefix of ``x`` along ``dim`` under ``op`` (``add``: cumsum, ``mul``:
    cumprod, ``max``/``min``: running maximum/minimum); the result keeps ``x``'s dims.

    One einsum with map ``identity``, reduce ``op`` and ``scan: dim`` (format 1.1), counted
    as a sequential scan: ``n - 1`` combines per row along ``dim``."""
    site = call_site()
    x = check(x, "scan's input", site)
    if op not in _SCANS:
        raise LoopIRError(f"{site}: scan op must be one of {', '.join(_SCANS)}, got {op!r}")
    a = x.axis(dim)
    tr = mode().tracer
    if tr is None:
        arr = x.numpy()
        return Value(x.dims, x.shape, x.dtype, data=_SCANS[op].accumulate(arr, axis=a, dtype=arr.dtype))
    y = tr.result(tr.prefix("scan") + ".y", x.dims, x.shape, x.dtype, ranks=x.ranks)
    record(tr, "einsum", f"scan_{op}", [Access(x.name, plain(x.ranks))], Access(y.name, plain(y.ranks)), site,
          space=y.ranks, map="identity", reduce=op, scan=y.ranks[a])
    return y


def apply_mask(w: Value, mask: Value, density: float | None = None) -> Value:
    """``w * mask`` elementwise, declared with the mask's density (``density`` or the mask's)."""
    site = call_site()
    w, mask = check(w, "apply_mask's tensor", site), check(mask, "apply_mask's mask", site)
    if w.shape != mask.shape:
        raise LoopIRError(f"{site}: apply_mask needs a mask of the tensor's shape {list(w.shape)}, "
                          f"got {list(mask.shape)}")
    dens = density if density is not None else mask.density
    tr = mode().tracer
    if tr is None:
        data = (w.numpy() * mask.numpy()).astype(w.numpy().dtype)
        return Value(w.dims, w.shape, w.dtype, data=data, density=dens)
    y = tr.result(tr.prefix("apply_mask") + ".y", w.dims, w.shape, w.dtype, dens)
    record(tr, "einsum", "apply_mask", [Access(w.name, plain(w.ranks)), Access(mask.name, plain(w.ranks))],
          Access(y.name, plain(y.ranks)), site, space=y.ranks, map="mul", reduce="none")
    return y


def cast(x: Value, dtype: str) -> Value:
    """``x`` converted to ``dtype`` (an einsum with map identity)."""
    site = call_site()
    x = check(x, "cast's input", site)
    from ...dtypes import dtype as lookup

    try:
        dt = lookup(dtype).name
    except KeyError as e:
        raise LoopIRError(f"{site}: {e.args[0]}") from None
    tr = mode().tracer
    if tr is None:
        data = x.numpy().astype(numpy_dtype(dt))
        return Value(x.dims, x.shape, dt, data=data)
    y = tr.result(tr.prefix("cast") + ".y", x.dims, x.shape, dt)
    record(tr, "einsum", "cast", [Access(x.name, plain(x.ranks))], Access(y.name, plain(y.ranks)), site,
          space=y.ranks, map="identity", reduce="none")
    return y


def opaque(fn, xs: list[Value], dims: str | list[str], *, reason: str, dtype: str | list[str] | None = None,
           op: str | None = None, **sizes: int):
    """An op the IR cannot express (sort, top-k, ...): ``fn`` (numpy arrays in, one array
    or a tuple out) computes it when executing; the graph gets an ``opaque`` node (bytes
    counted, compute unknown) with ``reason``. ``dims``: the result's dims (a list for
    several results); sizes from keywords, the inputs' dims of the same name, or Dim sizes.
    ``dtype``: the results' dtype (a list: one per result; default the first input's)."""
    site = call_site()
    xs = [check(x, "opaque's inputs", site) for x in xs]
    if not str(reason).strip():
        raise LoopIRError(f"{site}: opaque needs a reason")
    multi = not isinstance(dims, str)
    specs = [parse_dims(d) for d in (dims if multi else [dims])]
    known = {d: n for x in xs for d, n in zip(x.dims, x.shape, strict=True)}
    known.update(mode().sizes)
    known.update(sizes)
    missing = [d for sp in specs for d in sp if d not in known]
    if missing:
        raise LoopIRError(f"{site}: opaque result dim {missing[0]} has no size; pass {missing[0]}=...")
    dts = list(dtype) if isinstance(dtype, (list, tuple)) else [dtype or (xs[0].dtype if xs else "fp32")] * len(specs)
    if len(dts) != len(specs):
        raise LoopIRError(f"{site}: opaque has {len(specs)} results but {len(dts)} dtypes")
    shapes = [tuple(known[d] for d in sp) for sp in specs]
    tr = mode().tracer
    name = op or getattr(fn, "__name__", "opaque")
    if tr is None:
        try:
            res = fn(*(x.numpy() for x in xs))
        except Exception as e:
            msg = " ".join(str(e).split())[:300]
            raise LoopIRError(f"{site}: opaque {name} raised {type(e).__name__}: {msg}") from None
        arrays = list(res) if isinstance(res, (tuple, list)) else [res]
        if len(arrays) != len(specs) or any(np.shape(a) != sh for a, sh in zip(arrays, shapes, strict=False)):
            raise LoopIRError(f"{site}: opaque {name} must return arrays of shapes {shapes}, got "
                              f"{[np.shape(a) for a in arrays]}")
        outs = [Value(sp, sh, dt, data=np.asarray(a, dtype=numpy_dtype(dt))) for sp, sh, a, dt in
                zip(specs, shapes, arrays, dts, strict=True)]
        return tuple(outs) if multi else outs[0]
    prefix = tr.prefix(f"opaque_{name}" if name.isidentifier() else "opaque")
    outs = [tr.result(f"{prefix}.y{i}" if multi else f"{prefix}.y", sp, sh, dt)
            for i, (sp, sh, dt) in enumerate(zip(specs, shapes, dts, strict=True))]
    node_name = outs[0].name
    tr.node(Node(name=node_name, kind="opaque", op=f"loopir.opaque.{name}", inputs=tuple(Access(x.name) for x in xs),
                 outputs=tuple(Access(o.name) for o in outs), reason=str(reason), location=site))
    tr.opaque[node_name] = fn
    return tuple(outs) if multi else outs[0]
