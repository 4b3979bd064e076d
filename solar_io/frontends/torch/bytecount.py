"""An independent byte reference: the storage bytes each source op touches, seen at the dispatcher.

Nothing here uses solar-io's graph, affine accesses or metrics: the exported program a capture
was lowered from is run node by node (``torch.fx.Interpreter``) under ``FakeTensorMode`` (no real
memory, no data), and a ``TorchDispatchMode`` records every ATen call each source op (an fx
``call_function`` node: ``aten.linear``, ``aten.convolution``, ...) makes, with the tensors it
receives and returns. Per source op:

- **read**: every storage that a call of the op receives and that existed before the op (an
  input, a weight, a tensor an earlier op made), once, at the bytes of the part the op touches:
  the union of the elements of the views it was passed (their storage offsets, from sizes, strides
  and offset), times the itemsize: a view's own elements, not its base storage; a broadcast
  dimension (stride 0) adds no elements; two disjoint slices of one storage add up.
- **written**: every storage the op creates and returns, once, at the bytes of the returned views;
  and a pre-existing storage a call mutates in place (its schema marks the argument written).
- Storages created inside the op and not returned (the temporaries of a composite op that the
  dispatcher runs as several ATen calls, such as ``linear`` as ``t`` + ``addmm``) are not counted:
  they are the inner tensors of one kernel.

The result is the classical per-kernel count of a program that runs each source op as one kernel
and never caches between kernels; ``tests/frontends/torch/test_torch_corpus.py`` compares it with the graph's.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np
import torch
from torch.fx import Interpreter
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


@dataclass(frozen=True)
class OpBytes:
    """The storage bytes one source op (an fx node of the exported program) reads and writes."""

    node: str       # the fx node's name
    op: str         # its target without the overload, e.g. ``aten.addmm``
    read: float
    written: float
    calls: tuple[str, ...]  # the ATen calls the dispatcher saw, in order

    @property
    def bytes(self) -> float:
        return self.read + self.written


def op_name(target: Any) -> str:
    """``aten.addmm`` for ``torch.ops.aten.addmm.default`` (the overload dropped); other callables
    by their qualified name."""
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._schema.name.split('::', 1)[-1]}"
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__name__', repr(target))}"


def touched_bytes(t: torch.Tensor) -> float:
    """Bytes of the distinct elements of the view ``t``: its sizes over the dimensions with a
    non-zero stride, times the element size."""
    if t.numel() == 0:
        return 0.0
    return float(prod(s for s, st in zip(t.shape, t.stride(), strict=True) if st != 0)) * t.element_size()


#: Views of one storage with more elements than this are charged their largest view (a lower bound
#: on their union) instead of the exact union of their element offsets.
MAX_UNION_ELEMENTS = 1 << 22


def _offsets(t: torch.Tensor) -> np.ndarray:
    """The storage offsets (in elements) of every element of the view ``t``."""
    off = np.full((), t.storage_offset(), dtype=np.int64)
    for size, stride in zip(t.shape, t.stride(), strict=True):
        off = np.add.outer(off, np.arange(size, dtype=np.int64) * stride)
    return off.ravel()


def union_bytes(views: list[torch.Tensor]) -> float:
    """Bytes of the union of the elements that ``views`` (of one storage) touch."""
    if len(views) == 1 or sum(v.numel() for v in views) > MAX_UNION_ELEMENTS:
        return max(touched_bytes(v) for v in views)
    offsets = np.unique(np.concatenate([_offsets(v) for v in views if v.numel()] or [np.zeros(0, np.int64)]))
    return float(offsets.size) * views[0].element_size()


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [x for x in tree_flatten(tree)[0] if isinstance(x, torch.Tensor)]


def _key(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


def _mutated(func: Any, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensor arguments ``func``'s schema marks as written in place."""
    schema = getattr(func, "_schema", None)
    if schema is None:
        return []
    out = []
    for i, a in enumerate(schema.arguments):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        v = args[i] if i < len(args) else kwargs.get(a.name)
        out += _tensors(v)
    return out


class _Calls(TorchDispatchMode):
    """Records each ATen call: (op, tensors received, tensors mutated, tensors returned)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.calls.append((op_name(func), _tensors((args, kwargs)), _mutated(func, args, kwargs), _tensors(out)))
        return out


class _Counter(Interpreter):
    """Runs the graph node by node and turns each node's calls into an :class:`OpBytes`."""

    def __init__(self, module: torch.fx.GraphModule, calls: _Calls, mode: Any) -> None:
        super().__init__(module)
        self.rec = calls
        self.mode = mode
        self.seen: set[int] = set()
        self.alive: list[torch.Tensor] = []  # keeps storages alive: their ids are never reused
        self.records: list[OpBytes] = []

    def fetch_attr(self, target: str) -> Any:
        value = super().fetch_attr(target)  # a weight or buffer: the fake tensor of it
        return self.mode.from_tensor(value) if isinstance(value, torch.Tensor) else value

    def run_node(self, n: torch.fx.Node) -> Any:
        start = len(self.rec.calls)
        result = super().run_node(n)
        calls = self.rec.calls[start:]
        outs = _tensors(result)
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
            self.records.append(self._count(n, calls, outs))
        for _, ins, _, made in calls:
            for t in ins + made:
                self.seen.add(_key(t))
                self.alive.append(t)
        for t in outs:
            self.seen.add(_key(t))
            self.alive.append(t)
        return result

    def _count(self, n: torch.fx.Node, calls: list, outs: list[torch.Tensor]) -> OpBytes:
        created = {_key(t) for _, _, _, made in calls for t in made} - self.seen
        reads: dict[int, list[torch.Tensor]] = {}
        writes: dict[int, list[torch.Tensor]] = {}
        for _, ins, mutated, _ in calls:
            for t in ins:
                if _key(t) not in created:
                    reads.setdefault(_key(t), []).append(t)
            for t in mutated:
                if _key(t) not in created:
                    writes.setdefault(_key(t), []).append(t)
        for t in outs:
            if _key(t) in created:
                writes.setdefault(_key(t), []).append(t)
        return OpBytes(n.name, op_name(n.target), sum(union_bytes(v) for v in reads.values()),
                       sum(union_bytes(v) for v in writes.values()), tuple(c[0] for c in calls))


def program_bytes(program: Any, args: tuple) -> list[OpBytes]:
    """The bytes of every ATen source op of ``program`` (an ExportedProgram, or an fx GraphModule
    taking ``args``), in graph order, on fake tensors shaped like ``args``."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    module = program.module() if hasattr(program, "module") else program
    calls = _Calls()
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        counter = _Counter(module, calls, mode)
        fake = tuple(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args)
        with torch.no_grad(), calls:
            counter.run(*fake)
    return counter.records


__all__ = ["OpBytes", "op_name", "program_bytes", "touched_bytes"]
