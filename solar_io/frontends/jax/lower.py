"""Walking a jaxpr: operands to graph tensors, sub-jaxprs inlined, one rule per primitive.

``Lowerer.run(closed_jaxpr, args)`` lowers every equation in order. Calls (``pjit``,
``closed_call``, ``custom_jvp_call``, ``custom_vjp_call``, ``remat``) are inlined: their
sub-jaxpr is walked with its inputs bound to the caller's operands (the nodes of a fused attention
call, ``attention.py``, declare one ``kernel``). An equation with no rule
(or whose rule raises ``NoLowering``) becomes an opaque node that keeps a function running
the real primitive, so the whole graph can still be executed and validated. PRNG keys made
inside the program are held as their uint32 key data; every op that yields keys is opaque.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import jax
import numpy as np
from jax.extend import core as jcore

from ...dtypes import FRAMEWORK_TO_FILE
from ..common.builder import GraphBuilder
from ..common.errors import CaptureError
from .attention import kept_of, kernel_of
from .registry import RULES, NoLowering

#: the largest constant argument of a jaxpr taken as known when looking for masks in it (Lowerer.mask_marks):
#: integer or boolean (a mask, positions: a 4096 x 4096 causal mask) and float (a bias; larger: a weight)
KNOWN_INTS, KNOWN_FLOATS = 2**24, 2**20

#: primitives whose sub-jaxpr is inlined, and the parameter holding it
CALLS = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
         "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
         "remat": "jaxpr", "checkpoint": "jaxpr", "remat2": "jaxpr", "custom_lin": None}

#: jax dtype name -> the file's dtype: the shared framework names, plus int4 and the unsigned widths
#: jax has (counted as the signed type of their width: same bytes).
JAX_TO_FILE = {**FRAMEWORK_TO_FILE, "int4": "int4", "uint32": "int32", "uint16": "int16", "uint64": "int64"}


def file_dtype(dt: Any) -> str:
    try:
        name = np.dtype(dt).name
    except TypeError:  # extended dtypes: PRNG keys
        raise CaptureError(f"inputs of dtype {dt} (typed PRNG keys) are not supported; "
                           "pass a uint32 jax.random.PRNGKey or the random values instead") from None
    if name not in JAX_TO_FILE:
        raise NoLowering(f"dtype {name} has no file dtype")
    return JAX_TO_FILE[name]


Operand = str | float | int | bool


@dataclass
class Lowerer:
    """The lowering context: the builder, the equation being lowered and node-emitting helpers."""

    b: GraphBuilder = field(default_factory=GraphBuilder)
    source_name: str | None = None
    eqn: Any = None
    const_data: dict[str, np.ndarray] = field(default_factory=dict)
    opaque_fns: dict[str, Any] = field(default_factory=dict)
    opaque: list[tuple[str, str, str]] = field(default_factory=list)  # (node, primitive, reason)
    opaque_outs: dict[str, list[str]] = field(default_factory=dict)
    opaque_eqns: dict[str, Any] = field(default_factory=dict)  # node -> the equation it stands for
    #: broadcast_in_dim results -> (source, output dim of each source dim, -1 where it broadcasts)
    bcast: dict[str, tuple[str, list[int]]] = field(default_factory=dict)
    counter: int = 0
    kernels: int = 0  # fused attention calls lowered so far
    iota_tables: set[str] = field(default_factory=set)  # constants holding an iota's indices
    masked: list[tuple[str, tuple[int, int, bool]]] = field(default_factory=list)  # (kernel, (kept, all, known))
    uncharged: list[str] = field(default_factory=list)  # fused backwards' recomputation nodes (attention.py)
    marked: dict[int, list[str]] = field(default_factory=dict)  # mark -> tensors its equations made (run(marks=))
    #: (jaxpr, consts, known invar values) -> {p v equation: (region, mask fact)}: masked attention on the
    #: math path, looked for in every jaxpr run (masked_math.py); None: not looked for
    region_finder: Any = None
    mask_found: dict[int, tuple[Any, Any]] = field(default_factory=dict)  # mark -> (region, fact), per run
    _regions: dict[tuple, dict] = field(default_factory=dict)  # (id(jaxpr), known values) -> the finder's answer

    # ------------------------------------------------------------------ facts
    @property
    def op(self) -> str:
        return f"jax.{self.eqn.primitive.name}"

    @property
    def name(self) -> str:
        return f"{self.eqn.primitive.name}_{self.counter}"

    @property
    def location(self) -> str | None:
        try:
            from jax._src import source_info_util

            frame = source_info_util.user_frame(self.eqn.source_info.traceback)
        except Exception:
            return None
        if frame is None:
            return None
        import os

        return f"{os.path.basename(frame.file_name)}:{frame.start_line}"

    def out_dtype(self, i: int = 0) -> str:
        return file_dtype(self.eqn.outvars[i].aval.dtype)

    def out_shape(self, i: int = 0) -> tuple[int, ...]:
        return tuple(int(s) for s in self.eqn.outvars[i].aval.shape)

    def ranks(self, x: str) -> tuple[str, ...]:
        return self.b.ranks(x)

    def shape(self, x: str) -> tuple[int, ...]:
        return self.b.shape(x)

    def dtype(self, x: str) -> str:
        return self.b.dtype(x)

    def tensor(self, ranks: Sequence[str], dtype: str, suffix: str | None = None) -> str:
        return self.b.tensor(self.name if suffix is None else f"{self.name}.{suffix}", ranks, dtype)

    def scalar(self, v: float, dtype: str) -> str:
        return self.b.constant(f"{self.name}.c", float(v), dtype)

    def data(self, arr: np.ndarray, dtype: str) -> str:
        arr = np.asarray(arr)
        if arr.ndim == 0:
            return self.b.constant("const", float(arr), dtype)
        name = self.b.source("const", arr.shape, dtype, "constant")
        self.const_data[name] = arr
        return name

    # ------------------------------------------------------------------ walking
    def read(self, env: dict, v: Any) -> Operand:
        if isinstance(v, jcore.Literal):
            val = np.asarray(v.val)
            if val.ndim == 0:
                return val.item()
            return self.data(val, file_dtype(val.dtype))
        return env[v]

    def run(self, jaxpr: Any, consts: Sequence[Any], args: Sequence[Operand],
            marks: dict[int, int] | None = None) -> list[Operand]:
        """Lower ``jaxpr`` (open) with constvars bound to ``consts`` and invars to ``args``; ``marks``
        (equation index -> mark): the tensors each marked equation makes are listed in ``marked``."""
        env: dict[Any, Operand] = {}
        for v, c in zip(jaxpr.constvars, consts, strict=True):
            env[v] = c if isinstance(c, (str, int, float, bool)) else self.read(env, jcore.Literal(c, v.aval)) \
                if np.ndim(c) == 0 else self.data(np.asarray(c), file_dtype(v.aval.dtype))
            if isinstance(env[v], str) and _arange(c):  # jnp.array(range(n)): an index table, as an iota's
                self.iota_tables.add(env[v])
        for v, a in zip(jaxpr.invars, args, strict=True):
            env[v] = a
        if marks is None and self.region_finder is not None:
            marks = self.mask_marks(jaxpr, consts, args)
        for i, eqn in enumerate(jaxpr.eqns):
            made = len(self.b.tensors)
            ins = [self.read(env, v) for v in eqn.invars]
            outs = self.equation(eqn, ins)
            if marks is not None and i in marks:
                self.marked.setdefault(marks[i], []).extend(list(self.b.tensors)[made:])
            for v, o in zip(eqn.outvars, outs, strict=True):
                env[v] = o
        return [self.read(env, v) for v in jaxpr.outvars]

    def mask_marks(self, jaxpr: Any, consts: Sequence[Any], args: Sequence[Operand]) -> dict[int, int] | None:
        """Equation index -> mark of the masked attention regions of ``jaxpr`` run on ``args`` (each run
        of a body a region of its own in ``mask_found``), found by ``region_finder`` with the values of
        the arguments that are scalars or constant tensors (a scan body's step, a numpy mask)."""
        known = {}
        for v, a in zip(jaxpr.invars, args, strict=True):
            if not isinstance(a, str) or a in self.const_data:
                arr = np.asarray(self.const_data[a] if isinstance(a, str) else a, dtype=v.aval.dtype)
                if arr.size <= (KNOWN_INTS if arr.dtype.kind in "biu" else KNOWN_FLOATS):  # masks, not weights
                    known[v] = arr
        key = (id(jaxpr), *sorted((str(v), a.dtype.str, a.shape, a.tobytes()) for v, a in known.items()))
        found = self._regions.get(key)
        if found is None:  # each body once per distinct known values (every step of a scan otherwise)
            found = self._regions[key] = self.region_finder(jaxpr, consts, known)
        marks: dict[int, int] = {}
        for r, fact in found.values():
            key = len(self.mask_found)
            self.mask_found[key] = (r, fact)
            marks.update((i, key) for i in r.eqns | r.mask_eqns)
        return marks or None

    def run_closed(self, closed: Any, args: Sequence[Operand]) -> list[Operand]:
        if hasattr(closed, "jaxpr") and hasattr(closed, "consts"):
            return self.run(closed.jaxpr, closed.consts, args)
        return self.run(closed, [], args)

    def equation(self, eqn: Any, ins: list[Operand]) -> list[Operand]:
        name = eqn.primitive.name
        key = CALLS.get(name)
        if key is not None and key in eqn.params:
            sub = eqn.params[key]
            n = len(sub.jaxpr.invars) if hasattr(sub, "jaxpr") else len(sub.invars)
            fused = kernel_of(eqn)
            if fused is None:
                return self.run_closed(sub, ins[len(ins) - n:])
            start, made = len(self.b.nodes), len(self.b.tensors)  # a fused attention call (attention.py)
            finder, self.region_finder = self.region_finder, None  # its mask is the call's (declare_kept)
            try:
                outs = self.run_closed(sub, ins[len(ins) - n:])
            finally:
                self.region_finder = finder
            for t in list(self.b.tensors)[made:]:  # its index tables (a causal mask's iotas) are computed in it
                if t in self.iota_tables:
                    self.b.tensors[t].generated = True
            if len(self.b.nodes) == start:  # the index vectors a scan hoisted out of the call: no kernel
                return outs
            self.kernels += 1
            kid = f"fused_attention_{fused}#{self.kernels}"
            self.b.nodes[start:] = [replace(nd, kernel=kid) for nd in self.b.nodes[start:]]
            d_o = ins[len(ins) - n + 4] if fused == "backward" else None
            if isinstance(d_o, str):  # its recomputation of the probabilities: what d_o (input 4) does not reach
                self.uncharged.extend(_unreached(self.b.nodes[start:], d_o))
            kept = kept_of(eqn)
            if kept is not None:
                self.masked.append((kid, kept))
                self.declare_kept(start, made, outs, kept)
            return outs
        self.eqn = eqn
        self.counter += 1
        fn = RULES.get(name)
        reason = f"no lowering rule for primitive {name}"
        if any(is_key(v.aval) for v in eqn.outvars):  # slicing, reshaping, ... of PRNG keys
            fn, reason = None, f"{name} of PRNG keys: random number generation has no einsum form"
        if fn is not None:
            mark = (len(self.b.nodes), len(self.b.tensors), dict(self.b.sizes))
            try:
                outs = fn(self, eqn, ins)
                return [self.materialize(o, i) for i, o in enumerate(outs)]
            except (NoLowering, TypeError, KeyError, ValueError, IndexError) as e:
                why = str(e) if isinstance(e, NoLowering) else f"unsupported form ({type(e).__name__})"
                reason = f"{name}: {why}"
                del self.b.nodes[mark[0]:]
                for k in list(self.b.tensors)[mark[1]:]:
                    del self.b.tensors[k]
        return self.make_opaque(eqn, ins, reason)

    def declare_kept(self, start: int, made: int, outs: Sequence[Operand], kept: tuple[int, int, bool]) -> None:
        """Declare the inner score tensors of the fused call lowered from node ``start`` (tensor ``made``)
        on at the density ``kept[0] / kept[1]``, the fraction of the scores its index-made mask keeps
        (``attention.kept_positions``), as the torch frontend's causal flash rules do: the bound prices
        their work, and their bytes, at that fraction. Inner score tensors: those with the scores'
        ``kept[1]`` elements, and the mask tables and what is computed from them alone; never a
        result of the call or what a result views (a tensor of the kernel that has the scores' size
        by coincidence, ``E = T``, is priced at the fraction too: a lower bound still)."""
        nodes, fresh = self.b.nodes[start:], set(list(self.b.tensors)[made:])
        producer = {a.tensor: nd for nd in nodes for a in nd.outputs}
        shown, todo = set(), [o for o in outs if isinstance(o, str)]
        while todo:  # the results and every tensor they view
            t = todo.pop()
            if t not in shown:
                shown.add(t)
                nd = producer.get(t)
                if nd is not None and nd.view:
                    todo.extend(a.tensor for a in nd.inputs)
        masks = {t for t in fresh if self.b.tensors[t].generated}
        for nd in nodes:  # in order: what the mask tables alone compute (scalars besides)
            ins = [a.tensor for a in nd.inputs]
            if any(t in masks for t in ins) and all(t in masks or self.b.tensors[t].value is not None for t in ins):
                masks.update(a.tensor for a in nd.outputs)
        for t in fresh - shown:
            info = self.b.tensors[t]
            if info.value is None and (t in masks or int(np.prod(info.shape)) == kept[1]):
                info.density = kept[0] / kept[1]
        mark = (("masked_work", "kept positions (tensor density)"), ("kept_fraction", kept[0] / kept[1]))
        self.b.nodes[start:] = [replace(nd, attrs=nd.attrs + mark) if nd.op == "jax.dot_general" else nd
                                for nd in nodes]

    def materialize(self, o: Operand, i: int) -> Operand:
        """A rule's scalar result stays a Python scalar for 0-d outputs, else a constant tensor."""
        if isinstance(o, str) or self.out_shape(i) == ():
            return o
        return self.scalar(o, self.out_dtype(i))

    def make_opaque(self, eqn: Any, ins: list[Operand], reason: str) -> list[Operand]:
        srcs = []
        for x in ins:
            srcs.append(x if isinstance(x, str) else None)
        tensors = [x for x in srcs if x is not None]
        outs = []
        for i, v in enumerate(eqn.outvars):
            shape, dtype = physical(v.aval)
            ranks = self.b.new_ranks(["A*"] * len(shape), shape)
            outs.append(self.b.tensor(f"{self.name}" if i == 0 else f"{self.name}.{i}", ranks, dtype))
        node = self.b.opaque(self.name, self.op, list(dict.fromkeys(tensors)), outs, reason, location=self.location)
        self.opaque.append((node, eqn.primitive.name, reason))
        order = list(dict.fromkeys(tensors))
        prim, params, scalars = eqn.primitive, dict(eqn.params), list(ins)

        def run_real(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
            arr = dict(zip(order, arrays, strict=True))
            args = [_to_jax(arr[x] if isinstance(x, str) else x, v.aval)
                    for x, v in zip(scalars, eqn.invars, strict=True)]
            res = prim.bind(*args, **params)
            return tuple(_from_jax(r) for r in (res if prim.multiple_results else [res]))

        self.opaque_fns[node] = run_real
        self.opaque_eqns[node] = eqn
        self.opaque_outs[node] = outs
        return outs

    def opaque_runners(self, g: Any) -> dict[str, Any]:  # noqa: ANN401
        """The real primitive of each opaque node of ``g`` (a graph built from this lowering), returning
        only the outputs ``g`` kept of it."""
        fns = {}
        for n in g.nodes:
            if n.kind != "opaque" or n.name not in self.opaque_fns:
                continue
            keep = [self.opaque_outs[n.name].index(a.tensor) for a in n.outputs]
            fns[n.name] = lambda *xs, fn=self.opaque_fns[n.name], keep=keep: tuple(fn(*xs)[i] for i in keep)
        return fns


def _arange(c: Any) -> bool:  # noqa: ANN401
    """Whether the constant ``c`` is ``0, 1, ..., n - 1`` (integers, one dimension)."""
    a = np.asarray(c) if not isinstance(c, (str, int, float, bool)) else None
    return a is not None and a.ndim == 1 and np.issubdtype(a.dtype, np.integer) and bool(
        np.array_equal(a, np.arange(a.size)))


def _unreached(nodes: Sequence[Any], source: Operand) -> list[str]:  # noqa: ANN401
    """Names of ``nodes`` (in order) that do not depend on tensor ``source``."""
    live = {source}
    out = []
    for nd in nodes:
        if any(a.tensor in live for a in nd.inputs):
            live.update(a.tensor for a in nd.outputs)
        else:
            out.append(nd.name)
    return out


def is_key(aval: Any) -> bool:
    """True for PRNG key values (extended dtypes)."""
    return jax.dtypes.issubdtype(aval.dtype, jax.dtypes.prng_key)


def physical(aval: Any) -> tuple[tuple[int, ...], str]:
    """Shape and file dtype of a value as the graph holds it: a PRNG key as its uint32 key data."""
    if is_key(aval):
        data = jax.eval_shape(jax.random.key_data, jax.ShapeDtypeStruct(aval.shape, aval.dtype))
        return tuple(int(s) for s in data.shape), file_dtype(data.dtype)
    return tuple(int(s) for s in aval.shape), file_dtype(aval.dtype)


def _to_jax(a: Any, aval: Any) -> Any:
    """An executor array (or scalar) as the primitive's operand of ``aval``'s dtype."""
    if is_key(aval):
        return jax.random.wrap_key_data(np.asarray(a).astype(np.uint32), impl=aval.dtype._impl)
    return a.astype(np.dtype(aval.dtype)) if isinstance(a, np.ndarray) else np.asarray(a, aval.dtype)


def _from_jax(r: Any) -> np.ndarray:
    """A primitive's result as the executor holds it (keys as key data, bf16 as fp32)."""
    if is_key(r):
        r = jax.random.key_data(r)
    return np.asarray(r, dtype=np.float32) if np.dtype(r.dtype).name == "bfloat16" else np.asarray(r)
