"""Data-movement builtins: reshape, transpose, slice, select, concat, stack (see :mod:`.builtins`).

``slice`` and ``select`` are views, like numpy's basic indexing: no bytes move (the reader of the
result reads the selected elements in place); ``transpose`` materialises.
"""

from __future__ import annotations

import builtins as _py
from math import prod

import numpy as np

from ...affine import Access, AffineExpr
from .ir import LoopIRError, Value, parse_dims
from .record import check, plain, record
from .state import call_site, mode


def reshape(x: Value, dims: str, **sizes: int) -> Value:
    """``x`` reshaped row-major to ``dims``.

    Sizes: keywords, then dims of ``x`` with the same name; one remaining dim is inferred
    from the element count; if several remain, the program's Dim sizes are used first.
    """
    site = call_site()
    x = check(x, "reshape's input", site)
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
    record(tr, "data_movement", "reshape", [Access(x.name)], Access(y.name), site, movement="reshape", view=True)
    return y


def transpose(x: Value, dims: str) -> Value:
    """``x`` with its dims permuted to ``dims`` (a materialised copy)."""
    site = call_site()
    x = check(x, "transpose's input", site)
    names = parse_dims(dims)
    if sorted(names) != sorted(x.dims):
        raise LoopIRError(f"{site}: transpose of dims {','.join(x.dims)} to {dims}: the same names are needed")
    perm = [x.dims.index(d) for d in names]
    shape = tuple(x.shape[i] for i in perm)
    tr = mode().tracer
    if tr is None:
        return Value(names, shape, x.dtype, data=np.ascontiguousarray(np.transpose(x.numpy(), perm)))
    y = tr.result(tr.prefix("transpose") + ".y", names, shape, x.dtype, x.density)
    record(tr, "data_movement", "transpose", [Access(x.name, plain(x.ranks))], Access(y.name, plain(y.ranks)),
          site, movement="copy", space=y.ranks)
    return y


def slice(x: Value, dim: str, start: int, stop: int, step: int = 1, as_dim: str | None = None) -> Value:  # noqa: A001
    """Elements ``start, start + step, ... < stop`` of dim ``dim`` (a new dim ``as_dim``)."""
    site = call_site()
    x = check(x, "slice's input", site)
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
    record(tr, "data_movement", "slice", [Access(x.name, index)], Access(y.name, plain(y.ranks)), site,
          movement="copy", space=y.ranks, attrs=(("start", start), ("step", step), ("stop", stop)), view=True)
    return y


def select(x: Value, dim: str, index: int) -> Value:
    """Element ``index`` of dim ``dim``; the dim is dropped."""
    site = call_site()
    x = check(x, "select's input", site)
    a = x.axis(dim)
    if not 0 <= index < x.shape[a]:
        raise LoopIRError(f"{site}: select index {index} outside dim {dim} of size {x.shape[a]}")
    names, shape = x.dims[:a] + x.dims[a + 1:], x.shape[:a] + x.shape[a + 1:]
    tr = mode().tracer
    if tr is None:
        return Value(names, shape, x.dtype, data=np.ascontiguousarray(np.take(x.numpy(), index, axis=a)))
    y = tr.result(tr.prefix("select") + ".y", names, shape, x.dtype, x.density)
    idx = tuple(AffineExpr((), index) if i == a else AffineExpr(((r, 1),), 0) for i, r in enumerate(x.ranks))
    record(tr, "data_movement", "select", [Access(x.name, idx)], Access(y.name, plain(y.ranks)), site,
          movement="copy", space=y.ranks, attrs=(("index", index),), view=True)
    return y


def concat(xs: list[Value], dim: str, as_dim: str | None = None) -> Value:
    """``xs`` joined along the dim at the position of ``dim`` in the first (sizes add up)."""
    site = call_site()
    xs = [check(x, "concat's inputs", site) for x in xs]
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
    record(tr, "data_movement", "concat", [Access(x.name) for x in xs], Access(y.name), site, movement="concat",
          axis=y.ranks[a])
    return y


def stack(xs: list[Value], dim: str, axis: int = 0) -> Value:
    """``xs`` (same dims) stacked along a new dim ``dim`` at position ``axis``."""
    site = call_site()
    xs = [check(x, "stack's inputs", site) for x in xs]
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
        record(tr, "data_movement", "stack", [Access(x.name)], Access(p.name), site, movement="reshape", view=True)
        parts.append(p)
    if len(parts) == 1:
        return parts[0]
    y = tr.result(tr.prefix("stack") + ".y", names, shape, xs[0].dtype)
    record(tr, "data_movement", "stack", [Access(p.name) for p in parts], Access(y.name), site, movement="concat",
          axis=y.ranks[axis])
    return y
