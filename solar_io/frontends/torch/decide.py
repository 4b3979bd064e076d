"""``_Decide``, the function mode of value-specialised capture that answers data-dependent calls.

In ``record`` it answers ``item``, ``__bool__``, ``tolist``, ``numpy``, ``nonzero``, mask indexing,
``bincount``, ``repeat_interleave``, ``unique`` and ``one_hot`` from the values pass (:mod:`.values`)
and records each answer as a :class:`~.values.Decision` of the plan; in ``replay`` (during
``torch.export``) it gives back the plan's answers in order, data-dependent sizes becoming the
fixed-size ops of :mod:`.fixed_ops`. A call the values pass did not make is a CaptureError.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from ..common.errors import CaptureError
from .fixed_ops import _keys
from .rules.scatter import one_value_mask
from .tables import TABLES
from .values import Decision, NeedValues, Plan, _Values, _where

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


def _flat(value: Any) -> list[Any]:
    """The scalars of a (nested) ``tolist`` answer in row-major order; a 0-d answer is one scalar."""
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flat(v)]
    return [value]


def _one_value_mask_write(x: Any, idx: Any, value: Any) -> bool:  # noqa: ANN401
    """Whether ``x[idx] = value`` is :func:`.rules.scatter.one_value_mask`'s form, which is lowered as a
    masked write of an unknown selection, so its mask needs no values. Specialising it to the mask's
    ``nonzero`` would hold 8 bytes per selected element and dimension (an NVFP4 quantiser's sixteen
    ``q[x > t] = k`` of 16,384 x 12,288 elements: 13 GiB) and charge index tables no fused kernel reads."""
    if not isinstance(idx, torch.Tensor) or idx.dtype != torch.bool or not isinstance(x, torch.Tensor):
        return False
    n = 1 if isinstance(value, (int, float, bool)) else value.numel() if isinstance(value, torch.Tensor) else 0
    return one_value_mask(tuple(x.shape), tuple(idx.shape), n)


class _Decide(TorchFunctionMode):
    """Answers data-dependent calls: from values (``record``) or from a plan's decisions (``replay``)."""

    def __init__(self, plan: Plan, values: _Values | None):
        super().__init__()
        self.plan, self.v = plan, values
        self.next = 0
        self._items: list[Any] = []  # replay: the elements of a ``tolist`` the export asks for one by one

    # ---------------------------------------------------------------- answers
    def skip_empty_lists(self) -> None:
        """Replay: pass over recorded ``tolist`` calls of no elements (the export's tolist asks for none)."""
        while not self._items and self.next < len(self.plan.decisions) \
                and self.plan.decisions[self.next].op == "Tensor.tolist" \
                and not _flat(self.plan.decisions[self.next].value):
            self.next += 1

    def _list_item(self, op: str, d: Decision) -> Decision:
        """Replay of a ``tolist`` that the export makes as one ``item`` per element, in row-major order
        (a FakeTensor's ``tolist`` is ``[e.item() for e in self]``, recursively: the function mode
        never sees the ``tolist``)."""
        if not self._items:
            self._items = _flat(d.value)
        value = self._items.pop(0)
        if not self._items:
            self.next += 1
        return Decision("scalar", op, d.where, value, d.routers)

    def _answer(self, kind: str, op: str, t: torch.Tensor, compute: Callable[[torch.Tensor], Any]) -> Decision:
        if self.v is None:  # replay
            self.skip_empty_lists()
            if self.next >= len(self.plan.decisions):
                raise CaptureError(f"value-specialised capture: the export makes a data-dependent call ({op}, "
                                   f"{_where() or 'unknown place'}) the values pass did not make")
            d = self.plan.decisions[self.next]
            if op == "Tensor.item" and d.op == "Tensor.tolist" and (_where() == d.where or self._items):
                return self._list_item(op, d)
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

    def _number(self, a: Any) -> Any:  # noqa: ANN401
        """A 0-d tensor used as a number (an ``arange`` end, a slice bound) as its recorded value: torch
        reads such a value in C++, where no ``item`` call is seen, so the export would meet it unbacked."""
        if isinstance(a, torch.Tensor) and a.dim() == 0:  # an arange may take a float end too
            return self._answer("scalar", "Tensor.item", a, lambda v: v.item()).value
        return a

    def _slice_bounds(self, idx: Any) -> Any:  # noqa: ANN401
        """``idx`` with each slice's tensor bounds (``x[:, :n]``, ``n`` a 0-d tensor) as numbers."""
        def fix(i: Any) -> Any:  # noqa: ANN401
            if isinstance(i, slice) and any(isinstance(b, torch.Tensor) for b in (i.start, i.stop, i.step)):
                return slice(self._number(i.start), self._number(i.stop), self._number(i.step))
            return i
        if isinstance(idx, tuple):
            return tuple(fix(i) for i in idx)
        return fix(idx)

    # ---------------------------------------------------------------- dispatch
    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        try:
            hit = func in _SCALAR or func in _LIST or func in _NONZERO or func in _ITEMS or func in _BINCOUNT \
                or func in _REPEAT or func in _MASKED or func in _ONE_HOT or func in _UNIQUE or func is torch.where \
                or func is torch.arange
        except TypeError:  # unhashable
            hit = False
        if not hit:
            return func(*args, **kwargs)
        if func is torch.arange:  # arange(n) of a 0-d tensor n: torch reads n's value in C++, not by item()
            if not any(isinstance(a, torch.Tensor) for a in args):
                return func(*args, **kwargs)
            return func(*[self._number(a) for a in args], **kwargs)
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
            x, idx = args[0], self._slice_bounds(args[1])
            args = (x, idx, *args[2:])
            if func is torch.Tensor.__setitem__ and _one_value_mask_write(x, idx, args[2] if len(args) > 2 else None):
                return func(*args, **kwargs)
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
                out = torch.empty(d.value, dtype=dt, device=x.device)
                xv = self.v.value(x)  # known: the length was computed from it
                wv = self.v.value(weights) if weights is not None else None
                self.v.known.pop(out, None)  # (the values pass would take empty's memory for its values)
                if weights is None or wv is not None:  # the counts themselves, for decisions on them
                    self.v.known[out] = torch.bincount(xv, wv, minlength=d.value)[:d.value]
                self.v.origin[out] = self.v.labels(x) | self.v.labels(weights)
                return out
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
