"""Lowering an exported ATen graph into an einsum graph, one registry rule per op.

``lower(ep, ...)`` walks the fx graph of a ``torch.export.ExportedProgram`` in order. Every
placeholder becomes a source tensor (parameters are weights, buffers and lifted constants
are constants, user inputs are inputs), every call is lowered by its rule from
``registry.RULES`` through a ``LowerCtx``, and ops without a rule (or whose rule raises
``NoLowering``) become opaque nodes. ``LowerCtx`` offers the patterns most rules are made
of: broadcasting elementwise maps, reductions, permutes, reshapes and slices.
"""

from __future__ import annotations

import operator
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..common.builder import GraphBuilder, access
from .registry import NoLowering, _load_rules, find_rule, op_name

_DTYPES = {
    torch.float32: "fp32", torch.float64: "fp64", torch.float16: "fp16", torch.bfloat16: "bf16",
    torch.int64: "int64", torch.int32: "int32", torch.int16: "int16", torch.int8: "int8",
    torch.uint8: "uint8", torch.bool: "bool", torch.float8_e4m3fn: "fp8_e4m3", torch.float8_e5m2: "fp8_e5m2",
}
_INPUT_HINTS = {1: ("D",), 2: ("B", "D"), 3: ("B", "S", "D"), 4: ("N", "C", "H", "W"),
                5: ("N", "C", "T", "H", "W")}
_INT_HINTS = {1: ("B",), 2: ("B", "S"), 3: ("B", "S", "K")}


def file_dtype(dt: torch.dtype) -> str:
    """The einsum-graph dtype name of a torch dtype."""
    try:
        return _DTYPES[dt]
    except KeyError:
        raise NoLowering(f"dtype {dt} has no einsum-graph equivalent") from None


@dataclass(frozen=True, slots=True)
class T:
    """A tensor of the graph being built (by name), as a value of the fx graph."""

    name: str


class Args:
    """An op's arguments bound to its schema names (``a.input``, ``a.dim``, ...), defaults filled."""

    def __init__(self, values: dict[str, Any]):
        self.__dict__.update(values)
        self._names = tuple(values)

    def __getattr__(self, name: str) -> Any:  # absent optional arguments read as None
        return None

    def positional(self) -> list[Any]:
        return [self.__dict__[n] for n in self._names]


@dataclass
class LowerCtx:
    """What a rule sees: the builder, the fx node being lowered and node-emitting helpers."""

    b: GraphBuilder
    source_name: str | None = None
    node: Any = None  # the torch.fx.Node being lowered
    op: str = ""
    noncontig: set[str] = field(default_factory=set)
    const_data: dict[str, np.ndarray] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    # ------------------------------------------------------------------ facts
    @property
    def name(self) -> str:
        return self.node.name

    @property
    def location(self) -> str | None:
        return location(self.node, self.source_name)

    def ranks(self, x: T) -> tuple[str, ...]:
        return self.b.ranks(x.name)

    def shape(self, x: T) -> tuple[int, ...]:
        return self.b.shape(x.name)

    def dtype(self, x: T) -> str:
        return self.b.dtype(x.name)

    def out_dtype(self, i: int | None = None) -> str:
        """The dtype torch gives the current node's output (``i``-th of a tuple)."""
        val = self.node.meta.get("val")
        if i is not None:
            val = val[i]
        return file_dtype(val.dtype)

    def out_shape(self, i: int | None = None) -> tuple[int, ...]:
        val = self.node.meta.get("val")
        if i is not None:
            val = val[i]
        return tuple(int(s) for s in val.shape)

    def tensor(self, ranks: Sequence[str], dtype: str, suffix: str | None = None) -> T:
        """A new intermediate named after the current node."""
        return T(self.b.tensor(self.name if suffix is None else f"{self.name}.{suffix}", ranks, dtype))

    def scalar(self, v: float | bool, dtype: str) -> T:
        return T(self.b.constant(f"{self.name}.c", float(v), dtype))

    def data(self, arr: np.ndarray, ranks: Sequence[str], dtype: str, suffix: str = "const") -> T:
        """A stored constant with known contents (e.g. a causal mask)."""
        t = T(self.b.tensor(f"{self.name}.{suffix}", ranks, dtype, "constant"))
        self.const_data[t.name] = arr
        return t

    # ------------------------------------------------------------------ patterns
    def ew(self, map: str, *xs: T | float | bool, dtype: str | None = None, suffix: str | None = None,
           attrs: dict | None = None) -> T:
        """A broadcasting elementwise einsum (reduce none); scalars become immediate constants."""
        tensors = [x for x in xs if isinstance(x, T)]
        shapes = [self.shape(x) for x in tensors]
        out_shape = tuple(torch.broadcast_shapes(*shapes)) if shapes else ()
        nd = len(out_shape)
        if dtype is None:
            dtype = self.dtype(tensors[0]) if tensors else "fp32"
            if map in ("eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not"):
                dtype = "bool"
        picked: list[str] = []
        for j in range(nd):
            r = None
            for x, s in zip(tensors, shapes, strict=True):
                k = j - (nd - len(s))
                if k >= 0 and s[k] == out_shape[j]:
                    r = self.ranks(x)[k]
                    break
            picked.append(r if r is not None else self.b.rank("A", out_shape[j]))
        out_ranks = self.b.distinct(picked)
        inputs = []
        for x in xs:
            if not isinstance(x, T):
                x = self.scalar(x, _const_dtype(x, [self.dtype(t) for t in tensors]))
                inputs.append(access(x.name, []))
                continue
            s = self.shape(x)
            off = nd - len(s)
            inputs.append(access(x.name, [out_ranks[off + k] if s[k] == out_shape[off + k] else 0
                                          for k in range(len(s))]))
        out = self.tensor(out_ranks, dtype, suffix)
        self.b.einsum(out.name, self.op, out_ranks, inputs, access(out.name, out_ranks), map, "none",
                      attrs=attrs, location=self.location)
        return out

    def reduce(self, x: T, dims: Sequence[int] | None, keepdim: bool, reduce: str, map: str = "identity",
               dtype: str | None = None, suffix: str | None = None) -> T:
        """Reduce ``x`` over ``dims`` (None: all) with ``reduce``; keepdim keeps size-1 dims."""
        xr = self.ranks(x)
        nd = len(xr)
        dset = set(range(nd)) if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0) \
            else {d % nd for d in ([dims] if isinstance(dims, int) else dims)} if nd else set()
        out_ranks: list[str] = []
        extra: list[str] = []
        for i, r in enumerate(xr):
            if i not in dset:
                out_ranks.append(r)
            elif keepdim:
                u = self.b.rank("U", 1, set(xr) | set(extra))
                extra.append(u)
                out_ranks.append(u)
        out = self.tensor(out_ranks, dtype or self.dtype(x), suffix)
        self.b.einsum(out.name, self.op, list(xr) + extra, [access(x.name, xr)], access(out.name, out_ranks),
                      map, reduce, location=self.location)
        return out

    def permute(self, x: T, perm: Sequence[int], suffix: str | None = None) -> T:
        """A lazy (view) permute of ``x``."""
        xr = self.ranks(x)
        out_ranks = [xr[p % len(xr)] for p in perm]
        out = self.tensor(out_ranks, self.dtype(x), suffix)
        self.b.copy(out.name, self.op, out_ranks, [access(x.name, xr)], access(out.name, out_ranks), view=True,
                    location=self.location)
        moved = [p % len(xr) for p in perm if self.shape(x)[p % len(xr)] != 1]
        if moved != sorted(moved) or x.name in self.noncontig:
            self.noncontig.add(out.name)
        return out

    def reshape(self, x: T, shape: Sequence[int], suffix: str | None = None) -> T:
        """A row-major reshape; a view unless ``x`` is a non-contiguous view (then a copy)."""
        shape = _resolve_shape(shape, self.b.numel(x.name))
        xs, xr = self.shape(x), self.ranks(x)
        if tuple(shape) == xs:
            return x
        out_ranks = reshape_ranks(self.b, xr, xs, shape)
        out = self.tensor(out_ranks, self.dtype(x), suffix)
        view = x.name not in self.noncontig
        self.b.reshape(out.name, self.op, x.name, out.name, view=view, location=self.location)
        return out

    def copy(self, x: T, suffix: str | None = None) -> T:
        """A materialised copy of ``x`` (clone, contiguous)."""
        xr = self.ranks(x)
        out = self.tensor(xr, self.dtype(x), suffix)
        self.b.copy(out.name, self.op, xr, [access(x.name, xr)], access(out.name, xr), location=self.location)
        return out

    def cast(self, x: T, dtype: str, suffix: str | None = None) -> T:
        """``x`` converted to ``dtype`` (an identity einsum), or ``x`` itself if it has it."""
        if self.dtype(x) == dtype:
            return x
        return self.ew("identity", x, dtype=dtype, suffix=suffix)


def _const_dtype(x: float | bool, dtypes: list[str]) -> str:
    """The dtype of an immediate scalar next to tensors of ``dtypes``."""
    if isinstance(x, bool):
        return "bool"
    floats = [d for d in dtypes if not d.startswith(("int", "uint", "bool"))]
    if floats:
        return floats[0]
    if isinstance(x, int) and dtypes and dtypes[0] != "bool":
        return dtypes[0]
    return "fp32" if isinstance(x, float) else "int64"


def reshape_ranks(b: GraphBuilder, xr: Sequence[str], xs: Sequence[int], shape: Sequence[int]) -> tuple[str, ...]:
    """Ranks for a reshape of a tensor (ranks ``xr``, shape ``xs``) to ``shape``.

    Leading and trailing dims that keep their size keep their rank; the middle gets new
    ranks: a split of a hidden ``D`` into two reads ``H, E`` (heads, head dim), a merge of
    ``H, E`` reads ``D``, anything else keeps the family of the dims it came from.
    """
    n, m = len(xs), len(shape)
    lo = 0
    while lo < min(n, m) and xs[lo] == shape[lo]:
        lo += 1
    hi = 0
    while hi < min(n, m) - lo and xs[n - 1 - hi] == shape[m - 1 - hi]:
        hi += 1
    keep_l, keep_r = list(xr[:lo]), list(xr[n - hi:]) if hi else []
    mid_in = list(xr[lo:n - hi])
    mid_shape = list(shape[lo:m - hi])
    fams = [re.sub(r"\d+$", "", r) or r for r in mid_in]
    if len(mid_in) == 1 and len(mid_shape) == 2 and fams[0] == "D":
        hints = ["H", "E"]
    elif len(mid_shape) == 1 and fams and fams[-1] == "E":
        hints = ["D"]
    elif len(mid_shape) == 1 and fams:
        hints = [fams[0]]
    else:
        hints = [(fams[0] if fams else "U") if s != 1 else "U" for s in mid_shape]
    taken = set(keep_l) | set(keep_r)
    mid = []
    for h, s in zip(hints, mid_shape, strict=True):
        if s == 1:
            h = "U"
        r = b.rank(h, s, taken)
        taken.add(r)
        mid.append(r)
    return tuple(keep_l + mid + keep_r)


def _resolve_shape(shape: Sequence[int], numel: int) -> tuple[int, ...]:
    shape = [int(s) for s in shape]
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        shape[shape.index(-1)] = numel // known if known else 0
    return tuple(shape)


_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def location(node: Any, source_name: str | None) -> str | None:
    """``file.py:LINE`` of the innermost frame of the source file in the node's stack trace."""
    trace = node.meta.get("stack_trace") if node is not None else None
    if not trace or not source_name:
        return None
    found = None
    for path, line in _FRAME.findall(trace):
        if os.path.basename(path) == source_name:
            found = f"{source_name}:{line}"
    return found


def bind_args(node: Any, env: dict[Any, Any]) -> Args:
    """The node's arguments, fx values replaced by lowered ones, bound to schema names."""

    def conv(v: Any) -> Any:
        if isinstance(v, torch.fx.Node):
            return env[v]
        if isinstance(v, (list, tuple)):
            return type(v)(conv(x) for x in v)
        return v

    schema = node.target._schema
    vals: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args):
            vals[arg.name] = conv(node.args[i])
        elif arg.name in node.kwargs:
            vals[arg.name] = conv(node.kwargs[arg.name])
        elif arg.has_default_value():
            vals[arg.name] = arg.default_value
        else:
            vals[arg.name] = None
    return Args(vals)


@dataclass
class Lowered:
    """The result of lowering: the builder, the graph outputs, and what validation needs."""

    builder: GraphBuilder
    outputs: list[str]
    sources: dict[str, tuple[str, str]]  # tensor name -> (kind, target or user-input position)
    const_data: dict[str, np.ndarray]
    opaque: list[tuple[str, str, str]]  # (node, op, reason)
    fx_tensors: dict[str, str]  # fx node name -> tensor name (first tensor of its value)
    opaque_fns: dict[str, Any]


def lower(ep: Any, source_name: str | None = None, strict: bool = False) -> Lowered:
    """Lower every node of ``ep`` (an ExportedProgram) into a GraphBuilder."""
    _load_rules()
    b = GraphBuilder()
    ctx = LowerCtx(b, source_name)
    env: dict[Any, Any] = {}
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs if hasattr(s.arg, "name")}
    sources: dict[str, tuple[str, str]] = {}
    opaque: list[tuple[str, str, str]] = []
    opaque_fns: dict[str, Any] = {}
    fx_tensors: dict[str, str] = {}
    user_pos = 0
    outputs: list[str] = []
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            val = node.meta.get("val")
            spec = specs.get(node.name)
            kind = spec.kind.name if spec is not None else "USER_INPUT"
            if not isinstance(val, torch.Tensor):
                env[node] = val
                if kind == "USER_INPUT":
                    user_pos += 1
                continue
            shape = tuple(int(s) for s in val.shape)
            dt = file_dtype(val.dtype)
            if kind == "USER_INPUT":
                hints = (_INT_HINTS if dt.startswith(("int", "uint")) else _INPUT_HINTS).get(len(shape), ())
                name = b.source(node.name, shape, dt, "input", hints)
                b.ranks(name)
                sources[name] = ("input", str(user_pos))
                user_pos += 1
            else:
                role = "weight" if kind == "PARAMETER" else "constant"
                name = b.source(str(spec.target) if spec is not None and spec.target else node.name, shape, dt,
                                role)
                sources[name] = (kind.lower(), str(spec.target) if spec is not None else node.name)
            env[node] = T(name)
            fx_tensors[node.name] = name
        elif node.op == "call_function":
            if node.target is operator.getitem:
                env[node] = env[node.args[0]][node.args[1]]
            else:
                env[node] = _lower_call(ctx, node, env, strict, opaque, opaque_fns)
            v = env[node]
            if isinstance(v, T):
                fx_tensors.setdefault(node.name, v.name)
        elif node.op == "output":
            user_outs = {s.arg.name for s in ep.graph_signature.output_specs
                         if s.kind.name == "USER_OUTPUT" and hasattr(s.arg, "name")}
            for v in node.args[0]:
                if isinstance(v, torch.fx.Node) and v.name in user_outs and isinstance(env.get(v), T):
                    outputs.append(env[v].name)
    return Lowered(b, outputs, sources, ctx.const_data, opaque, fx_tensors, opaque_fns)


def _lower_call(ctx: LowerCtx, node: Any, env: dict, strict: bool, opaque: list, opaque_fns: dict) -> Any:
    from ..common.errors import NoRuleError

    packet, _ = op_name(node.target)
    ctx.node, ctx.op = node, packet
    fn = find_rule(node.target)
    reason = "no lowering rule"
    if fn is not None:
        try:
            args = bind_args(node, env)
            return fn(ctx, args)
        except NoLowering as e:
            reason = str(e) or reason
    if strict:
        raise NoRuleError(f"op {packet} ({node.name}): {reason} (--strict)")
    return _opaque(ctx, node, env, reason, opaque, opaque_fns)


def _opaque(ctx: LowerCtx, node: Any, env: dict, reason: str, opaque: list, opaque_fns: dict) -> Any:
    """An opaque node for ``node``: whole tensors in and out, with a torch implementation for validation."""
    b = ctx.b
    ins: list[str] = []

    def collect(v: Any) -> None:
        if isinstance(v, torch.fx.Node):
            val = env.get(v)
            if isinstance(val, T) and val.name not in ins:
                ins.append(val.name)
            elif isinstance(val, (list, tuple)):
                for x in val:
                    if isinstance(x, T) and x.name not in ins:
                        ins.append(x.name)
        elif isinstance(v, (list, tuple)):
            for x in v:
                collect(x)

    for a in list(node.args) + list(node.kwargs.values()):
        collect(a)
    val = node.meta.get("val")
    vals = list(val) if isinstance(val, (list, tuple)) else [val]
    outs: list[T | None] = []
    for i, v in enumerate(vals):
        if not isinstance(v, torch.Tensor):
            outs.append(None)
            continue
        shape = tuple(int(s) for s in v.shape)
        name = b.source(node.name if len(vals) == 1 else f"{node.name}.{i}", shape, file_dtype(v.dtype),
                        "intermediate")
        outs.append(T(name))
    for x in ins:
        b.ranks(x)
    names = [o.name for o in outs if o is not None]
    for n in names:
        b.ranks(n)
    if not names:
        raise NoLowering(f"op {ctx.op} has no tensor output")
    packet = ctx.op
    nn = b.opaque(node.name, packet, ins, names, reason, location=ctx.location)
    opaque.append((nn, packet, reason))
    opaque_fns[nn] = _torch_impl(node, env, ins, [i for i, o in enumerate(outs) if o is not None])
    if isinstance(val, (list, tuple)):
        return tuple(outs)
    return outs[0]


def _torch_impl(node: Any, env: dict, ins: list[str], out_idx: list[int]) -> Any:
    """A numpy function running the original ATen op: how the executor runs an opaque node."""
    target, args, kwargs = node.target, node.args, node.kwargs

    def fn(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        by_name = dict(zip(ins, arrays, strict=True))

        def conv(v: Any) -> Any:
            if isinstance(v, torch.fx.Node):
                val = env.get(v)
                if isinstance(val, T):
                    return torch.from_numpy(np.ascontiguousarray(by_name[val.name]))
                if isinstance(val, (list, tuple)):
                    return type(val)(torch.from_numpy(np.ascontiguousarray(by_name[x.name]))
                                     if isinstance(x, T) else x for x in val)
                return val
            if isinstance(v, (list, tuple)):
                return type(v)(conv(x) for x in v)
            if isinstance(v, torch.device):
                return torch.device("cpu")
            return v

        kw = {k: conv(v) for k, v in kwargs.items()}
        if "device" in kw:
            kw["device"] = torch.device("cpu")
        res = target(*[conv(a) for a in args], **kw)
        res = list(res) if isinstance(res, (list, tuple)) else [res]
        return tuple(res[i].detach().float().numpy() if res[i].is_floating_point() else res[i].numpy()
                     for i in out_idx)

    return fn
