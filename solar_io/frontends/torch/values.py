"""The two modes of value-specialised capture (:mod:`.specialise`) and what they record.

``_Tracker`` (a dispatch mode) keeps the CPU value of every small tensor whose inputs have known
values, and labels every tensor with what it is computed from (``weight:NAME``, ``input:I``,
``topk:N``); it answers router ``topk`` calls from the routing model. ``_Decide`` (a function mode)
answers data-dependent calls (``item``, ``__bool__``, ``tolist``, ``numpy``, ``nonzero``, mask indexing,
``bincount``, ``repeat_interleave``, ``unique``, ``one_hot``) from those values and records them in a
:class:`Plan` (``record``), or replays a plan's answers during ``torch.export`` (``replay``), where
data-dependent sizes become the fixed-size ops ``solar_io::specialised_index`` and ``solar_io::bincount``.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakTensorKeyDictionary

from ..common.errors import CaptureError
from .routing import Routing
from .tables import TABLES

#: A tensor of at most this many elements whose inputs are known gets its value computed on the CPU.
SMALL = 1 << 24
#: Input tensors whose values the meta pass knows: integer/bool ones up to SMALL, floating ones up to this.
SMALL_FLOAT_INPUT = 1 << 16

aten = torch.ops.aten
_RANDOM = frozenset({"rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "normal", "normal_",
                     "uniform", "uniform_", "bernoulli", "bernoulli_", "multinomial", "randperm", "exponential_",
                     "random_", "cauchy_", "log_normal_", "geometric_", "poisson"})

# --------------------------------------------------------------------------- fixed-size ops
_lib = torch.library.Library("solar_io", "DEF")
_lib.define("specialised_index(Tensor src, int[] shape, int key) -> Tensor")
_lib.define("bincount(Tensor self, Tensor? weights, int length) -> Tensor")
_keys = itertools.count(1)


def _specialised_index(src: torch.Tensor, shape: list[int], key: int) -> torch.Tensor:
    return torch.from_numpy(TABLES[key].copy()).to(src.device)


def _bincount(x: torch.Tensor, weights: torch.Tensor | None, length: int) -> torch.Tensor:
    return torch.bincount(x, weights, minlength=length)[:length]


_lib.impl("specialised_index", _specialised_index, "CompositeExplicitAutograd")
_lib.impl("bincount", _bincount, "CompositeExplicitAutograd")


@torch.library.register_fake("solar_io::specialised_index")
def _specialised_index_fake(src: torch.Tensor, shape: list[int], key: int) -> torch.Tensor:
    return src.new_empty(tuple(shape), dtype=torch.int64)


@torch.library.register_fake("solar_io::bincount")
def _bincount_fake(x: torch.Tensor, weights: torch.Tensor | None, length: int) -> torch.Tensor:
    return x.new_empty((length,), dtype=weights.dtype if weights is not None else torch.int64)


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

    def forced_tables(self) -> dict[int, np.ndarray]:
        """{topk ordinal: [tokens, k] table} of the routers whose choice the routing model made."""
        return {i: r.table for i, r in self.routers.items() if r.forced}


class NeedValues(Exception):
    """A decision needs values the meta pass does not have."""

    def __init__(self, op: str, where: str | None, origin: frozenset[str]):
        super().__init__(op)
        self.op, self.where, self.origin = op, where, origin


# --------------------------------------------------------------------------- value tracking
class _Values:
    """CPU values of (meta) tensors and what each tensor is computed from (labels)."""

    def __init__(self, on_cpu: bool):
        self.on_cpu = on_cpu
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
        xv = self.v.value(x)
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
        missing = not outs or any(t.numel() > SMALL for t in outs) \
            or func._schema.name.split("::")[-1] in _RANDOM  # (CPU draws would not be the validation's)

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


# --------------------------------------------------------------------------- decisions
_SCALAR = {torch.Tensor.item: "item", torch.Tensor.__bool__: "bool", torch.Tensor.__int__: "int",
           torch.Tensor.__float__: "float", torch.Tensor.__index__: "index"}
_LIST = {torch.Tensor.tolist: "tolist", torch.Tensor.numpy: "numpy"}
_NONZERO = {torch.nonzero: "nonzero", torch.Tensor.nonzero: "nonzero", torch.argwhere: "argwhere",
            torch.Tensor.argwhere: "argwhere"}
_ITEMS = {torch.Tensor.__getitem__: "getitem", torch.Tensor.__setitem__: "setitem"}
_BINCOUNT = {torch.bincount: "bincount", torch.Tensor.bincount: "bincount"}
_REPEAT = {torch.repeat_interleave: "repeat_interleave", torch.Tensor.repeat_interleave: "repeat_interleave"}
_MASKED = {torch.masked_select: "masked_select", torch.Tensor.masked_select: "masked_select"}
_ONE_HOT = {torch.nn.functional.one_hot: "one_hot"}
_UNIQUE = {torch.unique: "unique", torch.Tensor.unique: "unique"}


class _Decide(TorchFunctionMode):
    """Answers data-dependent calls: from values (``record``) or from a plan's decisions (``replay``)."""

    def __init__(self, plan: Plan, values: _Values | None):
        super().__init__()
        self.plan, self.v = plan, values
        self.next = 0

    # ---------------------------------------------------------------- answers
    def _answer(self, kind: str, op: str, t: torch.Tensor, compute: Callable[[torch.Tensor], Any]) -> Decision:
        if self.v is None:  # replay
            if self.next >= len(self.plan.decisions):
                raise CaptureError(f"value-specialised capture: the export makes a data-dependent call ({op}, "
                                   f"{_where() or 'unknown place'}) the values pass did not make")
            d = self.plan.decisions[self.next]
            if d.op != op:
                raise CaptureError(f"value-specialised capture: call {self.next + 1} is {op} at "
                                   f"{_where() or '?'} in the export but was {d.op} at {d.where or '?'}")
            self.next += 1
            return d
        with torch._C.DisableTorchFunction():
            v = self.v.value(t)
            labels = self.v.labels(t)
            if v is None:
                raise NeedValues(op, _where(), labels)
            value = compute(v)
        routers = frozenset(int(lb[5:]) for lb in labels if lb.startswith("topk:"))
        d = Decision(kind, op, _where(), value, routers)
        self.plan.decisions.append(d)
        return d

    def _index(self, op: str, src: torch.Tensor, values: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """A specialised int64 index tensor computed from ``src``'s values (nonzero rows, ...)."""
        d = self._answer("index", op, src, lambda v: values(v).numpy().astype(np.int64))
        if d.key is None:
            d.key = next(_keys)
            TABLES[d.key] = d.value
        arr = d.value
        if self.v is None:
            return torch.ops.solar_io.specialised_index(src, list(arr.shape), d.key)
        with torch._C.DisableTorchFunction():
            if self.v.on_cpu:
                out = torch.from_numpy(arr.copy())
            else:
                out = torch.empty(arr.shape, dtype=torch.int64, device=src.device)
                self.v.known[out] = torch.from_numpy(arr.copy())
            self.v.origin[out] = self.v.labels(src)
        return out

    def _nonzero_cols(self, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        nz = self._index("nonzero", mask, torch.nonzero)
        return tuple(nz[:, i] for i in range(nz.shape[1]))

    def _expand_bool(self, idx: Any) -> Any:
        """An index with every boolean tensor replaced by the integer columns of its nonzero."""
        if isinstance(idx, torch.Tensor) and idx.dtype == torch.bool:
            return self._nonzero_cols(idx)
        if isinstance(idx, (tuple, list)) and any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in idx):
            out: list[Any] = []
            for i in idx:
                out.extend(self._nonzero_cols(i) if isinstance(i, torch.Tensor) and i.dtype == torch.bool else [i])
            return tuple(out)
        return idx

    # ---------------------------------------------------------------- dispatch
    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        try:
            hit = func in _SCALAR or func in _LIST or func in _NONZERO or func in _ITEMS or func in _BINCOUNT \
                or func in _REPEAT or func in _MASKED or func in _ONE_HOT or func in _UNIQUE or func is torch.where
        except TypeError:  # unhashable
            hit = False
        if not hit:
            return func(*args, **kwargs)
        if func in _SCALAR:
            name = _SCALAR[func]
            conv = {"item": lambda v: v.item(), "bool": lambda v: bool(v), "int": lambda v: int(v),
                    "float": lambda v: float(v), "index": lambda v: operator.index(v.item())}[name]
            return self._answer("scalar", f"Tensor.{name}", args[0], conv).value
        if func in _LIST:
            name = _LIST[func]
            d = self._answer("list", f"Tensor.{name}", args[0],
                             (lambda v: v.tolist()) if name == "tolist" else (lambda v: v.numpy().copy()))
            return d.value.copy() if isinstance(d.value, np.ndarray) else d.value
        if func in _NONZERO:
            as_tuple = kwargs.get("as_tuple", False) or (len(args) > 1 and args[1] is True)
            if as_tuple:
                return self._nonzero_cols(args[0])
            return self._index("nonzero", args[0], torch.nonzero)
        if func is torch.where:
            if len(args) + len(kwargs) != 1:
                return func(*args, **kwargs)
            return self._nonzero_cols(args[0] if args else kwargs["condition"])
        if func in _ITEMS:
            x, idx = args[0], args[1]
            new = self._expand_bool(idx)
            if new is idx:
                return func(*args, **kwargs)
            return func(x, new, *args[2:], **kwargs)
        if func in _MASKED:
            x = args[0]
            mask = args[1] if len(args) > 1 else kwargs["mask"]
            shape = torch.broadcast_shapes(x.shape, mask.shape)
            return x.expand(shape)[self._nonzero_cols(mask.expand(shape))]
        if func in _BINCOUNT:
            x = args[0]
            weights = args[1] if len(args) > 1 else kwargs.get("weights")
            minlength = int(args[2] if len(args) > 2 else kwargs.get("minlength", 0))
            d = self._answer("bincount", "bincount", x, lambda v: max(minlength, int(v.max()) + 1 if v.numel() else 0))
            if self.v is None:
                return torch.ops.solar_io.bincount(x, weights, d.value)
            with torch._C.DisableTorchFunction():
                if self.v.on_cpu:
                    return torch.bincount(x, weights, minlength=d.value)
                dt = weights.dtype if weights is not None else torch.int64
                return torch.zeros(d.value, dtype=dt, device=x.device)
        if func in _REPEAT:
            x = args[0]
            repeats = args[1] if len(args) > 1 else kwargs.get("repeats")
            dim = args[2] if len(args) > 2 else kwargs.get("dim")
            if kwargs.get("output_size") is not None:
                return func(*args, **kwargs)
            if repeats is None:  # torch.repeat_interleave(repeats): the indices themselves
                return self._index("repeat_interleave", x, torch.repeat_interleave)
            if not isinstance(repeats, torch.Tensor) or repeats.numel() == 1:
                return func(*args, **kwargs)
            idx = self._index("repeat_interleave", repeats, torch.repeat_interleave)
            if dim is None:
                return x.reshape(-1).index_select(0, idx)
            return x.index_select(dim, idx)
        if func in _UNIQUE:  # the distinct values of integer ids (``for e in ids.unique():``)
            x = args[0]
            extra = any(kwargs.get(k) for k in ("return_inverse", "return_counts", "dim")) or len(args) > 2
            if extra or x.dtype.is_floating_point or x.dtype == torch.bool:
                return func(*args, **kwargs)
            return self._index("unique", x, lambda v: torch.unique(v.reshape(-1))).to(x.dtype)
        if func in _ONE_HOT:
            n = args[1] if len(args) > 1 else kwargs.get("num_classes", -1)
            if n != -1:
                return func(*args, **kwargs)
            d = self._answer("scalar", "one_hot.num_classes", args[0], lambda v: int(v.max()) + 1)
            return func(args[0], d.value)
        return func(*args, **kwargs)
