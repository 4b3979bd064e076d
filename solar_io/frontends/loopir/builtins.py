"""Builtins called from ``model`` for what does not fit a kernel's affine loop nests.

Each works on ``Value``s: with numpy while executing, by recording a node while tracing.
Dimensions are named: a builtin's result names its dims (the ``dims`` / ``as_dim``
arguments), and sizes of new dims come from keywords or are inferred.

| builtin | result | graph node |
| --- | --- | --- |
| ``reshape(x, "B,S,H,E", H=16)`` | row-major reshape | data_movement reshape (view) |
| ``transpose(x, "B,H,S,E")`` | dims permuted (materialised) | data_movement copy |
| ``slice(x, "S", start, stop, step=1, as_dim=None)`` | a strided range of one dim | data_movement copy, view |
| ``select(x, "S", index)`` | one index of a dim, dim dropped | data_movement copy, view |
| ``concat([a, b], "C", as_dim=None)`` | joined along dim C | data_movement concat |
| ``stack([a, b], "L", axis=0)`` | a new dim L | reshape views + concat |
| ``gather(table, ids, "V")`` | rows of ``table`` picked by integer ``ids`` | data_movement copy with ``@ids`` |
| ``scatter_add(init, ids, src, "V")`` | ``init`` plus ``src`` at the rows ``ids`` pick | einsum into ``y[@ids, ..]`` |
| ``scan(x, "S", op="add")`` | inclusive prefix sum/product/max/min along S | einsum identity/op with ``scan: S`` |
| ``apply_mask(w, mask, density=None)`` | ``w * mask``, declared sparse | einsum mul with ``density`` |
| ``cast(x, dtype)`` | converted element type | einsum identity |
| ``opaque(fn, [x], "B,K", reason=...)`` | ``fn`` on numpy arrays (sort, top-k) | opaque node: bytes, compute unknown |

``slice`` and ``select`` are views, like numpy's basic indexing: no bytes move (the reader
of the result reads the selected elements in place); ``transpose`` materialises.
"""

from __future__ import annotations

import builtins as _py
from math import prod

import numpy as np

from ...affine import Access, AffineExpr, Indirect
from ...dtypes import numpy_dtype
from ...graph import Node
from .ir import LoopIRError, Value, parse_dims
from .state import call_site, mode


def _plain(ranks) -> tuple[AffineExpr, ...]:
    return tuple(AffineExpr(((r, 1),), 0) for r in ranks)


def _check(x, what: str, site: str) -> Value:
    if not isinstance(x, Value):
        raise LoopIRError(f"{site}: {what} must be a tensor (a model input or a kernel result), got {type(x).__name__}")
    return x


def _node(tr, kind: str, op: str, inputs, out: Access, site: str, **kw) -> None:
    tr.node(Node(name=out.tensor, kind=kind, op=f"loopir.{op}", inputs=tuple(inputs), outputs=(out,),
                 location=site, **kw))


def reshape(x: Value, dims: str, **sizes: int) -> Value:
    """``x`` reshaped row-major to ``dims``.

    Sizes: keywords, then dims of ``x`` with the same name; one remaining dim is inferred
    from the element count; if several remain, the program's Dim sizes are used first.
    """
    site = call_site()
    x = _check(x, "reshape's input", site)
    names = parse_dims(dims)
    known = {d: x.size_of(d) for d in x.dims if d in names and d not in sizes}
    known.update(sizes)
    missing = [d for d in names if d not in known]
    if len(missing) > 1:  # several unknown: the program's Dim sizes, then infer one
        for d in missing:
            if mode().sizes.get(d):
                known[d] = mode().sizes[d]
        missing = [d for d in names if d not in known]
    total = prod(x.shape)
    if len(missing) > 1:
        raise LoopIRError(f"{site}: reshape to {dims}: give the sizes of {', '.join(missing)} (all but one)")
    if missing:
        rest = prod(known[d] for d in names if d != missing[0])
        if rest == 0 or total % rest:
            raise LoopIRError(f"{site}: reshape of {list(x.shape)} to {dims}: {total} elements do not divide by {rest}")
        known[missing[0]] = total // rest
    shape = tuple(known[d] for d in names)
    if prod(shape) != total:
        raise LoopIRError(f"{site}: reshape of {list(x.shape)} ({total} elements) to {dims}={list(shape)}")
    tr = mode().tracer
    if tr is None:
        return Value(names, shape, x.dtype, data=x.numpy().reshape(shape), density=x.density)
    y = tr.result(tr.prefix("reshape") + ".y", names, shape, x.dtype, x.density)
    _node(tr, "data_movement", "reshape", [Access(x.name)], Access(y.name), site, movement="reshape", view=True)
    return y


def transpose(x: Value, dims: str) -> Value:
    """``x`` with its dims permuted to ``dims`` (a materialised copy)."""
    site = call_site()
    x = _check(x, "transpose's input", site)
    names = parse_dims(dims)
    if sorted(names) != sorted(x.dims):
        raise LoopIRError(f"{site}: transpose of dims {','.join(x.dims)} to {dims}: the same names are needed")
    perm = [x.dims.index(d) for d in names]
    shape = tuple(x.shape[i] for i in perm)
    tr = mode().tracer
    if tr is None:
        return Value(names, shape, x.dtype, data=np.ascontiguousarray(np.transpose(x.numpy(), perm)))
    y = tr.result(tr.prefix("transpose") + ".y", names, shape, x.dtype, x.density)
    _node(tr, "data_movement", "transpose", [Access(x.name, _plain(x.ranks))], Access(y.name, _plain(y.ranks)),
          site, movement="copy", space=y.ranks)
    return y


def slice(x: Value, dim: str, start: int, stop: int, step: int = 1, as_dim: str | None = None) -> Value:  # noqa: A001
    """Elements ``start, start + step, ... < stop`` of dim ``dim`` (a new dim ``as_dim``)."""
    site = call_site()
    x = _check(x, "slice's input", site)
    a = x.axis(dim)
    n = x.shape[a]
    if step <= 0 or not (0 <= start < stop <= n):
        raise LoopIRError(f"{site}: slice {start}:{stop}:{step} of dim {dim} (size {n}) must satisfy "
                          "0 <= start < stop <= size, step > 0")
    size = len(range(start, stop, step))
    new = as_dim or f"{dim}_{size}"
    names = x.dims[:a] + (new,) + x.dims[a + 1:]
    parse_dims(names)
    shape = x.shape[:a] + (size,) + x.shape[a + 1:]
    tr = mode().tracer
    if tr is None:
        idx = tuple(_py.slice(start, stop, step) if i == a else _py.slice(None) for i in range(x.ndim))
        return Value(names, shape, x.dtype, data=np.ascontiguousarray(x.numpy()[idx]))
    y = tr.result(tr.prefix("slice") + ".y", names, shape, x.dtype, x.density)
    index = tuple(AffineExpr(((y.ranks[a], step),), start) if i == a else AffineExpr(((r, 1),), 0)
                  for i, r in enumerate(x.ranks))
    _node(tr, "data_movement", "slice", [Access(x.name, index)], Access(y.name, _plain(y.ranks)), site,
          movement="copy", space=y.ranks, attrs=(("start", start), ("step", step), ("stop", stop)), view=True)
    return y


def select(x: Value, dim: str, index: int) -> Value:
    """Element ``index`` of dim ``dim``; the dim is dropped."""
    site = call_site()
    x = _check(x, "select's input", site)
    a = x.axis(dim)
    if not 0 <= index < x.shape[a]:
        raise LoopIRError(f"{site}: select index {index} outside dim {dim} of size {x.shape[a]}")
    names, shape = x.dims[:a] + x.dims[a + 1:], x.shape[:a] + x.shape[a + 1:]
    tr = mode().tracer
    if tr is None:
        return Value(names, shape, x.dtype, data=np.ascontiguousarray(np.take(x.numpy(), index, axis=a)))
    y = tr.result(tr.prefix("select") + ".y", names, shape, x.dtype, x.density)
    idx = tuple(AffineExpr((), index) if i == a else AffineExpr(((r, 1),), 0) for i, r in enumerate(x.ranks))
    _node(tr, "data_movement", "select", [Access(x.name, idx)], Access(y.name, _plain(y.ranks)), site,
          movement="copy", space=y.ranks, attrs=(("index", index),), view=True)
    return y


def concat(xs: list[Value], dim: str, as_dim: str | None = None) -> Value:
    """``xs`` joined along the dim at the position of ``dim`` in the first (sizes add up)."""
    site = call_site()
    xs = [_check(x, "concat's inputs", site) for x in xs]
    if len(xs) < 2:
        raise LoopIRError(f"{site}: concat needs two or more tensors")
    a = xs[0].axis(dim)
    for x in xs[1:]:
        if x.ndim != xs[0].ndim or x.dtype != xs[0].dtype or any(
                s != t for i, (s, t) in enumerate(zip(x.shape, xs[0].shape, strict=True)) if i != a):
            raise LoopIRError(f"{site}: concat inputs must match in dtype and in every dim but {dim}: "
                              f"{list(xs[0].shape)} {xs[0].dtype} vs {list(x.shape)} {x.dtype}")
    total = sum(x.shape[a] for x in xs)
    new = as_dim or f"{dim}_{total}"
    names = xs[0].dims[:a] + (new,) + xs[0].dims[a + 1:]
    parse_dims(names)
    shape = xs[0].shape[:a] + (total,) + xs[0].shape[a + 1:]
    tr = mode().tracer
    if tr is None:
        return Value(names, shape, xs[0].dtype, data=np.concatenate([x.numpy() for x in xs], axis=a))
    y = tr.result(tr.prefix("concat") + ".y", names, shape, xs[0].dtype)
    _node(tr, "data_movement", "concat", [Access(x.name) for x in xs], Access(y.name), site, movement="concat",
          axis=y.ranks[a])
    return y


def stack(xs: list[Value], dim: str, axis: int = 0) -> Value:
    """``xs`` (same dims) stacked along a new dim ``dim`` at position ``axis``."""
    site = call_site()
    xs = [_check(x, "stack's inputs", site) for x in xs]
    if not xs or any(x.shape != xs[0].shape or x.dtype != xs[0].dtype for x in xs):
        raise LoopIRError(f"{site}: stack needs one or more tensors of one shape and dtype")
    names = xs[0].dims[:axis] + (dim,) + xs[0].dims[axis:]
    parse_dims(names)
    shape = xs[0].shape[:axis] + (len(xs),) + xs[0].shape[axis:]
    tr = mode().tracer
    if tr is None:
        return Value(names, shape, xs[0].dtype, data=np.stack([x.numpy() for x in xs], axis=axis))
    unit = f"{dim}_1"
    parts = []
    for x in xs:
        ones = xs[0].dims[:axis] + (unit,) + xs[0].dims[axis:]
        p = tr.result(tr.prefix("stack_part") + ".y", ones, x.shape[:axis] + (1,) + x.shape[axis:], x.dtype)
        _node(tr, "data_movement", "stack", [Access(x.name)], Access(p.name), site, movement="reshape", view=True)
        parts.append(p)
    if len(parts) == 1:
        return parts[0]
    y = tr.result(tr.prefix("stack") + ".y", names, shape, xs[0].dtype)
    _node(tr, "data_movement", "stack", [Access(p.name) for p in parts], Access(y.name), site, movement="concat",
          axis=y.ranks[axis])
    return y


def gather(table: Value, ids: Value, dim: str) -> Value:
    """``table`` indexed along ``dim`` by the integer tensor ``ids``: dims = table's with ``dim``
    replaced by ids' dims (an embedding lookup: ``gather(emb, tokens, "V")``). A dim of ids
    that ``table`` also has (other than ``dim``) is shared, not repeated: element ``b`` of
    the result picks from row ``b`` of the table (``gather(logp, target, "C")`` with logp
    ``B,C`` and target ``B`` gives ``B``: torch's ``take_along_dim``)."""
    site = call_site()
    table, ids = _check(table, "gather's table", site), _check(ids, "gather's ids", site)
    a, names, shape, pos = _indexed(table, ids, dim, "gather", site)
    tr = mode().tracer
    if tr is None:
        data = table.numpy()[_picks(table, ids, dim, a, shape, pos, "gather", site)]
        return Value(names, shape, table.dtype, data=np.ascontiguousarray(data))
    y = tr.result(tr.prefix("gather") + ".y", names, shape, table.dtype)
    tidx = tuple(Indirect(ids.name) if i == a else AffineExpr(((y.ranks[pos[d]], 1),), 0)
                 for i, d in enumerate(table.dims))
    inputs = [Access(table.name, tidx), Access(ids.name, _plain(tuple(y.ranks[pos[d]] for d in ids.dims)))]
    _node(tr, "data_movement", "gather", inputs, Access(y.name, _plain(y.ranks)), site, movement="copy",
          space=y.ranks)
    return y


_WORDS = {"gather": ("gathered", "the table"), "scatter_add": ("scattered", "init")}


def _indexed(base: Value, ids: Value, dim: str, what: str,
             site: str) -> tuple[int, tuple[str, ...], tuple[int, ...], dict[str, int]]:
    """The geometry of ``base`` indexed along ``dim`` by ``ids`` (gather's result, scatter_add's
    source): the axis of ``dim``, the dims and shape (``base``'s with ``dim`` replaced by the ids'
    own dims; dims the two share pair up) and each dim's position."""
    if ids.dtype not in ("int64", "int32", "int16", "int8", "uint8"):
        raise LoopIRError(f"{site}: {what}'s ids must have an integer dtype, got {ids.dtype}")
    a = base.axis(dim)
    verb, base_name = _WORDS[what]
    if dim in ids.dims:
        raise LoopIRError(f"{site}: {what}'s ids must not have the {verb} dim {dim}")
    for d in ids.dims:
        if d in base.dims and ids.size_of(d) != base.size_of(d):
            raise LoopIRError(f"{site}: {what}'s shared dim {d} is {ids.size_of(d)} in ids but "
                              f"{base.size_of(d)} in {base_name}")
    own = tuple(d for d in ids.dims if d not in base.dims)
    names = base.dims[:a] + own + base.dims[a + 1:]
    shape = base.shape[:a] + tuple(ids.size_of(d) for d in own) + base.shape[a + 1:]
    return a, names, shape, {d: i for i, d in enumerate(names)}


def _picks(base: Value, ids: Value, dim: str, a: int, shape: tuple[int, ...], pos: dict[str, int], what: str,
           site: str) -> tuple:
    """numpy index of the elements of ``base`` that ``ids`` selects, over the indexed ``shape``
    (LoopIRError when an id is outside ``dim``)."""
    idx = ids.numpy()
    n = base.shape[a]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise LoopIRError(f"{site}: {what} ids hold values in [{idx.min()}, {idx.max()}], outside dim {dim} "
                          f"of size {n}")
    grid = np.indices(shape, sparse=True)
    picked = idx[tuple(grid[pos[d]] for d in ids.dims)]
    return tuple(picked if i == a else grid[pos[d]] for i, d in enumerate(base.dims))


def scatter_add(init: Value, ids: Value, src: Value, dim: str) -> Value:
    """``init`` with each element of ``src`` added into the element of ``init`` that ``ids``
    selects along ``dim``: the adjoint of ``gather(init, ids, dim)``, whose result has the dims
    of ``src`` (``init``'s with ``dim`` replaced by the dims of ``ids`` that ``init`` lacks;
    shared dims pair up). ``scatter_add(zeros, dst, msg, "N")`` with ``msg`` ``E,H`` and
    ``dst`` ``E`` is torch's ``zeros.index_add(0, dst, msg)``; with ``ids`` of ``msg``'s
    shape ``E,H`` it is ``zeros.scatter_add(0, ids, msg)``. Repeated ids accumulate.

    One einsum over ``src``'s space, map ``identity``, reduce ``add``, output
    ``out[.., @ids, ..]`` starting from ``init`` (format 1.1 scatter): one vector FLOP per
    element of ``src``; bytes for the rows it selects, not a copy of ``init``."""
    site = call_site()
    init = _check(init, "scatter_add's init", site)
    ids, src = _check(ids, "scatter_add's ids", site), _check(src, "scatter_add's source", site)
    a, names, shape, pos = _indexed(init, ids, dim, "scatter_add", site)
    if src.dims != names or src.shape != shape:
        raise LoopIRError(f"{site}: scatter_add's source must have dims {','.join(names)} of sizes {list(shape)} "
                          f"(init's with {dim} replaced by the ids' own dims), got {','.join(src.dims)} "
                          f"{list(src.shape)}")
    tr = mode().tracer
    if tr is None:
        where = _picks(init, ids, dim, a, shape, pos, "scatter_add", site)
        data = np.array(init.numpy(), copy=True)
        np.add.at(data, np.broadcast_arrays(*where), src.numpy().astype(data.dtype))
        return Value(init.dims, init.shape, init.dtype, data=data)
    y = tr.result(tr.prefix("scatter_add") + ".y", init.dims, init.shape, init.dtype, ranks=init.ranks)
    space = src.ranks
    index = tuple(Indirect(ids.name) if i == a else AffineExpr(((space[pos[d]], 1),), 0)
                  for i, d in enumerate(init.dims))
    inputs = [Access(init.name, index), Access(src.name, _plain(space)),
              Access(ids.name, _plain(tuple(space[pos[d]] for d in ids.dims)))]
    _node(tr, "einsum", "scatter_add", inputs, Access(y.name, index), site, space=space, map="identity",
          reduce="add", init=init.name)
    return y


_SCANS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def scan(x: Value, dim: str, op: str = "add") -> Value:
    """The inclusive prefix of ``x`` along ``dim`` under ``op`` (``add``: cumsum, ``mul``:
    cumprod, ``max``/``min``: running maximum/minimum); the result keeps ``x``'s dims.

    One einsum with map ``identity``, reduce ``op`` and ``scan: dim`` (format 1.1), counted
    as a sequential scan: ``n - 1`` combines per row along ``dim``."""
    site = call_site()
    x = _check(x, "scan's input", site)
    if op not in _SCANS:
        raise LoopIRError(f"{site}: scan op must be one of {', '.join(_SCANS)}, got {op!r}")
    a = x.axis(dim)
    tr = mode().tracer
    if tr is None:
        arr = x.numpy()
        return Value(x.dims, x.shape, x.dtype, data=_SCANS[op].accumulate(arr, axis=a, dtype=arr.dtype))
    y = tr.result(tr.prefix("scan") + ".y", x.dims, x.shape, x.dtype, ranks=x.ranks)
    _node(tr, "einsum", f"scan_{op}", [Access(x.name, _plain(x.ranks))], Access(y.name, _plain(y.ranks)), site,
          space=y.ranks, map="identity", reduce=op, scan=y.ranks[a])
    return y


def apply_mask(w: Value, mask: Value, density: float | None = None) -> Value:
    """``w * mask`` elementwise, declared with the mask's density (``density`` or the mask's)."""
    site = call_site()
    w, mask = _check(w, "apply_mask's tensor", site), _check(mask, "apply_mask's mask", site)
    if w.shape != mask.shape:
        raise LoopIRError(f"{site}: apply_mask needs a mask of the tensor's shape {list(w.shape)}, "
                          f"got {list(mask.shape)}")
    dens = density if density is not None else mask.density
    tr = mode().tracer
    if tr is None:
        data = (w.numpy() * mask.numpy()).astype(w.numpy().dtype)
        return Value(w.dims, w.shape, w.dtype, data=data, density=dens)
    y = tr.result(tr.prefix("apply_mask") + ".y", w.dims, w.shape, w.dtype, dens)
    _node(tr, "einsum", "apply_mask", [Access(w.name, _plain(w.ranks)), Access(mask.name, _plain(w.ranks))],
          Access(y.name, _plain(y.ranks)), site, space=y.ranks, map="mul", reduce="none")
    return y


def cast(x: Value, dtype: str) -> Value:
    """``x`` converted to ``dtype`` (an einsum with map identity)."""
    site = call_site()
    x = _check(x, "cast's input", site)
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
    _node(tr, "einsum", "cast", [Access(x.name, _plain(x.ranks))], Access(y.name, _plain(y.ranks)), site,
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
    xs = [_check(x, "opaque's inputs", site) for x in xs]
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


__all__ = ["apply_mask", "cast", "concat", "gather", "opaque", "reshape", "scan", "scatter_add", "select", "slice",
           "stack", "transpose"]
