"""``--agent-fallback``: hand the opaque nodes of a captured graph to the LLM translation loop.

A graph-level post-pass. For each opaque node (an op the PyTorch frontend has no rule for)
whose op the frontend recorded as re-runnable (node attrs ``call`` and ``results``, see
``torch/lower.py``), it

1. writes the op as a small PyTorch source program of its own: ``forward`` applies the op
   to the node's input tensors (their shapes and dtypes from the graph, non-tensor
   arguments as recorded), ``get_inputs`` draws seeded random inputs. An op the frontend
   can run but not write down (a JAX primitive such as ``pure_callback``: its parameters
   are Python objects) is described instead (name, inputs, outputs) and run through the
   frontend's own implementation (``impls``; for a JAX capture, taken from a re-trace of
   the model file);
2. runs it for golden outputs and asks the translation loop (``translate.obtain``: cache,
   model, sandboxed run, comparison, repair) for an Affine Loop IR program reproducing them;
   for a custom (non-ATen) op, the model file that defines or uses it is sent along;
3. lifts the program and splices its nodes into the graph in place of the opaque node: the
   boundary tensors keep their names, the program's ranks take the names of the boundary
   tensors' ranks, internal tensors and nodes are prefixed with the opaque node's name;
4. re-validates the graph (semantic checks). A node whose translation or splice fails stays
   opaque, with the failure appended to its ``reason``, and is reported.

The spliced nodes keep the source op as ``op`` and say how they were obtained in ``attrs``
(``fallback``); the graph's validation record says which nodes were translated.
"""

from __future__ import annotations

import keyword
import re
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ...affine import Access, AffineExpr, Indirect
from ...dtypes import FILE_TO_FRAMEWORK, NUMPY_NATIVE, numpy_dtype
from ...errors import SolarIOError
from ...format.validate import validate
from ...graph import Graph, Node, Tensor
from ..common.errors import CaptureError
from .adapters import Golden, _load, golden_torch
from .client import DEFAULT_MODEL, Client
from .sandbox import DEFAULT_MEMORY, DEFAULT_TIMEOUT, require_jail
from .translate import lift_code, obtain

#: graph dtype -> torch dtype attribute, for the (numpy-held) inputs of an op's source program
NUMPY_TO_TORCH = {file: FILE_TO_FRAMEWORK[file] for file in NUMPY_NATIVE}


class FallbackError(SolarIOError):
    """Why one opaque node could not be replaced (it stays opaque)."""


@dataclass
class FallbackReport:
    """The graph after the pass, the nodes replaced (opaque name -> number of nodes spliced
    in) and those left opaque, with the reason."""

    graph: Graph
    replaced: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class OpProgram:
    """An opaque node's op as a source program: its text, and the program's input and
    output names (identifiers) -> the graph tensors they stand for."""

    text: str
    inputs: dict[str, str]
    outputs: dict[str, str]
    custom: bool  # not an ATen op: the model file that defines it goes with the request


def identifiers(names: list[str], taken: set[str] | None = None) -> dict[str, str]:
    """{python identifier: name} for graph tensor names (``fc.weight`` -> ``fc_weight``)."""
    used = set(taken or ())
    out: dict[str, str] = {}
    for n in names:
        base = re.sub(r"\W", "_", n)
        if not base or base[0].isdigit() or keyword.iskeyword(base) or base in ("T", "torch", "np"):
            base = "t_" + base
        ident, k = base, 2
        while ident in used:
            ident, k = f"{base}_{k}", k + 1
        used.add(ident)
        out[ident] = n
    return out


def op_program(g: Graph, node: Node, source: str) -> OpProgram:
    """The source program of opaque ``node`` (FallbackError if its op cannot be re-run)."""
    attrs = dict(node.attrs)
    call, results = attrs.get("call"), attrs.get("results")
    if not isinstance(call, str) or not isinstance(results, str) or not call.startswith("torch.ops."):
        raise FallbackError("the frontend recorded no re-runnable call for this op")
    from ..torch.check import RANDOM_OPS

    if node.op.split(".")[-1] in RANDOM_OPS:
        raise FallbackError("a random op: no translation can be checked against its values")
    ins = identifiers([a.tensor for a in node.inputs])
    outs = identifiers([a.tensor for a in node.outputs], set(ins))
    order = results.split(",")
    lines = []
    for t in [*ins.values(), *outs.values()]:
        if g.tensor_map[t].dtype not in NUMPY_TO_TORCH:
            raise FallbackError(f"tensor {t} has dtype {g.tensor_map[t].dtype}, which the op's golden run cannot "
                                f"hold (supported: {', '.join(NUMPY_TO_TORCH)})")
    for ident, t in ins.items():
        shape, tdt = tuple(g.shape(t)), NUMPY_TO_TORCH[g.tensor_map[t].dtype]
        if tdt == "bool":
            value = f"rng.random({shape}) < 0.5"
        elif tdt.startswith(("int", "uint")):
            value = f"rng.integers(0, 2, size={shape})"
        else:
            value = f"rng.standard_normal({shape})"
        lines.append(f"        {ident!r}: torch.from_numpy(np.asarray({value})).to(torch.{tdt}),")
    picks = []
    for ident, t in outs.items():
        if t not in order:
            raise FallbackError(f"output {t} is not among the op's recorded results")
        picks.append(f"{ident!r}: r" if len(order) == 1 else f"{ident!r}: r[{order.index(t)}]")
    names = ", ".join(ins)
    text = (f'"""The op {node.op} of {source} (graph node {node.name}), which solar-io has no lowering rule for,\n'
            'as a program of its own: forward applies it to the inputs get_inputs draws."""\n\n'
            "import numpy as np\nimport torch\n\n\n"
            f"def forward({names}):\n"
            f"    T = {{{', '.join(f'{t!r}: {i}' for i, t in ins.items())}}}\n"
            f"    r = {call}\n"
            f"    return {{{', '.join(picks)}}}\n\n\n"
            "def get_inputs(rng):\n    return {\n" + "\n".join(lines) + "\n    }\n")
    return OpProgram(text, ins, outs, custom=not call.startswith("torch.ops.aten."))


def described_program(g: Graph, node: Node, source: str) -> OpProgram:
    """A description of opaque ``node`` as the source text of a translation whose golden
    data come from running the op through the frontend (for ops with no call record)."""
    ins = identifiers([a.tensor for a in node.inputs])
    outs = identifiers([a.tensor for a in node.outputs], set(ins))

    def line(kind: str, ident: str, t: str) -> str:
        return f"# {kind} {ident}: {g.tensor_map[t].dtype}{list(g.shape(t))}"

    text = (f"# The op {node.op} of {source} (graph node {node.name}), which solar-io cannot lower\n"
            f"# ({node.reason}). Translate what it computes from its inputs to its outputs; {source},\n"
            "# which uses it, is attached to the request.\n"
            + "\n".join([line("input ", i, t) for i, t in ins.items()] + [line("output", i, t) for i, t in
                                                                            outs.items()]) + "\n")
    return OpProgram(text, ins, outs, custom=True)


def golden_from_impl(g: Graph, node: Node, prog: OpProgram, impl, seed: int) -> Golden:
    """Golden data of ``node``: seeded random inputs (floats standard normal, integers 0 or
    1, booleans with probability 0.5) through ``impl`` (arrays in, outputs in node order)."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for ident, t in prog.inputs.items():
        shape, dt = tuple(g.shape(t)), np.dtype(numpy_dtype(g.tensor_map[t].dtype))
        if dt == np.bool_:
            arrays[ident] = rng.random(shape) < 0.5
        elif dt.kind in "iu":
            arrays[ident] = rng.integers(0, 2, size=shape).astype(dt)
        else:
            arrays[ident] = rng.standard_normal(shape).astype(dt)
    try:
        res = impl(*arrays.values())
    except Exception as e:
        raise FallbackError(f"running the op raised {type(e).__name__}: {' '.join(str(e).split())[:200]}") from None
    res = res if isinstance(res, (tuple, list)) else (res,)
    if len(res) != len(prog.outputs):
        raise FallbackError(f"the op's implementation returned {len(res)} outputs, the node has {len(prog.outputs)}")
    outs = {ident: np.asarray(r) for ident, r in zip(prog.outputs, res, strict=True)}
    return Golden(arrays, outs, "other", f"{node.op} run by the {g.producer.frontend} frontend on seeded inputs")


def frontend_impls(g: Graph, model_file: Path) -> dict:
    """{opaque node: implementation} from the frontend that captured ``g``, for ops it can
    run but recorded no call for: a JAX capture is traced again (same node names). Empty
    when the frontend offers none or the re-trace fails."""
    if g.producer.frontend != "jax":
        return {}
    try:
        from ..jax.capture import capture_program, load_program

        cap = capture_program(load_program(model_file), validate=False)
    except Exception:  # noqa: BLE001 - the nodes then stay opaque, each with its reason
        return {}
    return cap.lowerer.opaque_runners(cap.graph)


def _ensure_registered(call: str, model_file: Path) -> None:
    """Load ``model_file`` when the op of ``call`` is not registered in this process (a
    custom op registers when its defining file is imported)."""
    import torch

    qual = call.split("(", 1)[0]
    try:
        eval(qual, {"torch": torch})  # noqa: S307 - an attribute path written by the torch frontend
    except (AttributeError, RuntimeError):
        _load(model_file)


def _rank_map(g: Graph, ir: Graph, boundary: list[tuple[str, str]]) -> dict[str, str]:
    """{IR rank: graph rank}: boundary tensors' ranks take the graph's names; the others keep
    theirs unless the graph uses the name with another size or for a rank already mapped."""
    sizes, ir_sizes = g.rank_sizes, ir.rank_sizes
    rmap: dict[str, str] = {}
    taken: set[str] = set()
    for ir_t, host_t in boundary:
        for a, b in zip(ir.tensor_map[ir_t].ranks, g.tensor_map[host_t].ranks, strict=True):
            if a not in rmap and b not in taken and ir_sizes[a] == sizes[b]:
                rmap[a] = b
                taken.add(b)
    for r, n in ir.ranks:
        if r in rmap:
            continue
        name, k = r, 2
        while (name in sizes and sizes[name] != n) or name in taken:
            name, k = f"{r}_{k}", k + 1
        rmap[r] = name
        taken.add(name)
    return rmap


def _index(e, rmap: dict[str, str], tmap: dict[str, str]):
    if isinstance(e, Indirect):
        return Indirect(tmap[e.tensor])
    return AffineExpr(tuple(sorted((rmap[r], c) for r, c in e.terms)), e.const)


def _access(a: Access, rmap: dict[str, str], tmap: dict[str, str]) -> Access:
    idx = None if a.index is None else tuple(_index(e, rmap, tmap) for e in a.index)
    return Access(tmap[a.tensor], idx)


def splice(g: Graph, node: Node, ir: Graph, prog: OpProgram, note: str) -> tuple[Graph, int]:
    """``g`` with opaque ``node`` replaced by the nodes of ``ir``, the lifted program of
    ``prog`` (FallbackError when the boundary does not match); and how many nodes came in."""
    boundary = []
    for ident, host in {**prog.inputs, **prog.outputs}.items():
        t = ir.tensor_map.get(ident)
        if t is None:
            if ident in prog.inputs:
                continue  # an input the program does not read (e.g. only its shape mattered)
            raise FallbackError(f"the IR program has no output {ident}")
        ht = g.tensor_map[host]
        if tuple(ir.shape(ident)) != tuple(g.shape(host)) or t.dtype != ht.dtype:
            raise FallbackError(f"the IR program's {ident} is {t.dtype}{list(ir.shape(ident))}, the graph's "
                                f"{host} is {ht.dtype}{list(g.shape(host))}")
        boundary.append((ident, host))
    extra = [t.name for t in ir.tensors if t.name not in prog.inputs and t.name not in prog.outputs]
    if any(t.role in ("input", "weight") for t in ir.tensors if t.name in extra):
        raise FallbackError("the IR program has inputs that are not the op's")
    rmap = _rank_map(g, ir, boundary)
    tmap = {ident: host for ident, host in boundary}
    used = set(g.tensor_map)
    for t in extra:
        name, k = f"{node.name}.{t}", 2
        while name in used:
            name, k = f"{node.name}.{t}_{k}", k + 1
        tmap[t] = name
        used.add(name)
    node_names = {n.name for n in g.nodes if n is not node}
    new_nodes = []
    for n in ir.nodes:
        name = tmap[n.outputs[0].tensor] if n.outputs else f"{node.name}.{n.name}"
        name = name if name not in node_names else f"{node.name}.{n.name}"
        node_names.add(name)
        new_nodes.append(replace(
            n, name=name, op=node.op, location=node.location, space=tuple(rmap[r] for r in n.space),
            inputs=tuple(_access(a, rmap, tmap) for a in n.inputs),
            outputs=tuple(_access(a, rmap, tmap) for a in n.outputs),
            pad=tuple((tmap[t], tuple((rmap[r], lo, hi) for r, lo, hi in dims)) for t, dims in n.pad),
            init=tmap.get(n.init, n.init) if n.init else n.init,
            attrs=tuple(sorted({**{k: v for k, v in n.attrs if k != "call"}, "fallback": note}.items()))))
    new_tensors = [Tensor(tmap[t.name], tuple(rmap[r] for r in t.ranks), t.dtype,
                          "constant" if t.value is not None else "intermediate", t.density, t.value)
                   for t in ir.tensors if t.name in extra]
    known = set(g.rank_sizes)
    ranks = list(g.ranks) + [(rmap[r], n) for r, n in ir.ranks if rmap[r] not in known]
    pos = g.nodes.index(node)
    out = replace(g, ranks=tuple(ranks), tensors=g.tensors + tuple(new_tensors),
                  nodes=g.nodes[:pos] + tuple(new_nodes) + g.nodes[pos + 1:])
    errors = [i for i in validate(out) if i.severity == "error"]
    if errors:
        raise FallbackError(f"the spliced graph is invalid: {errors[0].message}")
    return out, len(new_nodes)


def golden_of(prog: OpProgram, path: Path, model_file: Path, seed: int, call: str) -> Golden:
    """Golden outputs of the op's program at ``path``: PyTorch eager on seeded inputs."""
    _ensure_registered(call, model_file)
    gold = golden_torch(path, seed)
    return replace(gold, reference=f"{gold.reference}, the op alone")


def resolve_opaque(g: Graph, model_file: Path | str, *, client: Client | None = None, model: str | None = None,
                   max_attempts: int = 5, no_cache: bool = False, seed: int = 0, timeout: float = DEFAULT_TIMEOUT,
                   memory: int = DEFAULT_MEMORY, impls: dict | None = None, log=None,
                   unsafe_exec: bool = False) -> FallbackReport:
    """Replace the opaque nodes of ``g`` (captured from ``model_file``) by LLM translations
    checked against the op; see the module docstring. ``impls``: {node: callable on numpy
    arrays} for ops without a call record (default: ``frontend_impls``). Never raises for
    one node's failure (but JailUnavailable, before any work, when translated programs
    cannot be jailed and ``unsafe_exec`` is not given)."""
    require_jail(unsafe_exec)
    model_file = Path(model_file)
    log = log or (lambda m: print(m, file=sys.stderr))
    model = model or DEFAULT_MODEL
    report = FallbackReport(g)
    for node in [n for n in g.nodes if n.kind == "opaque"]:
        try:
            call = dict(node.attrs).get("call")
            if call is None and impls is None:
                impls = frontend_impls(g, model_file)
            if call is None and node.name in (impls or {}):
                prog = described_program(report.graph, node, model_file.name)
            else:
                prog = op_program(report.graph, node, model_file.name)
            with tempfile.TemporaryDirectory(prefix="solar-io-fallback-") as tmp:
                path = Path(tmp) / f"{next(iter(identifiers([node.name])))}_op.py"
                path.write_text(prog.text)
                if call is None:
                    gold = golden_from_impl(report.graph, node, prog, impls[node.name], seed)
                else:
                    gold = golden_of(prog, path, model_file, seed, str(call))
                context = None
                if prog.custom:
                    context = (f"The op is defined or used in {model_file.name} (for reference; translate only "
                               "the op):\n"
                               f"```\n{model_file.read_text(errors='replace')}\n```")
                out = obtain(path, path.read_bytes(), gold, model=model, client=client, max_attempts=max_attempts,
                             no_cache=no_cache, timeout=timeout, memory=memory, log=log, context=context,
                             unsafe=unsafe_exec)
                ir = lift_code(out.code, path, graph=out.graph, unsafe=unsafe_exec)
            note = (f"agent translation of {node.op} by {model} in {out.attempts} attempt(s), checked against "
                    f"{gold.reference}")
            report.graph, count = splice(report.graph, node, ir, prog, note)
            report.replaced[node.name] = count
            log(f"{model_file.name}: opaque node {node.name} ({node.op}) replaced by {count} translated node(s)")
        except (SolarIOError, CaptureError) as e:
            why = " ".join(str(e).split())[:300]
            report.failed[node.name] = why
            report.graph = _mark_failed(report.graph, node, why)
            log(f"{model_file.name}: opaque node {node.name} ({node.op}) stays opaque: {why}")
    if report.replaced:
        v = report.graph.validation
        note = (f"opaque node(s) {', '.join(report.replaced)} replaced by LLM translations, each checked against "
                "the op alone (--agent-fallback)")
        report.graph = replace(report.graph, validation=replace(v, reason=f"{v.reason}; {note}" if v.reason else note))
    return report


def _mark_failed(g: Graph, node: Node, why: str) -> Graph:
    n2 = replace(node, reason=f"{node.reason}; agent fallback failed: {why}")
    return replace(g, nodes=tuple(n2 if n is node else n for n in g.nodes))


__all__ = ["FallbackError", "FallbackReport", "OpProgram", "op_program", "resolve_opaque", "splice"]
