"""Builtins indexed by an integer tensor: gather (rows picked) and scatter_add (rows accumulated).

Both share one geometry (:func:`_indexed`): the indexed dim of the base is replaced by the ids'
own dims, and dims the two share pair up (``take_along_dim``).
"""

from __future__ import annotations

import numpy as np

from ...affine import Access, AffineExpr, Indirect
from .ir import LoopIRError, Value
from .record import check, plain, record
from .state import call_site, mode


def gather(table: Value, ids: Value, dim: str) -> Value:
    """``table`` indexed along ``dim`` by the integer tensor ``ids``: dims = table's with ``dim``
    replaced by ids' dims (an embedding lookup: ``gather(emb, tokens, "V")``). A dim of ids
    that ``table`` also has (other than ``dim``) is shared, not repeated: element ``b`` of
    the result picks from row ``b`` of the table (``gather(logp, target, "C")`` with logp
    ``B,C`` and target ``B`` gives ``B``: torch's ``take_along_dim``)."""
    site = call_site()
    table, ids = check(table, "gather's table", site), check(ids, "gather's ids", site)
    a, names, shape, pos = _indexed(table, ids, dim, "gather", site)
    tr = mode().tracer
    if tr is None:
        data = table.numpy()[_picks(table, ids, dim, a, shape, pos, "gather", site)]
        return Value(names, shape, table.dtype, data=np.ascontiguousarray(data))
    y = tr.result(tr.prefix("gather") + ".y", names, shape, table.dtype)
    tidx = tuple(Indirect(ids.name) if i == a else AffineExpr(((y.ranks[pos[d]], 1),), 0)
                 for i, d in enumerate(table.dims))
    inputs = [Access(table.name, tidx), Access(ids.name, plain(tuple(y.ranks[pos[d]] for d in ids.dims)))]
    record(tr, "data_movement", "gather", inputs, Access(y.name, plain(y.ranks)), site, movement="copy",
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
    init = check(init, "scatter_add's init", site)
    ids, src = check(ids, "scatter_add's ids", site), check(src, "scatter_add's source", site)
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
    inputs = [Access(init.name, index), Access(src.name, plain(space)),
              Access(ids.name, plain(tuple(space[pos[d]] for d in ids.dims)))]
    record(tr, "einsum", "scatter_add", inputs, Access(y.name, index), site, space=space, map="identity",
          reduce="add", init=init.name)
    return y
