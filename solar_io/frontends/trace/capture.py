"""Capturing one workload of a definition through the PyTorch frontend.

The reference source is run as a module (this RUNS the definition's code, as ``capture`` runs a
model file); its ``run`` becomes the forward of a module and the workload's inputs its arguments,
and the PyTorch frontend's ``capture_source`` does the rest (export on meta tensors, lowering,
validation against eager PyTorch on the CPU). The graph is named after the definition; its
producer names the definition file and its hash.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
import types
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from ...graph import Assumption, Graph, Producer, SourceWorkload
from ...metrics import graph_metrics
from ...node_lists import HALF_ASSUMPTION, HALF_VALUE
from ...prefill import PREFILLED_ASSUMPTION
from ..common.errors import CaptureError
from ..common.validation import Acceptance
from ..torch.capture import DEFAULT_BUDGET, capture_source
from ..torch.loader import Source
from .definition import Definition
from .inputs import input_factory
from .workload import Workload


def load_reference(defn: Definition) -> types.ModuleType:
    """The reference source as a module (its code runs now); CaptureError if it raises or lacks ``run``."""
    name = f"solar_io_trace_{hashlib.sha1((defn.file + defn.sha256).encode()).hexdigest()[:12]}"
    mod = types.ModuleType(name)
    mod.__file__ = str(defn.path.parent / "reference.py") if defn.path else "reference.py"
    sys.modules[name] = mod  # dataclasses and typing in the reference look their module up
    try:
        code = compile(defn.reference, f"{defn.file}:reference", "exec")
        exec(code, mod.__dict__)  # noqa: S102 - the user's reference program, run as capture runs model files
    except Exception as e:
        sys.modules.pop(name, None)
        raise CaptureError(f"{defn.file}: reference: running it raised {type(e).__name__}: {e}") from e
    if not callable(getattr(mod, "run", None)):
        raise CaptureError(f"{defn.file}: reference: defines no function run (the entry point)")
    return mod


def run_parameters(defn: Definition, run: Any) -> list[str]:
    """The names ``run`` takes, in its order: every input, and outputs it takes as destinations."""
    try:
        params = [p for p in inspect.signature(run).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return list(defn.inputs)
    names = [p.name for p in params]
    missing = [n for n in defn.inputs if n not in names]
    if missing:
        if len(params) >= len(defn.inputs) and not any(n in defn.outputs for n in names):
            return list(defn.inputs)  # parameters named otherwise: pass the inputs in definition order
        raise CaptureError(f"{defn.file}: reference: run takes no parameter for input {missing[0]!r} "
                           f"(it takes {', '.join(names)})")
    order = []
    for p in params:
        if p.name in defn.inputs or p.name in defn.outputs:
            order.append(p.name)
        elif p.default is p.empty:
            raise CaptureError(f"{defn.file}: reference: run's parameter {p.name!r} is neither an input nor an "
                               "output of the definition")
    return order


class RunModule(torch.nn.Module):
    """The reference's ``run`` as a module whose forward takes the definition's parameter names (so
    the exported program, and the graph, name the inputs after the definition)."""

    def __init__(self, run: Any, names: list[str]):
        super().__init__()
        self.run = run

        def forward(*args: Any) -> Any:
            return run(*args)

        forward.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
        self.forward = forward  # type: ignore[method-assign]


def workload_source(defn: Definition, wl: Workload, module: types.ModuleType) -> Source:
    """A torch-frontend Source: ``run`` as the forward, the workload's inputs as its arguments."""
    order = run_parameters(defn, module.run)
    make = input_factory(defn, wl, module, order)
    run = module.run
    path = defn.path or Path(defn.file)
    return Source(path, f"{defn.name}.{wl.key}", defn.sha256, lambda: RunModule(run, order), make,
                  accelerator="cuda" in defn.reference, acceptance=acceptance(wl))


def acceptance(wl: Workload) -> Acceptance | None:
    """The workload's own test of a correct output (its ``tolerance``: ``max_atol``, ``max_rtol`` and
    ``required_matched_ratio``, 1 when absent), or None when it names no atol and rtol.

    >>> acceptance(Workload(0, 1, "w:1", None, {}, {}, (("max_atol", 0.005), ("max_rtol", 0.02))))
    Acceptance(atol=0.005, rtol=0.02, ratio=1.0)
    """
    t = dict(wl.tolerance)
    if not isinstance(t.get("max_atol"), int | float) or not isinstance(t.get("max_rtol"), int | float):
        return None
    ratio = t.get("required_matched_ratio")
    ratio = float(ratio) if isinstance(ratio, int | float) else 1.0
    return Acceptance(float(t["max_atol"]), float(t["max_rtol"]), ratio)


def capture_workload(defn: Definition, wl: Workload, module: types.ModuleType, *, validate: bool = True,
                     strict: bool = False, seed: int = 0, validate_budget: int = DEFAULT_BUDGET,
                     fresh_outputs: bool = False) -> Graph:
    """The validated graph of one workload, named after the definition, its producer naming the file; its
    outputs handed in zero-filled (:func:`zero_filled_outputs`) unless ``fresh_outputs``."""
    source = workload_source(defn, wl, module)
    g = capture_source(source, validate=validate, strict=strict, seed=seed, validate_budget=validate_budget).graph
    p = g.producer
    given = tuple((k, int(v)) for k, v in wl.axis_scalars.items() if type(v) in (int, bool) and v >= 0)
    record = SourceWorkload(defn.name, wl.uuid, wl.index, tuple(wl.sizes.items()) + given,
                            tuple((k, v) for k, v in wl.tolerance if v is not None))
    producer = Producer(p.tool, p.tool_version, p.frontend, p.frontend_version, Path(defn.file).name, defn.sha256,
                        record)
    extra = (half_precision(),) if fp32_contractions(g) else ()
    g = replace(g, producer=producer, name=defn.name, assumptions=g.assumptions + extra)
    return g if fresh_outputs else zero_filled_outputs(g)


def zero_filled_outputs(g: Graph) -> Graph:
    """``g`` with every output that updates no input marked ``prefilled: 0.0`` (format 1.8) and the
    ``prefilled_outputs`` assumption saying why: SOL-ExecBench's harness hands a solution its outputs
    zero-filled (destination-passing style, the default for solutions), outside the timed region, before
    every timed call (``ShiftingMemoryPoolAllocator.get_unique_args`` in its ``core/bench/io.py``, called
    as the setup of each iteration in ``core/bench/timing.py``). Elements a program provably leaves zero
    (the rows an embedding gradient's scatter-add does not touch) are then not charged as written
    (:mod:`solar_io.prefill`); ``capture --fresh-outputs`` charges every output whole."""
    names = [t.name for t in g.tensors if t.role == "output" and t.updates is None]
    if not names:
        return g
    tensors = tuple(replace(t, prefilled=0.0) if t.name in names else t for t in g.tensors)
    why = Assumption(PREFILLED_ASSUMPTION, "outputs",
                     "the benchmark harness hands each output in zero-filled memory before a timed call "
                     "(destination-passing style, as SOL-ExecBench's does): output elements the program leaves "
                     "zero need no write (a caller handing other memory can only be slower); capture "
                     "--fresh-outputs charges every output whole", (("outputs", tuple(names)),))
    return replace(g, tensors=tensors, assumptions=g.assumptions + (why,))


def half_precision() -> Assumption:
    """The ``precision`` assumption of a benchmark definition's graph: its fp32 contractions may run on
    16-bit tensor cores (``bound`` prices them at the fastest of the fp32, tf32, bf16 and fp16 matrix
    peaks; ``--strict-fp32`` turns it off). The definitions are contracts a solution meets within
    tolerances: SOL-ExecBench's published SOLs price fp32 work at bf16 rates (L2/019: 2.64 ms = its
    4.78 TFLOP at the B200's bf16 peak at 1.5 GHz) and its measured B200 baselines run it faster than any
    TF32 kernel could (L1/067 at 16,384 tokens: 3.09 ms, against 3.9 ms for its causal half at TF32)."""
    return Assumption(HALF_ASSUMPTION, "fp32 contractions",
                      "a benchmark definition admits solutions within its tolerances: its fp32 contractions are "
                      "priced at 16-bit tensor-core peaks too (bf16/fp16, as the corpus's published SOLs price "
                      "them and its optimized baselines run them); --strict-fp32 prices them at fp32 peaks",
                      (HALF_VALUE,))


def fp32_contractions(g: Graph) -> bool:
    """Whether a contraction of ``g`` reads an fp32 tensor."""
    tmap = g.tensor_map
    return any(m.flops_matrix > 0 and any(tmap[a.tensor].dtype == "fp32" for a in n.inputs)
               for n, m in zip(g.nodes, graph_metrics(g).nodes, strict=True))
