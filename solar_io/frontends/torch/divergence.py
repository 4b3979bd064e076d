"""Naming the first diverging op of a failed validation (:mod:`.check`).

The graph runs on the reference executor with every tensor kept, the exported program is re-run
node by node (``torch.fx.Interpreter``), and each fx node's value is compared with the graph tensor
it was lowered to, with the dtype's tolerances; ops whose memory is uninitialised are skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ...executor import execute
from ..common.validation import tolerance
from .cpu_kernels import KernelFallback
from .dtype_map import to_numpy
from .uninit import filled_graph, is_uninitialised

if TYPE_CHECKING:
    from .capture import Capture


def first_divergence(cap: Capture, arrays: dict[str, np.ndarray], model: torch.nn.Module,
                     inputs: list[Any]) -> str | None:
    """The first fx node whose value differs from the graph tensor it was lowered to; "" when
    none does (the traced program itself differs from the eager run), None if it cannot tell."""
    try:
        with np.errstate(all="ignore"):
            allv = execute(filled_graph(cap), arrays, opaque=cap.lowered.opaque_fns, outputs="all")
        placeholders = [n for n in cap.program.graph.nodes if n.op == "placeholder"]
        by_name = {t: n for n, t in cap.lowered.fx_tensors.items()}
        env: list[Any] = []
        for p in placeholders:
            tname = cap.lowered.fx_tensors.get(p.name)
            if tname is not None and tname in arrays:
                env.append(torch.from_numpy(np.ascontiguousarray(arrays[tname])).to(p.meta["val"].dtype))
            else:
                env.append(p.meta.get("val"))
        values: dict[str, Any] = {}

        class Rec(torch.fx.Interpreter):
            def run_node(self, n: Any) -> Any:
                r = super().run_node(n)
                values[n.name] = r
                return r

        with torch.no_grad(), KernelFallback():
            Rec(cap.program.graph_module).run(*env)
        del by_name
        arbitrary = {n.name for n in cap.program.graph.nodes if n.op == "call_function" and is_uninitialised(n.target)}
        for fx_name, tname in cap.lowered.fx_tensors.items():
            v = values.get(fx_name)
            if not isinstance(v, torch.Tensor) or tname not in allv or fx_name in arbitrary:
                continue
            a, b = allv[tname].astype(np.float64), to_numpy(v).astype(np.float64)
            if a.shape != b.shape:
                return f"{fx_name} (shape {a.shape} vs {b.shape})"
            rtol, atol = tolerance(cap.graph.tensor_map[tname].dtype)
            scale = max(1.0, float(np.nanmax(np.abs(b))) if b.size else 1.0)
            with np.errstate(all="ignore"):
                if not np.allclose(a, b, rtol=rtol, atol=atol * scale, equal_nan=True):
                    return f"{fx_name} ({tname}, max abs error {float(np.nanmax(np.abs(a - b))):.3g})"
    except Exception:
        return None
    return ""
