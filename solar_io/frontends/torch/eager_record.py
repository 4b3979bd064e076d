"""What an eager run chose, recorded and given to the graph it is compared with (:mod:`.check`).

``RandomRecorder`` keeps, in call order, what the random ops returned, and ``_replay_random`` makes
the graph's random opaque nodes return the same values; ``SelectionRecorder`` keeps what the
selections and samplers returned (topk, sort, argsort, multinomial, bernoulli, the offsets of
grouped expert matmuls), and ``_fill_selections`` gives the graph's specialised choice tensors
(``rules/select.py``) those values.

>>> _family("aten.argsort"), _family("aten.topk")
('sort', 'topk')
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .dtype_map import to_numpy

if TYPE_CHECKING:
    from .capture import Capture


#: The ops that draw random numbers, by aten name. An in-place sampler (``exponential_``) runs under that
#: name eagerly and reaches the exported graph as its functional op (``aten.exponential``): both are listed.
_SAMPLERS = ("normal", "uniform", "bernoulli", "exponential", "random", "cauchy", "log_normal", "geometric")
RANDOM_OPS = frozenset({"rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "multinomial",
                        "randperm", "poisson", *_SAMPLERS, *(f"{s}_" for s in _SAMPLERS)})


class RandomRecorder(torch.utils._python_dispatch.TorchDispatchMode):
    """Records, in call order, what the random ops of an eager run returned, so the graph's
    (opaque) random nodes can replay the same values."""

    def __init__(self) -> None:
        super().__init__()
        self.values: list[torch.Tensor] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func._schema.name.split("::")[-1] in RANDOM_OPS and isinstance(out, torch.Tensor):
            self.values.append(out.detach().clone())
        return out


def _family(op: str) -> str:
    """The eager op a graph's choice tensor is matched with (argsort runs as a sort)."""
    name = op.split(".")[1] if op.startswith(("aten.", "transformers.")) else op
    return "sort" if name in ("sort", "argsort") else "grouped_mm" if name in ("grouped_mm_fallback", "_grouped_mm") \
        else name


class SelectionRecorder(torch.utils._python_dispatch.TorchDispatchMode):
    """Records, in call order, what the selections and samplers of an eager run returned (topk, sort,
    argsort, multinomial, bernoulli), so the graph's specialised choice tensors (``rules/select.py``)
    get the values the program chose."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, list[tuple[Any, ...]]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = func._schema.name.split("::")[-1]
        if name in ("grouped_mm_fallback", "_grouped_mm"):  # grouped expert matmuls: their offsets
            offs = args[2] if len(args) > 2 else (kwargs or {}).get("offs")
            if isinstance(offs, torch.Tensor):
                self.values.setdefault("grouped_mm", []).append((offs.detach().clone(), args[0].shape[0]))
        elif name in ("topk", "sort", "argsort", "multinomial", "bernoulli"):
            res = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            if name == "argsort":
                res = (None,) + res
            self.values.setdefault(_family(f"aten.{name}"), []).append(tuple(
                r.detach().clone() if isinstance(r, torch.Tensor) else r for r in res))
        return out


def _fill_selections(cap: Capture, recorded: SelectionRecorder) -> str | None:
    """Give the graph's choice tensors the eager run's values, in call order; why not, or None."""
    seen: dict[str, int] = {}
    shapes = {t.name: cap.graph.shape(t.name) for t in cap.graph.tensors}
    for name, op, result in cap.lowered.selections:
        fam = _family(op)
        i = seen.get(fam, 0)
        seen[fam] = i + 1
        calls = recorded.values.get(fam, [])
        if name not in shapes:  # pruned: nothing reads it
            continue
        if i >= len(calls):
            return f"the eager run made {len(calls)} {fam} call(s), the graph has more ({name})"
        if result == -1:  # a bernoulli's uniform draws: 1 - result gives the same result under u < p
            arr = 1.0 - to_numpy(calls[i][0]).astype(np.float32)
        elif result == -2:  # the expert of each row of a grouped matmul, from its cumulative offsets
            offs, rows = to_numpy(calls[i][0]).astype(np.int64), int(calls[i][1])
            arr = np.minimum(np.searchsorted(offs, np.arange(rows), side="right"), len(offs) - 1)
        else:
            arr = to_numpy(calls[i][result])
        if arr.shape != shapes[name]:
            return f"{fam} call {i} returned shape {arr.shape}, the graph's {name} has {shapes[name]}"
        cap.lowered.const_data[name] = arr
    return None


def _replay_random(cap: Capture, recorded: list[torch.Tensor]) -> None:
    """Make the graph's random opaque nodes return the recorded eager values, in order."""
    queue = list(recorded)
    for node in cap.graph.nodes:
        if node.kind != "opaque" or node.op.split(".")[-1] not in RANDOM_OPS or len(node.outputs) != 1:
            continue
        shape = cap.graph.shape(node.outputs[0].tensor)
        for i, v in enumerate(queue):
            if tuple(v.shape) == shape:
                value = to_numpy(queue.pop(i))
                cap.lowered.opaque_fns[node.name] = lambda *_, value=value: value
                break
