"""Uninitialised memory in validation: the same known fill on both sides, never a comparison.

``aten.empty``, ``empty_like``, ``new_empty``, ``empty_strided``, ... allocate without writing:
their values are whatever the memory held. The capture lowers them to constants (0, the bytes
are what matters), while eager PyTorch returns arbitrary values, so comparing anything computed
from them would fail for no fault of the lowering (a Mixtral-style MoE block fills
``torch.empty_like`` / ``zeros`` buffers with ``index_add_``).

Validation therefore runs eager PyTorch with ``torch.use_deterministic_algorithms(True,
warn_only=True)`` and ``torch.utils.deterministic.fill_uninitialized_memory``, under which those
ops fill their memory with NaN (floating), the dtype's largest value (integers) or True (bool),
and executes a copy of the graph whose constants lowered from those ops hold the same fill
(``filled_graph``). A tensor that later fully overwrites the buffer (``copy_``, a full
``index_copy_``, slice writes) is then defined on both sides and compared where it is defined;
an element still computed from uninitialised memory is NaN (or the fill) on both sides and
compares equal, so it never fails the check. The per-node checks skip these ops outright
(``is_uninitialised``): a lone allocation has nothing to compare.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch

from ...dtypes import DTYPES
from ...graph import Graph

if TYPE_CHECKING:
    from .capture import Capture

#: ATen ops that allocate without initialising (their ``aten.NAME``).
UNINITIALISED = frozenset({"aten.empty", "aten.empty_like", "aten.new_empty", "aten.new_empty_strided",
                           "aten.empty_strided", "aten.empty_permuted"})


def is_uninitialised(target: Any) -> bool:
    """Whether an fx call target allocates without initialising."""
    schema = getattr(target, "_schema", None)
    return schema is not None and f"aten.{schema.name.split('::')[-1]}" in UNINITIALISED


def fill_value(dtype: str) -> float | int | bool:
    """What PyTorch's ``fill_uninitialized_memory`` writes into a tensor of file ``dtype``."""
    family = DTYPES[dtype].family
    if family == "bool":
        return True
    if family in ("int", "uint"):
        bits = int(DTYPES[dtype].bits)
        return (1 << bits) - 1 if family == "uint" else (1 << (bits - 1)) - 1
    return float("nan")


def uninitialised_tensors(cap: Capture) -> set[str]:
    """Graph tensors lowered from an uninitialising op (a constant each)."""
    out = set()
    for node in cap.program.graph.nodes:
        if node.op == "call_function" and is_uninitialised(node.target):
            name = cap.lowered.fx_tensors.get(node.name)
            if name is not None and cap.graph.tensor_map.get(name) is not None:
                out.add(name)
    return out


def filled_graph(cap: Capture, g: Graph | None = None) -> Graph:
    """``g`` (default ``cap.graph``) with the constants of uninitialising ops holding the fill eager
    PyTorch writes under ``deterministic_memory`` (for executing only: the file keeps its 0)."""
    g = cap.graph if g is None else g
    names = uninitialised_tensors(cap)
    if not names:
        return g
    tensors = tuple(replace(t, value=fill_value(t.dtype)) if t.name in names and t.value is not None else t
                    for t in g.tensors)
    return replace(g, tensors=tensors)


@contextmanager
def deterministic_memory() -> Iterator[None]:
    """Eager PyTorch with uninitialised memory filled (NaN, the largest integer, True); nondeterministic
    ops only warn (the warnings are silenced). Restores the previous settings."""
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.use_deterministic_algorithms(True, warn_only=True)
            torch.utils.deterministic.fill_uninitialized_memory = True
            yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill

