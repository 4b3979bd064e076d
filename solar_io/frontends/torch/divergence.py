"""Naming the first diverging op of a failed validation (:mod:`.check`).

The graph runs on the reference executor with every tensor kept, the exported program is re-run
node by node (``torch.fx.Interpreter``), and each fx node's value is compared with the graph tensor
it was lowered to, with the dtype's tolerances; ops whose memory is uninitialised are skipped. The
program was traced on the meta device: its device arguments run on the CPU and export's metadata
checks (which name meta) are skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ...executor import execute
from ..common.validation import tolerance
from .cpu_kernels import KernelFallback
from .dtype_map import from_numpy, to_numpy
from .lower import GRAD_MODE
from .nvfp4 import CpuNvfp4
from .uninit import filled_graph, is_uninitialised

if TYPE_CHECKING:
    from .capture import Capture


#: Export's checks of a tensor's dtype and device (before a ``.to``): they name the meta device the
#: program was traced on, and the rerun is on the CPU.
_META_CHECKS = (torch.ops.aten._assert_tensor_metadata.default,)


def _on_cpu(v: Any) -> Any:
    """A device argument of the traced program (``torch.full(..., device=x.device)`` on meta) as the CPU."""
    return torch.device("cpu") if isinstance(v, torch.device) and v.type == "meta" else v


def program_values(cap: Capture, arrays: dict[str, np.ndarray], keep: Any = None) -> dict[str, Any]:
    """The exported program rerun on the CPU node by node from the graph's source ``arrays``: each fx
    node's value by name, only those ``keep(name)`` admits (all when None). Raises what the rerun raises."""
    placeholders = [n for n in cap.program.graph.nodes if n.op == "placeholder"]
    env: list[Any] = []
    for p in placeholders:
        tname = cap.lowered.fx_tensors.get(p.name)
        if tname is not None and tname in arrays:
            env.append(from_numpy(arrays[tname], p.meta["val"].dtype))
        else:
            env.append(p.meta.get("val"))
    values: dict[str, Any] = {}

    class Rec(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            if n.op == "call_function" and n.target in _META_CHECKS:  # the trace's device is meta
                return None
            r = super().run_node(n)
            if keep is None or keep(n.name):
                values[n.name] = r
            return r

        def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
            args, kwargs = torch.utils._pytree.tree_map(_on_cpu, (args, kwargs))
            if target is GRAD_MODE and isinstance(args[1], torch.fx.GraphModule):  # a no_grad body, node by node
                with torch.set_grad_enabled(bool(args[0])):
                    return Rec(args[1]).run(*args[2:])
            return super().call_function(target, args, kwargs)

    with torch.no_grad(), KernelFallback(), CpuNvfp4():
        Rec(cap.program.graph_module).run(*env)
    return values


def first_divergence(cap: Capture, arrays: dict[str, np.ndarray], model: torch.nn.Module,
                     inputs: list[Any]) -> str | None:
    """The first fx node whose value differs from the graph tensor it was lowered to; "" when
    none does (the traced program itself differs from the eager run), None if it cannot tell."""
    try:
        with np.errstate(all="ignore"):
            allv = execute(filled_graph(cap), arrays, opaque=cap.lowered.opaque_fns, outputs="all")
        values = program_values(cap, arrays)
        arbitrary = {n.name for n in cap.program.graph.nodes if n.op == "call_function" and is_uninitialised(n.target)}
        for fx_name, tname in cap.lowered.fx_tensors.items():
            v = values.get(fx_name)
            if not isinstance(v, torch.Tensor) or tname not in allv or fx_name in arbitrary:
                continue
            a, b = allv[tname].astype(np.float64), to_numpy(v).astype(np.float64)
            if a.shape != b.shape and a.size == b.size == 1:  # a scalar the graph holds as [1]
                a = a.reshape(b.shape)
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
