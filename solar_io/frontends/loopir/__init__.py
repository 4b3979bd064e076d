"""Affine Loop IR: an executable Python IR of loop-nest kernels, traced and lifted to einsums.

Write a program with ``Dim``, ``Tensor``/``Out``/``Temp``, ``@kernel`` loop nests and the
builtins (``reshape``, ``transpose``, ``slice``, ``select``, ``concat``, ``stack``,
``gather``, ``scatter_add``, ``scan``, ``apply_mask``, ``cast``, ``opaque``) composed by a
``model(...)`` function; see SPEC.md
next to this file. ``capture_file(path)`` traces it, lifts each kernel's loop nests into
extended einsums and checks the graph against the program numerically. Kernels run with
numba when it is installed (``jit=False`` / ``--no-jit``: plain Python); importing this
package, tracing and lifting do not need numba.
"""

from __future__ import annotations

from pathlib import Path

from .builtins import (
    apply_mask,
    cast,
    concat,
    gather,
    opaque,
    reshape,
    scan,
    scatter_add,
    select,
    slice,
    stack,
    transpose,
)
from .capture import capture_file
from .ir import Dim, LoopIRError, Out, Temp, Tensor, Value
from .kernel import Kernel, kernel
from .state import size

SPEC_PATH = Path(__file__).with_name("SPEC.md")


def _scalar(name: str):
    def fn(*args):
        raise LoopIRError(f"{name}() is a kernel builtin: call it only inside @kernel loop bodies")

    fn.__name__ = name
    fn.__doc__ = f"Kernel-body builtin {name} (lifted to the map operator of the same name)."
    return fn


exp, log, sqrt, rsqrt, reciprocal, tanh, sin, cos, erf = (_scalar(n) for n in (
    "exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sin", "cos", "erf"))
sigmoid, silu, gelu, gelu_tanh, relu, square, sign, where = (_scalar(n) for n in (
    "sigmoid", "silu", "gelu", "gelu_tanh", "relu", "square", "sign", "where"))

__all__ = [
    "Dim", "Kernel", "LoopIRError", "Out", "SPEC_PATH", "Temp", "Tensor", "Value", "apply_mask", "capture_file",
    "cast", "concat", "cos", "erf", "exp", "gather", "gelu", "gelu_tanh", "kernel", "log", "opaque", "reciprocal",
    "relu", "reshape", "rsqrt", "scan", "scatter_add", "select", "sigmoid", "sign", "silu", "sin", "size", "slice",
    "sqrt", "square", "stack", "tanh", "transpose", "where",
]
