"""The two modes of value-specialised capture (:mod:`.specialise`) and what they record.

``_Tracker`` (a dispatch mode) keeps the CPU value of every small tensor whose inputs have known
values, and labels every tensor with what it is computed from (``weight:NAME``, ``input:I``,
``topk:N``); it answers router ``topk`` calls from the routing model. ``_Decide`` (a function mode)
answers data-dependent calls (``item``, ``__bool__``, ``tolist``, ``numpy``, ``nonzero``, mask indexing,
``bincount``, ``repeat_interleave``, ``unique``, ``one_hot``) from those values and records them in a
:class:`Plan` (``record``), or replays a plan's answers during ``torch.export`` (``replay``), where
data-dependent sizes become the fixed-size ops ``solar_io::specialised_index`` and ``solar_io::bincount``.

This module holds the plan (``Decision``, ``Router``, ``Plan``) and the values pass (``_Tracker``);
``_Decide`` is in :mod:`.decide`, the fixed-size ops in :mod:`.fixed_ops`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakTensorKeyDictionary

from .eager_record import RANDOM_OPS
from .routing import Routing
from .tables import TABLES as TABLES  # re-exported: specialise imports it from here

#: A tensor of at most this many elements whose inputs are known gets its value computed on the CPU.
SMALL = 1 << 24
#: ... and an integer or boolean one (ids, masks, one_hot of router choices: what decides shapes) of at
#: most this many (512 MiB of int64): Qwen3-MoE's one_hot(ids, 512) over 3,328 tokens x top-10 is 17M.
SMALL_INTEGER = 1 << 26
#: Input tensors whose values the meta pass knows: integer/bool ones up to SMALL, floating ones up to this.
SMALL_FLOAT_INPUT = 1 << 16
#: The label of inputs whose values only the wide meta pass knows (:func:`.specialise.specialise`): a
#: ``topk`` over scores computed from them is still a router.
WIDE = "known:wide"
aten = torch.ops.aten


# --------------------------------------------------------------------------- the plan
@dataclass
class Decision:
    """One data-dependent call answered from values: what (``op``), where, the answer and the
    routers (``topk`` call ordinals) its values come from."""

    kind: str  # scalar | list | array | index | bincount
    op: str
    where: str | None
    value: Any
    routers: frozenset[int] = frozenset()
    key: int | None = None  # TABLES key of an ``index``


@dataclass
class Router:
    """A ``topk`` whose indices decide work (a router): its choice, forced or observed."""

    ordinal: int
    where: str | None
    tokens: int
    experts: int
    k: int
    table: np.ndarray  # [tokens, k] expert ids
    forced: bool


@dataclass
class Plan:
    """What the values pass found: decisions in call order, routers, and where the values came from."""

    routing: Routing
    device: str
    decisions: list[Decision] = field(default_factory=list)
    routers: dict[int, Router] = field(default_factory=dict)
    topk_calls: int = 0
    wide: bool = False  # the meta pass knew the inputs that fit half the budget (specialise.specialise)

    def forced_tables(self) -> dict[int, np.ndarray]:
        """{topk ordinal: [tokens, k] table} of the routers whose choice the routing model made."""
        return {i: r.table for i, r in self.routers.items() if r.forced}


class TooLarge(Exception):
    """A tensor of the values pass's CPU run past the budget (``_Values.cap``): attention scores of a
    long sequence; :func:`.specialise.specialise` then tries the wide meta pass."""

    def __init__(self, op: str, nbytes: int, where: str | None):
        super().__init__(op)
        self.op, self.nbytes, self.where = op, nbytes, where


class NeedValues(Exception):
    """A decision needs values the meta pass does not have."""

    def __init__(self, op: str, where: str | None, origin: frozenset[str]):
        super().__init__(op)
        self.op, self.where, self.origin = op, where, origin


# --------------------------------------------------------------------------- value tracking
class _Values:
    """CPU values of (meta) tensors and what each tensor is computed from (labels)."""

    def __init__(self, on_cpu: bool, limit: int | None = None, cap: int | None = None):
        self.on_cpu = on_cpu
        self.limit = limit  # bytes a tensor may have to get its value (None: ``small``'s element counts)
        self.cap = cap  # bytes a tensor of the CPU run may have (past it: TooLarge)
        self.known = WeakTensorKeyDictionary()
        self.origin = WeakTensorKeyDictionary()

    def value(self, t: torch.Tensor) -> torch.Tensor | None:
        if self.on_cpu or t.device.type != "meta":
            return t
        return self.known.get(t)

    def labels(self, t: Any) -> frozenset[str]:
        return self.origin.get(t, frozenset()) if isinstance(t, torch.Tensor) else frozenset()


def _where() -> str | None:
    """``file.py:LINE`` of the innermost user frame (outside torch and solar_io)."""
    import traceback

    for fr in reversed(traceback.extract_stack()):
        f = fr.filename.replace("\\", "/")
        if "/torch/" in f or "/solar_io/" in f or "/transformers/utils/" in f or f.startswith("<"):
            continue
        return f"{f.rsplit('/', 1)[-1]}:{fr.lineno}"
    return None


def _topk_args(args: tuple, kwargs: dict) -> tuple[torch.Tensor, int, int, bool, bool]:
    x, k = args[0], args[1]
    dim = args[2] if len(args) > 2 else kwargs.get("dim", -1)
    largest = args[3] if len(args) > 3 else kwargs.get("largest", True)
    sort = args[4] if len(args) > 4 else kwargs.get("sorted", True)
    return x, int(k), int(dim) % max(x.dim(), 1), bool(largest), bool(sort)


def forced_topk(x: torch.Tensor, dim: int, table: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, indices) of a router ``topk`` whose choice is ``table`` ([rows, k] over ``dim``)."""
    moved = x.movedim(dim, -1)
    idx = torch.from_numpy(table).to(x.device).reshape(*moved.shape[:-1], table.shape[-1])
    if x.device.type == "meta":
        vals = moved.new_empty(idx.shape)
    else:
        vals = torch.gather(moved, -1, idx)
    return vals.movedim(-1, dim).contiguous(), idx.movedim(-1, dim).contiguous()


def small(t: torch.Tensor, limit: int | None = None) -> bool:
    """Whether the values pass computes ``t``'s value (when its inputs are known): at most ``SMALL``
    elements (``SMALL_INTEGER`` of integers and booleans), or ``limit`` bytes when given."""
    if limit is not None:
        return t.numel() * t.element_size() <= limit
    return t.numel() <= (SMALL if t.is_floating_point() or t.is_complex() else SMALL_INTEGER)


class _Tracker(TorchDispatchMode):
    """Propagates small known values and labels through every op; answers router ``topk`` calls."""

    def __init__(self, values: _Values, plan: Plan, choose: Callable[[int, torch.Tensor, int, int], np.ndarray | None]):
        super().__init__()
        self.v, self.plan, self.choose = values, plan, choose

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        labels: frozenset[str] = frozenset()
        for a in tree_flatten((args, kwargs))[0]:
            labels |= self.v.labels(a)
        if func in (aten.topk.default,):
            return self._topk(func, args, kwargs, labels)
        if not self.v.on_cpu and func is aten._to_copy.default and args and isinstance(args[0], torch.Tensor) \
                and args[0].device.type == "meta" and str(kwargs.get("device", "meta")) == "cpu":
            known = self.v.value(args[0])  # .cpu() of a meta tensor: its value, when known
            if known is None:
                raise NeedValues("Tensor.cpu", _where(), labels)
            res = known.to(dtype=kwargs.get("dtype") or known.dtype, copy=True)
            self.v.origin[res] = labels
            return res
        out = func(*args, **kwargs)
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if self.v.cap is not None:
            for t in outs:
                if t.device.type != "meta" and t.numel() * t.element_size() > self.v.cap:
                    raise TooLarge(str(func), t.numel() * t.element_size(), _where())
        for t in outs:
            self.v.origin[t] = labels | self.v.labels(t) if t is args[0] else labels
        if not self.v.on_cpu:
            self._propagate(func, args, kwargs, out, outs)
        return out

    def _topk(self, func: Any, args: tuple, kwargs: dict, labels: frozenset[str]) -> Any:
        i = self.plan.topk_calls
        self.plan.topk_calls += 1
        x, k, dim, _, _ = _topk_args(args, kwargs)
        tag = frozenset({f"topk:{i}"})
        xv = self.v.value(x) if WIDE not in labels else None
        table = self.choose(i, x, k, dim) if (xv is None or any(lb.startswith("weight:") for lb in labels)) \
            else None
        if table is not None:
            vals, idx = forced_topk(x, dim, table)
            self.v.origin[vals] = labels | tag
            self.v.origin[idx] = tag
            self.v.known[idx] = torch.from_numpy(table).reshape(idx.movedim(dim, -1).shape).movedim(-1, dim) \
                .contiguous()
            self.plan.routers[i] = Router(i, _where(), table.shape[0], x.shape[dim], k, table, True)
            return vals, idx
        out = func(*args, **kwargs)
        # the indices are this selection's: a decision on them is this router's, not an earlier topk's
        # (DeepSeek's group top-k shapes the scores the expert top-k selects from)
        self.v.origin[out[0]] = labels | tag
        self.v.origin[out[1]] = frozenset(lb for lb in labels if not lb.startswith("topk:")) | tag
        if xv is not None:
            cpu = func(xv, *args[1:], **kwargs) if not self.v.on_cpu else out
            if not self.v.on_cpu:
                self.v.known[out[0]], self.v.known[out[1]] = cpu[0], cpu[1]
            table = cpu[1].movedim(dim, -1).reshape(-1, k).numpy().copy()
            self.plan.routers[i] = Router(i, _where(), table.shape[0], x.shape[dim], k, table, False)
        return out

    def _propagate(self, func: Any, args: tuple, kwargs: dict, out: Any, outs: list[torch.Tensor]) -> None:
        missing = not outs or any(not small(t, self.v.limit) for t in outs) \
            or func._schema.name.split("::")[-1] in RANDOM_OPS  # (CPU draws would not be the validation's)

        def conv(a: Any) -> Any:
            nonlocal missing
            if isinstance(a, torch.Tensor):
                v = self.v.value(a)
                if v is None:
                    missing = True
                return v
            if isinstance(a, torch.device) and a.type == "meta":
                return torch.device("cpu")
            return a

        cargs, ckw = tree_map(conv, args), tree_map(conv, kwargs)
        if missing:
            for i, a in enumerate(func._schema.arguments):  # a write into a known tensor makes it unknown
                if a.alias_info is not None and a.alias_info.is_write and i < len(args) \
                        and isinstance(args[i], torch.Tensor):
                    self.v.known.pop(args[i], None)
            return
        if "device" in ckw:
            ckw["device"] = torch.device("cpu")
        try:
            res = func(*cargs, **ckw)
        except Exception:
            return
        for t, r in zip(outs, [r for r in tree_flatten(res)[0] if isinstance(r, torch.Tensor)], strict=False):
            self.v.known[t] = r
