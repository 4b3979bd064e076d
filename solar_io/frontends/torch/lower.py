"""Lowering an exported ATen graph into an einsum graph, one registry rule per op.

``lower(ep, ...)`` walks the fx graph of a ``torch.export.ExportedProgram`` in order. Every
placeholder becomes a source tensor (parameters are weights, buffers and lifted constants
are constants, user inputs are inputs), every call is lowered by its rule from
``registry.RULES`` through a ``ctx.LowerCtx``, and ops without a rule (or whose rule raises
``NoLowering``) become opaque nodes that validation runs with the original ATen op.

A complex tensor is held as a real one with a trailing rank of 2 (real, imaginary; its parts' dtype
from :data:`solar_io.dtypes.COMPLEX_PARTS`). An op reading or writing one is lowered only by a rule of
``registry.COMPLEX_RULES`` (``rules/fft.py``), which knows that layout; otherwise it is opaque, and
validation runs it on complex views of the pairs.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..._gc import gc_paused
from ..common.builder import GraphBuilder
from .ctx import (
    _INPUT_HINTS,
    _INT_HINTS,
    Args,
    LowerCtx,
    T,
    bind_args,
    complex_part,
    file_dtype,
    graph_shape,
    touches_complex,
)
from .registry import (
    OPAQUE_REASONS,
    NoLowering,
    buffer_update_rule,
    find_complex_rule,
    find_rule,
    fresh_update_rule,
    op_name,
)
from .rulebook import load_rules
from .view_writes import copied_value, lower_view_copy, view_copies

__all__ = ["Args", "Lowered", "LowerCtx", "T", "file_dtype", "lower"]


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
    lowered_ops: set[str] = field(default_factory=set)  # ops (name and name.overload) lowered by a rule
    opaque_targets: set[Any] = field(default_factory=set)  # fx targets that became opaque nodes
    selections: list[tuple[str, str, int]] = field(default_factory=list)  # choice tensors (rules/select.py)
    assumptions: list[Any] = field(default_factory=list)  # what rules assumed (graph assumptions)
    updates: dict[str, str] = field(default_factory=dict)  # output tensor -> the input it updates in place
    mutations: list[str] = field(default_factory=list)  # inputs changed but not returned: outputs after the returned


def lower(ep: Any, source_name: str | None = None, strict: bool = False, repeat: bool = True) -> Lowered:
    """Lower every node of ``ep`` (an ExportedProgram) into a GraphBuilder (``repeat``: rules may emit
    repeated structure as instances of a template, written as repeat blocks; False lowers each one).
    The cyclic collector is paused meanwhile: the program's objects are alive anyway, and its full
    passes over them were a fifth of the lowering of a Llama-3-70B."""
    with gc_paused():
        return _lower(ep, source_name, strict, repeat)


def _lower(ep: Any, source_name: str | None, strict: bool, repeat: bool) -> Lowered:
    load_rules()
    b = GraphBuilder()
    ctx = LowerCtx(b, source_name, repeat=repeat)
    env: dict[Any, Any] = {}
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs if hasattr(s.arg, "name")}
    sources: dict[str, tuple[str, str]] = {}
    opaque: list[tuple[str, str, str]] = []
    opaque_fns: dict[str, Any] = {}
    fx_tensors: dict[str, str] = {}
    user_pos = 0
    outputs: list[str] = []
    updates: dict[str, str] = {}
    in_place: dict[str, str] = {}  # result of an in-place op on a user input -> that input's tensor

    def call(node: Any, gm: Any, copies: dict) -> None:
        """Lower one call node of ``gm`` (the program's module or an inlined body's)."""
        if node in copies:  # out[:, t] = h on a tensor the program made: a scatter into its current value
            root = copies[node][0]
            ctx.node, ctx.op = node, "aten.copy_"
            env[root] = lower_view_copy(ctx, copies[node], copied_value(ctx, node, env), env[root])
            if gm is ep.graph_module or root.name not in top_names:
                fx_tensors[root.name] = env[root].name  # the tensor's last value, as the eager run leaves it
            ctx.lowered_ops.update(op_name(node.target))
            return
        body = grad_mode_body(node, gm)
        if body is not None:  # a no_grad region (``@torch.no_grad()`` on the forward): its nodes, inline
            inner = view_copies(body.graph)
            args = iter(node.args[2:])
            for n in body.graph.nodes:
                if n.op == "placeholder":
                    a = next(args)
                    env[n] = env[a] if isinstance(a, torch.fx.Node) else a
                elif n.op == "call_function":
                    call(n, body, inner)
                elif n.op == "output":
                    res = n.args[0]
                    env[node] = tuple(env[x] if isinstance(x, torch.fx.Node) else x for x in res) \
                        if isinstance(res, (list, tuple)) else env[res]
            return
        if node.target is operator.getitem:
            env[node] = env[node.args[0]][node.args[1]]
        else:
            env[node] = _lower_call(ctx, node, env, strict, opaque, opaque_fns, copies)
            x = node.args[0] if node.args else None
            if gm is ep.graph_module and _writes_user_input(node, specs) and isinstance(env[node], T) \
                    and x.name in fx_tensors:
                in_place[env[node].name] = fx_tensors[x.name]
        v = env[node]
        if isinstance(v, T) and (gm is ep.graph_module or node.name not in top_names):  # a body's, unless shadowed
            fx_tensors.setdefault(node.name, v.name)

    top_copies = view_copies(ep.graph)
    top_names = {n.name for n in ep.graph.nodes}
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
            shape, dt = graph_shape(val)
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
            call(node, ep.graph_module, top_copies)
        elif node.op == "output":
            outputs, updates, mutations = _outputs(ep, node, env, fx_tensors, in_place)
    return Lowered(b, outputs, sources, ctx.const_data, opaque, fx_tensors, opaque_fns, ctx.lowered_ops,
                   ctx.opaque_targets, ctx.selections, ctx.assumptions, updates, mutations)


def _writes_user_input(node: Any, specs: dict) -> bool:
    """True for an in-place op that export kept on a user input (``x[:, pos] = k`` as ``index_put_(x, ..)``),
    lowered functionally by :func:`buffer_update_rule`."""
    x = node.args[0] if node.args else None
    if find_rule(node.target) is not None or buffer_update_rule(node) is None or not isinstance(x, torch.fx.Node):
        return False
    spec = specs.get(x.name)
    return spec is None or spec.kind.name == "USER_INPUT"


def _outputs(ep: Any, node: Any, env: dict, fx_tensors: dict[str, str],
             in_place: dict[str, str]) -> tuple[list[str], dict[str, str], list[str]]:
    """The program's outputs (its ``USER_OUTPUT`` values, in order) and, for those that are a mutated
    user input's new value, the input each one updates in place: ``x[:, pos] = k; return x`` exports
    either as the functional value that is also the ``USER_INPUT_MUTATION`` of ``x``, or as an in-place
    op kept on ``x`` (``in_place``: its result's tensor -> ``x``'s). The output specs pair with the
    output node's values by position. A user input the program changes but does not return
    (``cache.index_copy_(2, pos, k); return attn``) is an output too, after the returned ones, updating
    that input: its new contents are a result of the program, so its writes are charged; the third
    value lists those inputs in order (validation compares each with the input after the eager run)."""
    outputs: list[str] = []
    mutated: dict[str, str] = {}  # fx value name -> graph tensor of the user input it becomes
    specs = ep.graph_signature.output_specs
    for spec, v in zip(specs, node.args[0], strict=False):
        if spec.kind.name == "USER_INPUT_MUTATION" and isinstance(v, torch.fx.Node) and spec.target in fx_tensors:
            mutated[v.name] = fx_tensors[spec.target]
    updates: dict[str, str] = {}
    for spec, v in zip(specs, node.args[0], strict=False):
        if spec.kind.name != "USER_OUTPUT" or not isinstance(v, torch.fx.Node) or not isinstance(env.get(v), T):
            continue
        name = env[v].name
        source = mutated.get(v.name) or in_place.get(name)
        if source is not None and name not in outputs and source not in updates.values():
            updates[name] = source
        outputs.append(name)
    final: dict[str, str] = {}  # user input -> the tensor of its last value (an in-place op's, or the mutation's)
    for name, source in in_place.items():
        final[source] = name
    for spec, v in zip(specs, node.args[0], strict=False):
        if spec.kind.name == "USER_INPUT_MUTATION" and v.name in mutated and isinstance(env.get(v), T):
            final[mutated[v.name]] = env[v].name
    mutations = []
    for source, name in final.items():
        if source not in updates.values() and name not in outputs and name != source:
            updates[name] = source
            outputs.append(name)
            mutations.append(source)
    return outputs, updates, mutations


def _update_rule(node: Any, copies: dict) -> Any:
    """The functional rule of an in-place op lowered in place of it: on a graph input, or on new memory in a
    program with no writes into views (``copies``, :func:`.view_writes.view_copies`). With both, the
    program is functionalised as a whole (SOL-ExecBench's NVFP4 quantisers, ``result[mask] = v`` and
    ``out[:, :, b] = q``, failed validation lowered piecewise)."""
    return buffer_update_rule(node) or (None if copies else fresh_update_rule(node))


def _lower_call(ctx: LowerCtx, node: Any, env: dict, strict: bool, opaque: list, opaque_fns: dict,
                copies: dict) -> Any:
    from ..common.errors import NoRuleError

    packet, _ = op_name(node.target)
    ctx.node, ctx.op = node, packet
    fn = find_rule(node.target)
    update = None if fn is not None else _update_rule(node, copies)
    inplace = update is not None
    if inplace:
        fn = update
        ctx.op = packet[:-1]
    reason = OPAQUE_REASONS.get(packet, "no lowering rule")
    if touches_complex(node):  # only a rule that knows the (real, imaginary) layout may lower it
        fn, inplace = find_complex_rule(node.target), False
        ctx.op = packet
        reason = OPAQUE_REASONS.get(packet, "a complex-valued op with no complex lowering rule (rules/fft.py)")
    if fn is not None:
        try:
            args = bind_args(node, env)
            result = fn(ctx, args)
            ctx.lowered_ops.update(op_name(node.target))
            if inplace:
                ctx.lowered_ops.add(ctx.op)  # the functional op's rule lowered it
                env[node.args[0]] = result
            return result
        except NoLowering as e:
            reason = str(e) or reason
    if strict:
        where = f"{ctx.source_name}: " if ctx.source_name else ""
        raise NoRuleError(f"{where}op {packet} (node {node.name}): {reason} (--strict)")
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
        shape, dt = graph_shape(v)
        name = b.source(node.name if len(vals) == 1 else f"{node.name}.{i}", shape, dt, "intermediate")
        outs.append(T(name))
    for x in ins:
        b.ranks(x)
    names = [o.name for o in outs if o is not None]
    for n in names:
        b.ranks(n)
    if not names:  # assertions and other ops without a tensor result: nothing to compute
        return None
    packet = ctx.op
    nn = b.opaque(node.name, packet, ins, names, reason, location=ctx.location, attrs=_call_record(node, env, outs))
    opaque.append((nn, packet, reason))
    ctx.opaque_targets.add(node.target)
    opaque_fns[nn] = _torch_impl(node, env, ins, [i for i, o in enumerate(outs) if o is not None], names)
    if isinstance(val, (list, tuple)):
        return tuple(outs)
    return outs[0]


def _call_record(node: Any, env: dict, outs: list) -> dict[str, str] | None:
    """How to re-run an opaque node's op (for ``--agent-fallback``): ``call``, a Python
    expression of the op with tensor arguments written ``T['graph tensor name']``, and
    ``results``, the graph tensor of each result of the op (comma-separated, empty for a
    non-tensor result). None when the target is not an ATen/library op."""
    if not isinstance(node.target, torch._ops.OpOverload):
        return None

    def text(v: Any) -> str:
        if isinstance(v, torch.fx.Node):
            val = env.get(v)
            if isinstance(val, (list, tuple)):
                return "[" + ", ".join(text(x) for x in val) + "]"
            return text(val)
        if isinstance(v, T):
            return f"T[{v.name!r}]"
        if isinstance(v, (list, tuple)):
            return ("[{}]" if isinstance(v, list) else "({},)").format(", ".join(text(x) for x in v))
        return "'cpu'" if isinstance(v, torch.device) else repr(v)

    args = [text(a) for a in node.args] + [f"{k}={text(v)}" for k, v in node.kwargs.items()]
    return {"call": f"torch.ops.{node.target}({', '.join(args)})",
            "results": ",".join(o.name if o is not None else "" for o in outs)}


class OpaqueImpl:
    """Runs the original ATen op on numpy arrays; ``keep`` selects the outputs the node still writes."""

    def __init__(self, fn: Any, names: list[str]):
        self.fn, self.names, self.keep = fn, names, list(names)

    def __call__(self, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        res = dict(zip(self.names, self.fn(*arrays), strict=True))
        return tuple(res[n] for n in self.keep)


def _torch_impl(node: Any, env: dict, ins: list[str], out_idx: list[int], names: list[str]) -> OpaqueImpl:
    """How the executor runs an opaque node: the original ATen op on torch views of the arrays."""
    target, args, kwargs = node.target, node.args, node.kwargs

    def fn(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        by_name = dict(zip(ins, arrays, strict=True))

        def conv(v: Any) -> Any:
            if isinstance(v, torch.fx.Node):
                val = env.get(v)
                if isinstance(val, T) and complex_part(v.meta.get("val")) is not None:  # (re, im) pairs
                    return torch.view_as_complex(torch.from_numpy(np.ascontiguousarray(by_name[val.name])))
                if isinstance(val, T):
                    return torch.from_numpy(np.array(by_name[val.name]))
                if isinstance(val, (list, tuple)):
                    return type(val)(torch.from_numpy(np.array(by_name[x.name]))
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
        res = [torch.view_as_real(r) if isinstance(r, torch.Tensor) and r.is_complex() else r for r in res]
        return tuple(res[i].detach().float().numpy() if res[i].is_floating_point() else res[i].numpy()
                     for i in out_idx)

    return OpaqueImpl(fn, names)


GRAD_MODE = getattr(torch.ops.higher_order, "wrap_with_set_grad_enabled", None)


def grad_mode_body(node: Any, gm: Any) -> Any | None:
    """The body of ``wrap_with_set_grad_enabled(mode, body, *args)`` (export's form of a forward under
    ``torch.no_grad()``) when it can be lowered inline: grad mode changes no value of a forward, and
    lowering it in place spares decomposing the whole program for one higher-order op. None for any
    other node, or a body with an in-place op on its inputs (a mutation of the program's inputs, which
    decomposition functionalises)."""
    if GRAD_MODE is None or node.op != "call_function" or node.target is not GRAD_MODE or len(node.args) < 2:
        return None
    sub = node.args[1]
    body = getattr(gm, sub.target, None) if isinstance(sub, torch.fx.Node) and sub.op == "get_attr" else None
    if not isinstance(body, torch.fx.GraphModule):
        return None
    if any(n.op == "call_function" and find_rule(n.target) is None and buffer_update_rule(n) is not None
           for n in body.graph.nodes):
        return None
    return body


def unruled(gm: Any) -> list[Any]:
    """The call nodes of ``gm`` (and of the no_grad bodies lowered inline) that no rule lowers
    (an in-place op counts as lowered where :func:`_update_rule` has its functional rule)."""
    copies = view_copies(gm.graph)
    out = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target is operator.getitem or n in copies:
            continue
        body = grad_mode_body(n, gm)
        if body is not None:
            out += unruled(body)
        elif find_rule(n.target) is None and _update_rule(n, copies) is None:
            out.append(n)
    return out


def program_calls(gm: Any) -> list[Any]:
    """The call nodes of ``gm`` in order, each no_grad body lowered inline by its nodes in its place."""
    out = []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        body = grad_mode_body(n, gm)
        out += program_calls(body) if body is not None else [n]
    return out
