"""The capture pipeline: load -> export on meta tensors -> lower -> build -> validate.

``torch.export`` traces the model on ``meta`` tensors (no weight memory), keeping high-level
ops (``linear``, ``layer_norm``, ``scaled_dot_product_attention``, ``lstm``, ...). If some
op has no lowering rule, the program is decomposed once with the core-ATen decomposition
table *minus every op that has a rule*, so ops we lower stay whole and the rest become ops
we can lower; what still has no rule becomes an opaque node.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from ... import __version__
from ..._gc import gc_paused
from ...graph import Graph, Producer, Validation
from ...liveness import with_live_work
from ...metrics import with_index_assumptions
from ...node_lists import with_listed_nodes
from ..common.errors import CaptureError, NoRuleError
from ..common.returned_views import with_returned_views
from ..common.validation import skipped
from .fake_rules import recurrent_shapes
from .loader import Source, load_source
from .lower import Lowered, lower, unruled
from .math_attention import masked_regions
from .registry import find_rule
from .routing import Routing, parse_routing
from .rulebook import load_rules
from .specialise import Plan, assumptions, needs_values, replaying, specialise

DEFAULT_BUDGET = 2 << 30


@dataclass
class Capture:
    """A capture in progress: the source, its exported program and the lowered graph."""

    source: Source
    program: Any
    lowered: Lowered
    graph: Graph
    outputs: list[str]
    plan: Plan | None = None  # the value specialisation, when the export needed one


def export(source: Source, *, routing: Routing | None = None, budget: int = DEFAULT_BUDGET, seed: int = 0,
           plan_out: list | None = None) -> Any:
    """The ExportedProgram of a fresh meta-device instance of the model.

    Where the program's shapes or branches depend on tensor values, the export is redone with those
    values specialised (:mod:`.specialise`, under ``routing``); the plan is appended to ``plan_out``.
    """
    try:
        ep = _export(source.model("meta"), source.inputs("meta"))
        if _unbacked(ep):
            raise _Unbacked("the exported program has data-dependent (unbacked) sizes")
    except CaptureError:  # the model's own loading (get_inputs, __init__) failed: its line as it is
        raise
    except Exception as e:
        if not needs_values(e):
            raise _export_error(source, e) from e
        plan = specialise(source, routing or Routing(), budget=budget, seed=seed)
        try:
            ep = _export(replaying(source.model("meta"), plan), source.inputs("meta"))
        except CaptureError:
            raise
        except Exception as e2:
            raise _export_error(source, e2, specialised=True) from e2
        if plan_out is not None:
            plan_out.append(plan)
    load_rules()
    return decompose(ep) if unruled(ep.graph_module) else ep


class _Unbacked(Exception):
    """An export that succeeded with data-dependent (unbacked) sizes, e.g. a ``nonzero``."""


@contextmanager
def numbers_on_cpu() -> Iterator[None]:
    """``torch.tensor(x)`` of one Python number made on the CPU while the forward is traced on meta.

    Export lifts a tensor the forward creates from data as a constant of the program; on meta its
    value is lost (``torch.tensor(scale, device=x.device)``, ``torch.tensor(448.0)``), and the graph
    would compute with made-up numbers. A 0-d CPU tensor mixes with tensors of any device, so it is
    kept on the CPU, and the program's constant holds the number. The three factories
    (``torch.tensor``, ``as_tensor``, ``scalar_tensor``) are replaced on the ``torch`` module for the
    export, not intercepted with a ``TorchFunctionMode``: a mode sees every torch call of the forward,
    which made the export of a Llama-3-8B 10-15% slower. A forward holding its own reference to a
    factory (``from torch import tensor``) makes the number on meta; validation then says the
    constant has no value (:func:`.check._same_constants`), never computes with a wrong one."""
    saved = {name: getattr(torch, name) for name in _NUMBER_FACTORIES}
    for name, factory in saved.items():
        setattr(torch, name, _on_cpu(factory))
    try:
        yield
    finally:
        for name, factory in saved.items():
            setattr(torch, name, factory)


def _on_cpu(factory: Any) -> Any:  # noqa: ANN401
    @functools.wraps(factory)
    def made(*args: Any, **kwargs: Any) -> Any:  # noqa: ANN401
        if args and isinstance(args[0], (bool, int, float)):
            device = kwargs.get("device")
            if device is None or torch.device(device).type == "meta":
                kwargs["device"] = "cpu"
        return factory(*args, **kwargs)

    return made


_NUMBER_FACTORIES = ("tensor", "as_tensor", "scalar_tensor")


def _export(model: Any, args: list[Any]) -> Any:
    with warnings.catch_warnings(), _quiet_torch_logs(), recurrent_shapes():
        warnings.simplefilter("ignore")
        try:
            with torch.device("meta"), numbers_on_cpu():  # tensors the forward creates live on meta too
                return torch.export.export(model, tuple(args), strict=False)
        except Exception as e:  # a CPU number the forward then mixed with meta tensors (stacked, expanded)
            if "device" not in str(e):
                raise
        with torch.device("meta"):  # its numbers then have no value in the program: validation finds them
            return torch.export.export(model, tuple(args), strict=False)


def _unbacked(ep: Any) -> bool:
    """Whether a tensor of the program has a data-dependent size, in the top graph or in a subgraph
    of a higher-order op (``@torch.no_grad()`` on ``run`` puts the whole body in
    ``wrap_with_set_grad_enabled``'s submodule)."""
    for gm in ep.graph_module.modules():
        if not isinstance(gm, torch.fx.GraphModule):
            continue
        for n in gm.graph.nodes:
            for v in tree_flatten(n.meta.get("val"))[0]:
                if isinstance(v, torch.Tensor) and any(not isinstance(s, int) for s in v.shape):
                    return True
    return False


def _export_error(source: Source, e: BaseException, specialised: bool = False) -> CaptureError:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    hint = ""
    if not specialised and ("DataDependent" in type(e).__name__ or "data-dependent" in first):
        hint = (" (the model branches on tensor values, e.g. `if not mask.any():` in a mixture-of-experts "
                "loop; the work then depends on the data: write the branch without a Python condition on a "
                "tensor, or give --entry a function that does)")
    what = "torch.export failed" if not specialised else "torch.export of the value-specialised model failed"
    return CaptureError(f"{source.name}: {what}: {type(e).__name__}: {first[:300]}{hint}")


@contextmanager
def _quiet_torch_logs() -> Iterator[None]:
    """Silence what torch prints while tracing (log records, graph dumps on export failures):
    the capture reports a failure in one line. Redirects file descriptors 1 and 2 to /dev/null."""
    logger = logging.getLogger("torch")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = []
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            saved.append((fd, os.dup(fd)))
            os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:  # no real descriptors (embedded interpreters): keep the streams
        pass
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        for fd, dup in saved:
            os.dup2(dup, fd)
            os.close(dup)
        logger.setLevel(level)


def decompose(ep: Any, also: frozenset = frozenset()) -> Any:
    """``ep`` decomposed with the core-ATen table, except ops that have a rule (unless in ``also``)."""
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if find_rule(op) is not None and op not in also:
            table.pop(op)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ep.run_decompositions(table)
    except Exception:  # keep the undecomposed program: its unruled ops become opaque
        return ep


def capture_source(source: Source, *, validate: bool = True, strict: bool = False, seed: int = 0,
                   validate_budget: int = DEFAULT_BUDGET, routing: Routing | str | None = None,
                   repeat: bool = True) -> Capture:
    """Capture ``source`` into a Graph with its validation record (``repeat=False``: no repeat blocks,
    every recurrent step lowered on its own; the graph is the same).

    ``routing`` (``observed``, ``uniform``, ``balanced``, ``skewed=ALPHA``; :mod:`.routing`) is the MoE
    routing a value-specialised capture assumes; it changes nothing in a program without
    data-dependent shapes.
    """
    routing = routing if isinstance(routing, Routing) else parse_routing(routing)
    plans: list[Plan] = []
    ep = export(source, routing=routing, budget=validate_budget, seed=seed, plan_out=plans)
    plan = plans[0] if plans else None
    lowered = lower(ep, source.name, repeat=repeat)
    retry = frozenset(t for t in lowered.opaque_targets if t in torch.export.default_decompositions())
    if retry:  # a rule declined these ops (NoLowering): lower their decompositions instead
        ep = decompose(ep, retry)
        lowered = lower(ep, source.name, repeat=repeat)
    if strict and lowered.opaque:
        node, op, reason = lowered.opaque[0]
        raise NoRuleError(f"{source.name}: op {op} (node {node}): {reason} (--strict)")
    with gc_paused():  # acyclic objects built in bulk, as in the lowering
        graph = _built(source, lowered, plan)
    b = lowered.builder
    outputs = b.output_names
    cap = Capture(source, ep, lowered, graph, outputs, plan)
    if not validate:
        record = skipped("not requested (--no-validate): the model was not run eagerly, so it is not known to run")
    else:
        from .check import validate_capture

        record = validate_capture(cap, seed=seed, budget=validate_budget, pipeline=capture_source)
    cap.graph = _with_validation(graph, record)
    return cap


def _built(source: Source, lowered: Lowered, plan: Plan | None) -> Graph:
    """The graph of ``lowered`` with its assumptions (:func:`capture_source`)."""
    producer = Producer("solar-io", __version__, "torch", torch.__version__, source.name, source.sha256)
    b = lowered.builder
    graph = in_place(b.build(lowered.outputs, name=Path(source.name).stem, producer=producer), lowered,
                     b.output_names)
    found = (assumptions(plan) if plan is not None else ()) + tuple(lowered.assumptions)
    if found:
        graph = replace(graph, assumptions=graph.assumptions + found)
    graph = masked_regions(graph, lowered.const_data)  # attention written as math with a known -inf mask
    graph = with_returned_views(graph)  # outputs copied from a broadcast, charged as the view
    graph = with_live_work(graph)  # results partly used (sliced, selected): only that part computed
    return with_index_assumptions(with_listed_nodes(graph))  # index values the file does not hold

def in_place(g: Graph, lowered: Lowered, final: list[str]) -> Graph:
    """``g`` with each output that is a mutated input returned (``lowered.updates``) marked as that
    input's memory (``updates``, format 1.5). ``final`` are the built graph's outputs, in the order of
    ``lowered.outputs`` (an output the builder had to copy, a repeated one, is a new tensor)."""
    marks = {f: lowered.updates[o] for o, f in zip(lowered.outputs, final, strict=True)
             if f == o and o in lowered.updates}
    names = {t.name for t in g.tensors}
    marks = {o: x for o, x in marks.items() if x in names}
    if not marks:
        return g
    return replace(g, tensors=tuple(replace(t, updates=marks[t.name]) if t.name in marks else t for t in g.tensors))


def _with_validation(g: Graph, v: Validation) -> Graph:
    return replace(g, validation=v)


def capture_file(path: Path, *, validate: bool = True, strict: bool = False, entry: str | None = None,
                 inputs: list[str] | None = None, dtype: str | None = None, seed: int = 0,
                 validate_budget: int = DEFAULT_BUDGET, eval_mode: bool = False, inputs_from: str | None = None,
                 step: Any = None, routing: str | None = None, train: Any = None, **_: Any) -> Graph:
    """Capture the model in ``path`` (benchmark convention, or ``entry``; ``inputs_from`` names the
    callable giving the inputs instead of ``get_inputs``) into a validated Graph.

    ``eval_mode`` puts the model in eval mode (batch norm uses running statistics); by default
    it runs as the benchmark convention does. ``step`` (a :class:`.phases.Step`) captures one prefill
    or decode step over a KV cache instead of ``get_inputs()``. ``routing`` is the MoE routing model of
    a value-specialised capture (:mod:`.routing`; default ``uniform``). ``train`` (a
    :class:`..common.training.TrainSpec`) captures a training step instead (:mod:`.train`). Runs the
    user's code. Raises CaptureError (one line) for anything the user can fix.
    """
    source = load_source(Path(path), entry=entry, inputs=inputs, dtype=dtype, eval_mode=eval_mode,
                         inputs_from=inputs_from)
    if train is not None:
        if step is not None:
            raise CaptureError(f"{source.name}: --train and --phase are different captures; give one")
        from .train import capture_train

        return capture_train(source, train, validate=validate, strict=strict, seed=seed,
                             validate_budget=validate_budget)
    if step is not None:
        from .phases import record_step, step_source

        source = step_source(source, step)
    g = capture_source(source, validate=validate, strict=strict, seed=seed, validate_budget=validate_budget,
                       routing=routing).graph
    return record_step(g, step) if step is not None else g
