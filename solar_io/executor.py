"""The reference executor: runs any valid einsum graph on numpy arrays.

This pins down what a graph *means*; it is how captures are validated against their
source program. Values are computed in ``dtypes.numpy_dtype`` of each tensor (float32
for every float type except fp64, int64 for integers, bool); node outputs of an fp8 dtype are
rounded to its values (``dtypes.round_values``: nearest-even, E4M3 saturating at 448 as PyTorch
converts), while bf16/fp16 rounding is not modelled (the validation tolerances cover it).

Algorithm of an einsum node (a ``copy`` is an einsum with map identity, reduce none):

1. *Operands.* Each input access becomes an array indexed by the distinct space ranks it
   uses, in space order, without touching the iteration space. An affine access is a
   zero-copy ``as_strided`` view: the element at rank values ``r`` lives at offset
   ``sum_d stride_d * (sum_r c_dr * r + k_d)``, so each rank gets stride
   ``sum_d c_dr * stride_d``; plain ranks give a transpose, ``x[I, I]`` a diagonal,
   ``2*P + R - 1`` overlapping windows (im2col as a view). Indexes that fall into the
   declared implicit border are served by first padding the array with the node's
   ``fill`` (only as far as the indexes actually reach). An access with ``@t`` gathers
   by fancy indexing: ``t``'s own operand supplies the integer index array of that
   dimension; its values are checked against the tensor's extent plus padding. Index
   inputs (those named by ``@t``) only index: they are not arguments of the map.
2. *Contraction* (map ``mul``, reduce ``add``, at least one reduced rank): two operands
   go through ``np.matmul`` after folding ranks into (batch, M, K) x (batch, K, N) —
   BLAS, including batched matmuls that ``np.einsum`` would loop over; three or more go
   through ``np.einsum(..., optimize=True)``. If an operand view would materialise more
   than ``CONTRACT_ELEMENTS`` elements (e.g. a large im2col), the work is split along one
   of its ranks: pieces of an output rank are concatenated, pieces of a reduced rank
   summed.
3. *Everything else*: operands are broadcast against each other over the space, the map
   function (``ops.MAP_OPS[name].fn``) is applied and the reduced ranks are combined with
   ``np.add/multiply/maximum/minimum.reduce`` or ``argmax``/``argmin`` (index along the
   single reduced rank, first on ties). The space is cut into blocks of at most
   ``CHUNK_POINTS`` points, splitting output ranks first (pieces written into one result
   buffer), then reduced ranks (partial results combined; argmax/argmin keep the earlier index on
   ties), so the full iteration space is never materialised.

4. *Scan* (``scan: S``, format 1.1): the result of 2 or 3, over the output's ranks, is
   replaced by its inclusive prefix along S under the reduce op (``np.add.accumulate``,
   ``np.multiply/maximum/minimum.accumulate``): cumsum, cumprod, cummax, cummin.
5. *Scatter* (an output index ``@t``, format 1.1): the output starts as a copy of the
   ``init`` input; the map values over the whole space (chunked as in 3) are written to the
   elements their index values select: reduce ``add``/``mul``/``max``/``min`` combine with
   what is there through ``ufunc.at`` (every point counts, duplicates included); reduce
   ``none`` assigns with numpy's fancy assignment, where of several points selecting one
   element numpy keeps the last in row-major order of the space (torch leaves that choice
   undefined; byte and FLOP counts do not depend on it). Index values outside the output's
   extent are an ExecutionError.

Ranks of the space that no operand uses are handled exactly: an output rank broadcasts,
a reduced one repeats the same value (``add`` multiplies by its size, and so on).
``reshape`` is a row-major ``np.reshape``, ``concat`` is ``np.concatenate`` along the
position of ``axis`` in the output; ``view`` changes nothing about the values.
Opaque nodes run only with a caller-supplied implementation. Unless every tensor is
asked for, an intermediate is dropped after its last reader, bounding peak memory.

Modules: this one runs the graph, einsum nodes (steps 2 to 5) and the blocked broadcasting path;
``executor_operands.py`` builds the operands (step 1: strided views, gathers, padding);
``executor_matmul.py`` is the two-operand contraction as one batched BLAS matmul;
``executor_simple.py`` is a fast path for plain elementwise maps and slices (tried first, the same
values); ``executor_opaque.py`` runs an opaque node's caller-supplied implementation;
``fourier.py`` runs an fft node;
``blas_threads.py`` runs small matmuls on one BLAS thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import reduce as fold
from math import ceil, prod

import numpy as np

from . import fourier
from .affine import AffineExpr, Indirect
from .dtypes import numpy_dtype, round_values
from .errors import ExecutionError as ExecutionError  # re-exported: its public home is this module
from .errors import GraphError
from .executor_matmul import _matmul
from .executor_opaque import run_opaque
from .executor_operands import Operand, _OperandBuilder
from .executor_simple import simple_einsum
from .format.validate import validate
from .graph import Graph, Node
from .ops import MAP_OPS, REDUCE_OPS

#: Largest block of iteration points evaluated at once by the broadcasting path.
CHUNK_POINTS = 1 << 22
#: Largest operand (elements) a contraction materialises before it is split.
CONTRACT_ELEMENTS = 1 << 24
OpaqueFn = Callable[..., "tuple[np.ndarray, ...] | list[np.ndarray] | np.ndarray"]


_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def execute(graph: Graph, inputs: Mapping[str, np.ndarray], *, opaque: Mapping[str, OpaqueFn] | None = None,
            outputs: str = "outputs", forced: Callable[[str, np.ndarray], np.ndarray] | None = None
            ) -> dict[str, np.ndarray]:
    """Run ``graph`` on numpy arrays and return {tensor name: array}.

    ``inputs`` holds one array per tensor with role input, weight or constant (constants
    with a ``value`` are built from it and must not be given), shaped as the tensor's
    ranks. ``opaque`` maps a node name or an ``op`` string to a function that takes the
    node's input arrays and returns its output arrays (a tuple, or one array). Returns the
    tensors with role output, or every tensor when ``outputs="all"``. ``forced(name, array)``, when
    given, sees each computed tensor and returns the array later nodes read (validation sets a
    quantised tensor to the source program's values there). Raises GraphError
    for an invalid graph and ExecutionError for anything else that prevents running it.
    """
    if outputs not in ("outputs", "all"):
        raise ValueError(f"outputs must be 'outputs' or 'all', got {outputs!r}")
    errors = [i for i in validate(graph) if i.severity == "error"]
    if errors:
        raise GraphError(errors)
    env = _sources(graph, inputs)
    last_read = {a.tensor: i for i, n in enumerate(graph.nodes) for a in n.inputs}
    for i, node in enumerate(graph.nodes):
        results = _run_node(graph, node, env, opaque or {})
        for access, arr in zip(node.outputs, results, strict=True):
            env[access.tensor] = round_values(graph.tensor_map[access.tensor].dtype, arr)
            if forced is not None:
                env[access.tensor] = forced(access.tensor, env[access.tensor])
        if outputs != "all":
            for a in node.inputs:
                if last_read[a.tensor] == i and graph.tensor_map[a.tensor].role == "intermediate":
                    env.pop(a.tensor, None)
    names = [t.name for t in graph.tensors if outputs == "all" or t.role == "output"]
    return {n: env[n] if env[n].flags.writeable and env[n].base is None else env[n].copy() for n in names}


def _sources(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays of every tensor no node produces, checked and cast to their numpy dtype."""
    produced = {a.tensor: n.name for n in graph.nodes for a in n.outputs}
    tmap = graph.tensor_map
    for name in inputs:
        if name not in tmap:
            raise ExecutionError(f"input array {name!r} names no tensor of the graph")
        if name in produced:
            raise ExecutionError(f"tensor {name} is produced by node {produced[name]}; do not supply it")
        if tmap[name].value is not None:
            raise ExecutionError(f"constant {name} has value {tmap[name].value} in the graph; do not supply it")
    env: dict[str, np.ndarray] = {}
    missing = []
    for t in graph.tensors:
        if t.name in produced:
            continue
        shape, dt = graph.shape(t.name), numpy_dtype(t.dtype)
        if t.value is not None:
            env[t.name] = np.full(shape, t.value, dtype=dt)
        elif t.name in inputs:
            arr = np.asarray(inputs[t.name])
            if arr.shape != shape:
                raise ExecutionError(f"{t.role} tensor {t.name} [{', '.join(t.ranks)}] must have shape {shape}, "
                                     f"got {arr.shape}")
            env[t.name] = arr.astype(dt, copy=False)
        else:
            missing.append(f"{t.name} ({t.role} [{', '.join(t.ranks)}])")
    if missing:
        raise ExecutionError(f"missing input array{'s' * (len(missing) > 1)}: {', '.join(missing)}")
    return env


def _run_node(graph: Graph, node: Node, env: dict[str, np.ndarray],
              opaque: Mapping[str, OpaqueFn]) -> tuple[np.ndarray, ...]:
    if node.kind == "opaque":
        return run_opaque(graph, node, env, opaque)
    if node.kind == "fft":
        out = graph.tensor_map[node.outputs[0].tensor]
        y = fourier.run(node.fft, env[node.inputs[0].tensor], graph.shape(out.name))  # type: ignore[arg-type]
        return (y.astype(numpy_dtype(out.dtype), copy=False),)
    if node.kind == "einsum" or node.movement == "copy":
        out = simple_einsum(graph, node, env)  # plain maps and slices: executor_simple
        return (_einsum(graph, node, env, node.map or "identity", node.reduce or "none") if out is None else out,)
    out = graph.tensor_map[node.outputs[0].tensor]
    if node.movement == "reshape":
        return (env[node.inputs[0].tensor].reshape(graph.shape(out.name)),)
    return (np.concatenate([env[a.tensor] for a in node.inputs], axis=out.ranks.index(node.axis or "")),)


# ----------------------------------------------------------------------------- einsum nodes

def _einsum(graph: Graph, node: Node, env: dict[str, np.ndarray], map_name: str, reduce: str) -> np.ndarray:
    space = node.space
    sizes = {r: graph.rank_sizes[r] for r in space}
    out = node.outputs[0]
    index_tensors = {e.tensor for a in node.inputs + (out,) for e in a.index or () if isinstance(e, Indirect)}
    build = _OperandBuilder(graph, node, env, sizes)
    data = [build(a) for a in node.inputs if a.tensor not in index_tensors and a.tensor != node.init]
    out_ranks = [e.terms[0][0] for e in out.index or () if isinstance(e, AffineExpr)]
    out_space = tuple(r for r in space if r in out_ranks)
    reduced = tuple(r for r in space if r not in out_ranks)
    out_dt = np.dtype(numpy_dtype(graph.tensor_map[out.tensor].dtype))
    op = MAP_OPS[map_name]
    if op.result == "bool" or reduce in ("argmax", "argmin"):
        dt = np.result_type(*(a.dtype for a, _ in data))
    else:
        dt = out_dt
    if node.init is not None:
        vals = _broadcast_reduce(op.fn, data, space, sizes, space, "none", dt)
        return _scatter(graph, node, env, build, vals, reduce, out_dt)
    if map_name == "mul" and reduce == "add" and reduced:
        res, keep = _contract(data, out_space, reduced, sizes, dt)
        # Output ranks no operand uses: the value repeats along them.
        res = np.broadcast_to(res[tuple(slice(None) if r in keep else None for r in out_space)],
                              [sizes[r] for r in out_space])
    else:
        res = _broadcast_reduce(op.fn, data, space, sizes, out_space, reduce, dt)
    if node.scan is not None:
        res = REDUCE_OPS[reduce].ufunc.accumulate(res, axis=out_space.index(node.scan), dtype=res.dtype)
    res = res.transpose([out_space.index(r) for r in out_ranks])
    return np.asarray(res.astype(out_dt, copy=False), order="C")  # (ascontiguousarray makes 0-d 1-d)


def _scatter(graph: Graph, node: Node, env: dict[str, np.ndarray], build: _OperandBuilder, vals: np.ndarray,
             reduce: str, out_dt: np.dtype) -> np.ndarray:
    """The ``init`` tensor with ``vals`` (over the whole space) written where the output's index selects."""
    out = node.outputs[0]
    space, sizes = node.space, build.sizes
    res = np.array(env[node.init], dtype=out_dt, copy=True)
    tensor = graph.tensor_map[out.tensor]
    index = []
    for d, e in enumerate(out.index or ()):
        if isinstance(e, Indirect):
            arr, ranks = build(build.first[e.tensor])
            arr = arr.astype(np.int64, copy=False)
            lo, hi = (int(arr.min()), int(arr.max())) if arr.size else (0, 0)
            if lo < 0 or hi >= res.shape[d]:
                raise ExecutionError(f"node {node.name}: index tensor {e.tensor} holds values in [{lo}, {hi}], "
                                     f"outside [0, {res.shape[d] - 1}] of {out.tensor} dim {tensor.ranks[d]}")
        else:
            r = e.terms[0][0]  # type: ignore[union-attr]
            arr, ranks = np.arange(sizes[r], dtype=np.int64), (r,)
        index.append(arr[tuple(slice(None) if r in ranks else None for r in space)])
    index = [np.broadcast_to(i, vals.shape) for i in index]
    vals = vals.astype(out_dt, copy=False)
    if reduce == "none":
        res[tuple(index)] = vals
    else:
        REDUCE_OPS[reduce].ufunc.at(res, tuple(index), vals)  # type: ignore[union-attr]
    return res


# ----------------------------------------------------------------------------- contractions

def _contract(ops: list[Operand], out: tuple[str, ...], reduced: tuple[str, ...], sizes: dict[str, int],
              dtype: np.dtype) -> Operand:
    """Sum over ``reduced`` of the product of ``ops``; the result's ranks are the used ``out`` ranks."""
    used = {r for _, rk in ops for r in rk}
    factor = prod(sizes[r] for r in reduced if r not in used)  # reduced ranks no operand uses
    keep = tuple(r for r in out if r in used)
    res = _contract_block(ops, keep, dtype)
    return (res * res.dtype.type(factor) if factor != 1 else res), keep


def _contract_block(ops: list[Operand], keep: tuple[str, ...], dtype: np.dtype) -> np.ndarray:
    """The contraction of ``ops`` onto ``keep``, split while an operand is too large to materialise."""
    big, big_ranks = max(ops, key=lambda o: o[0].size)
    if big.size > CONTRACT_ELEMENTS:
        lengths = dict(zip(big_ranks, big.shape, strict=True))
        cands = [r for r in big_ranks if lengths[r] > 1]
        if cands:
            r = max(cands, key=lambda x: (x in keep, lengths[x]))
            n = lengths[r]
            step = ceil(n / min(n, ceil(big.size / CONTRACT_ELEMENTS)))
            parts = []
            for s in range(0, n, step):
                sub = [(a[tuple(slice(s, s + step) if x == r else slice(None) for x in rk)], rk) if r in rk
                       else (a, rk) for a, rk in ops]
                parts.append(_contract_block(sub, keep, dtype))
            return np.concatenate(parts, axis=keep.index(r)) if r in keep else fold(np.add, parts)
    ops = [(a.astype(dtype, copy=False), rk) for a, rk in ops]
    if len(ops) == 2:
        return _matmul(ops[0], ops[1], keep)
    letters = {r: chr(ord("a") + i) if i < 26 else chr(ord("A") + i - 26)
               for i, r in enumerate(dict.fromkeys(r for _, rk in ops for r in rk))}
    spec = ",".join("".join(letters[r] for r in rk) for _, rk in ops) + "->" + "".join(letters[r] for r in keep)
    return np.einsum(spec, *(a for a, _ in ops), optimize=True)


# ----------------------------------------------------------------------------- map and reduce

def _broadcast_reduce(fn: Callable[..., np.ndarray], ops: list[Operand], space: tuple[str, ...],
                      sizes: dict[str, int], out: tuple[str, ...], reduce: str, dtype: np.dtype) -> np.ndarray:
    """Apply ``fn`` over the space and reduce the ranks not in ``out``, block by block.

    Returns an array over ``out`` (space order). Blocks of output ranks are written into
    one result buffer; blocks of reduced ranks are combined pairwise in order.
    """
    reduced = [r for r in space if r not in out]
    axes = tuple(space.index(r) for r in reduced)
    arg = reduce in ("argmax", "argmin")

    def direct(rng: dict[str, tuple[int, int]]) -> tuple[np.ndarray, np.ndarray | None]:
        shape = [rng[r][1] - rng[r][0] for r in space]
        args = [a[tuple(slice(*rng[r]) for r in rk)][tuple(slice(None) if r in rk else None for r in space)]
                .astype(dtype, copy=False) for a, rk in ops]
        vals = np.broadcast_to(fn(*args), shape)
        if reduce == "none":
            return vals, None
        if arg:
            ax = axes[0]
            idx = (np.argmax if reduce == "argmax" else np.argmin)(vals, axis=ax)
            best = np.take_along_axis(vals, np.expand_dims(idx, ax), ax).squeeze(ax)
            return best, idx + rng[reduced[0]][0]
        return _UFUNCS[reduce].reduce(vals, axis=axes), None

    def length(rng: dict[str, tuple[int, int]], r: str) -> int:
        return rng[r][1] - rng[r][0]

    def pieces(rng: dict[str, tuple[int, int]], ranks: list[str] | tuple[str, ...]) -> list[dict] | None:
        """``rng`` cut along its longest rank among ``ranks`` into blocks of about CHUNK_POINTS, if too big."""
        points = prod(length(rng, r) for r in space)
        cands = [r for r in ranks if length(rng, r) > 1]
        if points <= CHUNK_POINTS or not cands:
            return None
        r = max(cands, key=lambda x: length(rng, x))
        lo, hi = rng[r]
        step = ceil((hi - lo) / min(hi - lo, ceil(points / CHUNK_POINTS)))
        return [{**rng, r: (s, min(s + step, hi))} for s in range(lo, hi, step)]

    def reduced_block(rng: dict[str, tuple[int, int]]) -> tuple[np.ndarray, np.ndarray | None]:
        parts = pieces(rng, reduced)
        if parts is None:
            return direct(rng)
        best, idx = reduced_block(parts[0])
        for sub in parts[1:]:
            v, i = reduced_block(sub)
            if arg:  # strict comparison keeps the earlier index on ties
                better = v > best if reduce == "argmax" else v < best
                best, idx = np.where(better, v, best), np.where(better, i, idx)
            else:
                best = _UFUNCS[reduce](best, v)
        return best, idx

    full = {r: (0, sizes[r]) for r in space}
    if pieces(full, out) is None:
        vals, idx = reduced_block(full)
        return vals if idx is None else idx
    result: np.ndarray | None = None
    todo = [full]
    while todo:
        rng = todo.pop()
        parts = pieces(rng, out)
        if parts is not None:
            todo.extend(parts)
            continue
        vals, idx = reduced_block(rng)
        block = idx if arg else vals
        if result is None:
            result = np.empty([sizes[r] for r in out], dtype=block.dtype)
        result[tuple(slice(*rng[r]) for r in out)] = block
    assert result is not None
    return result
