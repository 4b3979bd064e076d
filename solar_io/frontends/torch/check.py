"""Whole-graph validation: the model run eagerly on CPU vs the graph on the reference executor.

A fresh model is built on the CPU with a fixed seed, run on seeded inputs; the graph is
executed on the same weights and inputs (opaque nodes run the original ATen op), and the
outputs are compared with dtype-aware tolerances. On a failure the exported program is
re-run node by node (``torch.fx.Interpreter``) to name the first op whose tensor diverges.
A graph too large for the budget is validated per distinct node at reduced sizes (``reduced``).

What the eager run's random ops and selections returned is recorded and given to the graph by
:mod:`.eager_record`; the node-by-node rerun is :mod:`.divergence`'s.
"""

from __future__ import annotations

import warnings
from contextlib import ExitStack
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ...executor import execute
from ...graph import Validation
from ..common.errors import CaptureError
from ..common.validation import accepted, compare, graph_bytes, kept_bytes, skipped
from .cpu_kernels import KernelFallback, first_line, tolerant_opaque, unchecked_nodes
from .divergence import first_divergence
from .dtype_map import to_numpy
from .eager import no_dropout
from .eager_record import RANDOM_OPS, RandomRecorder, SelectionRecorder, _fill_selections, _replay_random
from .nvfp4 import CpuNvfp4
from .pinned import pinned_check, quantised
from .specialise import Plan, forcing, replaying
from .uninit import deterministic_memory, filled_graph
from .widen import NARROW, Float64Mode, widened, widened_graph

if TYPE_CHECKING:
    from .capture import Capture
    from .reduced import Pipeline


if TYPE_CHECKING:
    from .capture import Capture
    from .reduced import Pipeline


def _flat_tensors(out: Any) -> list[torch.Tensor]:
    leaves, _ = torch.utils._pytree.tree_flatten(out)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def _results(cap: Capture, out: Any, inputs: list[Any]) -> list[torch.Tensor]:
    """What the graph's outputs are, in order: the tensors the model returned, then each user input it
    changed without returning it (``cap.lowered.mutations``), as the eager run left it."""
    pos = {name: int(where) for name, (kind, where) in cap.lowered.sources.items() if kind == "input"}
    return _flat_tensors(out) + [inputs[pos[name]] for name in cap.lowered.mutations]


def validate_capture(cap: Capture, *, seed: int = 0, budget: int = 2 << 30,
                     pipeline: Pipeline | None = None) -> Validation:
    """The validation record of ``cap`` (see the module docstring). Raises CaptureError when the
    model raises when run eagerly: a program that cannot run is not captured as valid.

    ``pipeline`` is the capture function (``capture.capture_source``) that the per-node checks of a
    graph over ``budget`` run their one-op programs through; the caller hands it in, so this module
    and ``reduced`` do not import the capture that imports them (a graph within the budget needs none)."""
    g = cap.graph
    need = graph_bytes(g) * 2
    if need > budget:
        if pipeline is None:
            raise TypeError("validate_capture: a graph over the budget is checked per node, which needs "
                            "pipeline= (capture.capture_source)")
        from .reduced import validate_per_node

        why = f"the whole graph needs {need / 2**30:.1f} GiB (--validate-budget {budget / 2**30:.1f} GiB)"
        return validate_per_node(cap, seed=seed, budget=budget, why=why, pipeline=pipeline)
    with deterministic_memory():
        return _validate_whole(cap, seed, budget, pipeline)


class _EagerRun:
    """The model built on the CPU with the validation's seeds and run once, recording what the graph
    needs: random values (only when it has random opaque nodes) and selections (only when it has
    choice tensors). Each recording mode sees every ATen op in Python (a GRU's 6,144 cells take
    seconds that way), so an unneeded one stays off; the kernel fallback runs only when a run
    without it met an op with no kernel here (that run is then redone afresh, with it)."""

    def __init__(self, cap: Capture, seed: int):
        self.cap = cap
        torch.manual_seed(seed)
        self.model = cap.source.model("cpu")  # CaptureError when building it raises
        torch.manual_seed(seed + 1)
        self.inputs = cap.source.inputs("cpu")
        self.before = _snapshot(cap, self.model, self.inputs)  # forward may replace state or write inputs
        self.recorder, self.selections, self.kernels = RandomRecorder(), SelectionRecorder(), KernelFallback()
        self.ref: list[torch.Tensor] | None = None

    def run(self, random_ops: bool, fallback: bool) -> None:
        modes = [m for m, on in ((self.recorder, random_ops), (self.selections, bool(self.cap.lowered.selections)),
                                 (self.kernels, fallback)) if on]
        with torch.no_grad(), no_dropout(), forcing(self.cap.plan), CpuNvfp4(), ExitStack() as stack:
            for m in modes:
                stack.enter_context(m)
            self.ref = _results(self.cap, self.model(*self.inputs), self.inputs)


def _validate_whole(cap: Capture, seed: int, budget: int, pipeline: Pipeline | None) -> Validation:
    g = cap.graph
    reference = f"torch {torch.__version__} cpu eager"
    for name, _, result in cap.lowered.selections:  # placeholders until the eager run chose them
        if name in g.tensor_map:
            cap.lowered.const_data.setdefault(name, np.zeros(g.shape(name), np.float32 if result == -1 else np.int64))
    random_ops = any(n.kind == "opaque" and n.op.split(".")[-1] in RANDOM_OPS for n in g.nodes)
    ev = _EagerRun(cap, seed)
    try:
        try:
            ev.run(random_ops, fallback=False)
        except NotImplementedError:  # an op with no kernel here for its dtypes: afresh, with the fallback
            ev = _EagerRun(cap, seed)
            ev.run(random_ops, fallback=True)
    except CaptureError:
        raise
    except Exception as e:
        if ev.kernels.missing is not None:  # a limit of this device, not a failure of the program
            op, err = ev.kernels.missing
            return skipped(f"{op} has no kernel on the cpu, even with float64 inputs ({err}): the model cannot run "
                           "on the validation device")
        hint = (" (the file is written for an accelerator and ran on the cpu here; if it runs there, --no-validate "
                "captures it without this check)") if cap.source.accelerator else ""
        raise CaptureError(f"{cap.source.name}: running the model eagerly raised {type(e).__name__}: "
                           f"{first_line(e, 300)}{hint}") from e
    model, inputs, before, ref = ev.model, ev.inputs, ev.before, ev.ref
    recorder, selections, kernels = ev.recorder, ev.selections, ev.kernels
    for node in g.nodes:  # opaque nodes may have lost outputs nobody reads
        impl = cap.lowered.opaque_fns.get(node.name)
        if impl is not None and hasattr(impl, "keep"):
            impl.keep = [a.tensor for a in node.outputs]
    _replay_random(cap, recorder.values)
    why = _fill_selections(cap, selections)
    if why is not None:
        return Validation("failed", "reference-executor", reference, seed,
                          reason=f"the graph's selections do not match the eager run: {why}")
    if before is not None:
        before.update({n: cap.lowered.const_data[n] for n, _, _ in cap.lowered.selections if n in before})
    opaque_log = tolerant_opaque(cap.lowered.opaque_fns)
    arrays = before if before is not None else _sources(cap, model, inputs)
    if isinstance(arrays, str):
        return skipped(arrays)
    if len(cap.outputs) != len(ref):
        return Validation("failed", "reference-executor", reference, seed,
                          reason=f"the model returns {len(ref)} tensors, the graph has {len(cap.outputs)} outputs")
    run = filled_graph(cap)
    try:
        with np.errstate(all="ignore"):
            got = execute(run, arrays, opaque=cap.lowered.opaque_fns)
    except Exception as e:
        return Validation("failed", "reference-executor", reference, seed,
                          reason=f"executing the graph raised {type(e).__name__}: {str(e)[:300]}")
    want = {name: to_numpy(r) for name, r in zip(cap.outputs, ref, strict=True)}
    record, bad = compare(g, got, want, reference=reference, seed=seed)
    unchecked, others = unchecked_nodes(g, opaque_log, kernels.widened)
    if bad:
        again = _retry_in_fp64(cap, seed, record)
        if isinstance(again, Validation):
            return again
        acc = cap.source.acceptance  # reported, never a pass: 1% of elements off may be a wrong edge row
        own = "" if acc is None else (f"; {accepted(got, want, acc):.4%} of elements within the definition's own "
                                      f"tolerance (atol {acc.atol:g} + rtol {acc.rtol:g} x |reference|, "
                                      f"{acc.ratio:.2%} required)")
        del got
        if kinds := quantised(g):
            why = (f"the whole graph differs from eager ({record.reason}{own}) by rounding its {'/'.join(kinds)} "
                   "tensors amplify (a value a ulp apart moves a quantisation scale; float64 cannot rerun them)")
            pin = pinned_check(cap, arrays, want, budget, why, reference, seed)
            if pin is not None:
                record = pin
            elif pipeline is not None:  # the pinned values past the budget: each node on its own
                from .reduced import validate_per_node

                per = validate_per_node(cap, seed=seed, budget=budget, why=why, pipeline=pipeline)
                record = per if per.status != "skipped" else replace(record, reason=f"{why}; {per.reason}")
            else:
                record = replace(record, reason=why)
        else:
            del want
            where = _where(cap, arrays, model, inputs, budget, again)
            record = replace(record, reason=f"{record.reason}{own}; {where}")
    if unchecked or others:
        note = [f"{len(unchecked)} node(s) unchecked: no kernel on the cpu for their dtypes"] if unchecked else []
        note += [f"eager ran {', '.join(others)} with float64 inputs (no kernel on the cpu for its dtypes)"] \
            if others else []
        reason = "; ".join(([record.reason] if record.reason else []) + note)
        record = replace(record, unchecked=unchecked, reason=reason)
    return record


def _where(cap: Capture, arrays: Any, model: Any, inputs: Any, budget: int, again: str | None) -> str:
    """Where a failed validation's graph first diverges from the program (:func:`.divergence.first_divergence`),
    unless keeping every tensor of both takes more than ``budget``."""
    need = kept_bytes(cap.graph) * 2
    if need > budget:
        where = (f"the first diverging node was not searched for: keeping every tensor of the graph and of the "
                 f"program takes {need / 2**30:.1f} GiB (--validate-budget {budget / 2**30:.1f} GiB)")
    else:
        where = first_divergence(cap, arrays, model, inputs)
        if where is None:
            where = "the first diverging node could not be located"
        elif where:
            where = f"first diverging node: {where}"
        else:
            where = ("no node diverges from the traced program: the eager run differs from what torch.export "
                     "traced (Python side effects, global state or data-dependent control flow)")
    return where if again is None else f"{where}; {again}"


def _retry_in_fp64(cap: Capture, seed: int, first: Validation) -> Validation | str | None:
    """The record of a second comparison in float64 when the first one failed; None when it fails
    too or does not apply; why it could not run when it raised (out of memory: it holds the model's
    tensors and the graph's in float64), for the failure record.

    An ill-conditioned model (a train-mode batch norm over two values, a hundred layers deep;
    attention over logits of 10^4 from unscaled random weights) turns rounding, which eager
    PyTorch and the executor do in different orders, into large output differences. Rerun both
    in float64 (:mod:`.widen`): the model with every floating dtype of every ATen call widened, so
    precision the code pins (``x.to(torch.float32)``, ``softmax(dtype=torch.float32)``, a bf16
    ``.to``) is widened too, and the graph with its fp32 / bf16 / fp16 tensors read as fp64. The
    outputs are held to float32's tolerances whatever their dtype: a wrong lowering still differs,
    rounding no longer does. Only graphs whose floating tensors are all fp32, bf16 or fp16 (float64
    holds each of their values exactly) and that have no opaque node qualify."""
    g = cap.graph
    floats = {t.dtype for t in g.tensors if t.dtype.startswith(("fp", "bf"))}
    narrow = set(NARROW.values())
    if not floats or not floats <= narrow or cap.lowered.opaque:
        return None
    try:
        torch.manual_seed(seed)
        model = cap.source.model("cpu").double()
        torch.manual_seed(seed + 1)
        inputs = [widened(x) for x in cap.source.inputs("cpu")]
        arrays = _snapshot(cap, model, inputs)
        with torch.no_grad(), no_dropout(), forcing(cap.plan), Float64Mode():
            ref = _results(cap, model(*inputs), inputs)
        if arrays is None or len(ref) != len(cap.outputs):
            return None
        with np.errstate(all="ignore"):
            got = execute(widened_graph(filled_graph(cap)), arrays)
    except Exception as e:
        return f"the float64 rerun raised {type(e).__name__}: {first_line(e, 200)}"
    want = {name: r.detach().numpy() for name, r in zip(cap.outputs, ref, strict=True)}
    held = replace(g, tensors=tuple(replace(t, dtype="fp32") if t.dtype in narrow else t for t in g.tensors))
    record, bad = compare(held, got, want, reference=first.reference, seed=seed)
    if bad:
        return None
    shown = "/".join(sorted(str(d).removeprefix("torch.") for d, name in NARROW.items() if name in floats))
    return replace(record, reason=f"{shown} outputs differ ({first.reason}); the float64 rerun of the model and of "
                                  f"the graph agrees within float32's tolerances, so the difference is {shown} "
                                  "rounding the model amplifies")


def _sources(cap: Capture, model: torch.nn.Module, inputs: list[Any]) -> dict[str, np.ndarray] | str:
    """Arrays for every source tensor of the graph, or why they cannot be had."""
    state = dict(model.named_parameters())
    state.update(dict(model.named_buffers()))
    consts = getattr(cap.program, "constants", {}) or {}
    cpu: dict | None = None  # constants of an export on the CPU, made when first needed
    arrays: dict[str, np.ndarray] = {}
    produced = {a.tensor for n in cap.graph.nodes for a in n.outputs}
    for t in cap.graph.tensors:
        if t.name in produced or t.value is not None:
            continue
        if t.name in cap.lowered.const_data:
            arrays[t.name] = cap.lowered.const_data[t.name]
            continue
        kind, target = cap.lowered.sources.get(t.name, ("?", ""))
        if kind == "input":
            x = inputs[int(target)]
            arrays[t.name] = to_numpy(x)
        elif target in state:
            arrays[t.name] = to_numpy(state[target])
        elif target in consts and isinstance(consts[target], torch.Tensor) and consts[target].device.type != "meta":
            arrays[t.name] = to_numpy(consts[target])
        elif isinstance(_attr(model, target), torch.Tensor):  # a plain tensor attribute of the module
            arrays[t.name] = to_numpy(_attr(model, target))
        else:
            if cpu is None and target in consts:
                cpu = _same_constants(consts, _cpu_constants(model, inputs, cap.plan))
            if not isinstance((cpu or {}).get(target), torch.Tensor):
                return f"no value for {kind} {target or t.name} (created on the meta device during capture)"
            arrays[t.name] = to_numpy(cpu[target])
    return arrays


def _cpu_constants(model: torch.nn.Module, inputs: list[Any], plan: Plan | None = None) -> dict:
    """The constants forward creates (``torch.tensor(0.5, device=x.device)``, ``torch.tensor(ids)`` of a
    list a ``tolist`` gave, lifted by the export on meta without a value), from an export of the CPU
    model on the CPU inputs (answering data-dependent calls from ``plan``, as the meta export did);
    empty when that export fails."""
    from .capture import _quiet_torch_logs  # (capture imports this module)

    own = "forward" in vars(model)
    forward = model.forward
    try:
        if plan is not None:
            replaying(model, plan)
        with warnings.catch_warnings(), _quiet_torch_logs():
            warnings.simplefilter("ignore")
            ep = torch.export.export(model, tuple(inputs), strict=False)
    except Exception:
        return {}
    finally:
        if own:
            model.forward = forward
        else:
            vars(model).pop("forward", None)
    return dict(ep.constants or {})


def _same_constants(ours: dict, cpu: dict) -> dict:
    """``cpu`` when its constants are the program's (lifted constants are named by position, so an export
    that took another path names other numbers alike): the same names, each of the same shape and dtype;
    else empty (the validation then says it has no value, rather than compute with a wrong one)."""
    def sig(d: dict) -> dict:
        return {k: (tuple(v.shape), v.dtype) for k, v in d.items() if isinstance(v, torch.Tensor)}

    return cpu if sig(ours) == sig(cpu) else {}


def _snapshot(cap: Capture, model: torch.nn.Module, inputs: list[Any]) -> dict[str, np.ndarray] | None:
    """Copies of the source arrays as they are before forward runs; None when they cannot be had yet
    (lazy modules create their parameters in the first forward)."""
    try:
        arrays = _sources(cap, model, inputs)
    except Exception:
        return None
    return None if isinstance(arrays, str) else {k: np.array(v, copy=True) for k, v in arrays.items()}


def _attr(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj
