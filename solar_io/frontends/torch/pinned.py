"""The whole-graph check of a quantising program, with its quantised tensors pinned to eager's values.

A program that quantises what it computed (SOL-ExecBench's NVFP4 layers: ``amax`` of the activations,
a global scale from it, fp8 block scales, fp4 codes written by sixteen masked stores) turns a rounding
the executor does in another order than eager PyTorch into a different quantisation: the amax a bf16
ulp apart moves the global scale, which moves fp8 scales across a rounding step, which moves fp4
codes, and 80% of the output differs (Quant/030 at 4 x 256 tokens). Float64 cannot rerun it (fp8 and
fp4 are the program's values, not its rounding).

:func:`pinned_check` runs the exported program again node by node (:func:`.divergence.program_values`)
keeping the values of its *pinned* tensors: those the graph holds as fp8/fp4, integers or booleans
(codes, masks, indices). The graph is then executed with each pinned tensor set, once computed, to
eager's values (``executor.execute(forced=...)``), so no rounding crosses a quantisation step, while
every float node and every edge of the graph is still checked at full size. Each pinned tensor's own
value must match eager's in all but ``PIN_MISMATCH`` of its elements (a rounding step moves a few),
or the check fails: a wrong lowering of a quantiser is not hidden by the pin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ...dtypes import DTYPES
from ...executor import execute
from ...graph import Validation
from ..common.validation import compare, tolerance
from .divergence import program_values
from .dtype_map import to_numpy
from .lower import program_calls
from .uninit import filled_graph, is_uninitialised

if TYPE_CHECKING:
    from .capture import Capture

#: Fraction of a pinned tensor's elements its graph value may have apart from eager's.
PIN_MISMATCH = 0.01


def _narrow_float(dtype: str) -> bool:
    return DTYPES[dtype].family == "float" and DTYPES[dtype].bits < 16


def quantised(g: Any) -> list[str]:
    """The float dtypes of ``g`` narrower than 16 bits (fp8, fp4): a rounding apart in what they quantise
    moves their values by a step, or a whole tensor's scale."""
    return sorted({t.dtype for t in g.tensors if _narrow_float(t.dtype)})


def _pins(dtype: str) -> bool:
    return DTYPES[dtype].family in ("int", "uint", "bool") or _narrow_float(dtype)


def _nbytes(v: Any) -> int:
    return v.numel() * v.element_size() if isinstance(v, torch.Tensor) else 0


def pinned_check(cap: Capture, arrays: dict[str, np.ndarray], want: dict[str, np.ndarray], budget: int,
                 why: str, reference: str, seed: int) -> Validation | None:
    """The record of the pinned whole-graph check (module docstring); None when it cannot run (its pinned
    values past half of ``budget``, or the rerun raised), for the caller's next check."""
    g = cap.graph
    calls = {n.name: n for n in program_calls(cap.program.graph_module) if not is_uninitialised(n.target)}
    pins = {fx: t for fx, t in cap.lowered.fx_tensors.items()
            if fx in calls and t in g.tensor_map and _pins(g.tensor_map[t].dtype)}
    held = sum(_nbytes(calls[fx].meta.get("val")) for fx in pins)  # as eager holds them (uint8 codes, bool masks)
    if not pins or held * 2 > budget:
        return None
    try:
        values = program_values(cap, arrays, keep=pins.__contains__)
    except Exception:
        return None
    eager: dict[str, np.ndarray] = {}
    for fx, t in pins.items():
        v = values.get(fx)
        if isinstance(v, torch.Tensor) and tuple(v.shape) == g.shape(t):
            eager[t] = to_numpy(v)
    del values
    apart: dict[str, float] = {}

    def forced(name: str, arr: np.ndarray) -> np.ndarray:
        b = eager.get(name)  # of the tensor's shape (checked above)
        if b is None:
            return arr
        rtol, atol = tolerance(g.tensor_map[name].dtype)
        with np.errstate(all="ignore"):
            a64, b64 = arr.astype(np.float64), b.astype(np.float64)
            same = np.isclose(a64, b64, rtol=rtol, atol=atol, equal_nan=True)
        apart[name] = 1.0 - float(np.count_nonzero(same)) / max(1, same.size)
        return b.astype(arr.dtype, copy=False)

    try:
        with np.errstate(all="ignore"):
            got = execute(filled_graph(cap), arrays, opaque=cap.lowered.opaque_fns, forced=forced)
    except Exception:
        return None
    record, bad = compare(g, got, want, reference=reference, seed=seed)
    worst = max(apart, key=apart.__getitem__) if apart else None
    share = apart[worst] if worst else 0.0
    pinned = (f"with its {len(apart)} fp8/fp4, integer and boolean tensors pinned to eager's values as the graph "
              f"ran, each matching eager's own in all but at most {share:.3%} of its elements")
    if share > PIN_MISMATCH:
        status, reason = "failed", (f"pinned tensor {worst} differs from eager's in {share:.2%} of its elements "
                                    f"(more than a rounding step moves: {PIN_MISMATCH:.0%})")
    elif bad:
        status, reason = "failed", f"{pinned}, {record.reason}"
    else:
        status, reason = "passed", f"{pinned}, every output matches"
    return Validation(status, "reference-executor pinned", reference, seed, record.rtol, record.atol,
                      record.max_abs_error, record.max_rel_error, (), f"{why}; {reason}")
