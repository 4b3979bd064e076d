"""The declarations of the Affine Loop IR: dimensions, tensor declarations, tensor values.

- ``Dim("M", 64, parallel=True)``: a named dimension (loop range and einsum rank). The
  size is optional: kernels bind dimension sizes from their arguments' shapes.
- ``Tensor("B,M,K", dtype=..., role=..., density=..., fill=...)``: a declaration, used as
  the annotation of ``model`` parameters (the graph's inputs and weights) and of kernel
  parameters (what a kernel reads); ``Out``/``Temp`` declare what a kernel writes.
- ``Value``: a tensor flowing through ``model``: a numpy array when the program executes,
  a symbolic graph tensor while it is traced. Both carry dimension names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...affine import is_rank_name
from ...dtypes import DTYPES
from ...dtypes import dtype as lookup_dtype
from ...errors import SolarIOError

ROLES = ("input", "weight", "constant", "output", "intermediate")


class LoopIRError(SolarIOError):
    """A loop-IR program that breaks a rule of the IR, or that cannot be traced or run."""


@dataclass(frozen=True)
class Dim:
    """A named dimension: a loop range inside kernels and a rank of the lifted graph.

    ``size`` is a default used when no kernel argument binds the dimension;
    ``parallel`` marks iterations free of dependences (run with numba ``prange``).
    """

    name: str
    size: int | None = None
    parallel: bool = False

    def __post_init__(self) -> None:
        if not is_rank_name(self.name):
            raise LoopIRError(f"Dim name {self.name!r} must be an identifier")
        if self.size is not None and (not isinstance(self.size, int) or self.size <= 0):
            raise LoopIRError(f"Dim {self.name}: size must be a positive integer, got {self.size!r}")

    def __iter__(self):
        raise LoopIRError(f"Dim {self.name} is a loop range only inside @kernel functions")


def parse_dims(dims: str | tuple | list) -> tuple[str, ...]:
    """``"B, M,K"`` or a sequence of names / Dims -> a tuple of distinct dimension names."""
    if isinstance(dims, str):
        names = tuple(p.strip() for p in dims.split(",")) if dims.strip() else ()
    else:
        names = tuple(d.name if isinstance(d, Dim) else str(d) for d in dims)
    for n in names:
        if not is_rank_name(n):
            raise LoopIRError(f"bad dimension name {n!r} in {dims!r}: names are identifiers separated by commas")
    if len(set(names)) != len(names):
        raise LoopIRError(f"dimensions {dims!r} repeat a name; declare a second Dim of the same size")
    return names


@dataclass(frozen=True)
class Tensor:
    """A tensor declaration: dimension names and metadata.

    ``dtype``: a file dtype name (``fp16``, ``bf16``, ``int32``, ...); ``role``: ``input``,
    ``weight`` or ``constant`` for model parameters, ``output`` / ``intermediate`` for what
    a kernel writes (see ``Out``/``Temp``); ``density``: fraction of non-zeros of a tensor
    stored compressed; ``fill``: the value a kernel reads outside the tensor's bounds
    (padding); without it an out-of-bounds read is an error; ``value``: a ``constant``
    model parameter whose every element is this number (an immediate: no bytes, e.g. the
    zero initial state of a recurrence); ``generated``: a ``constant`` whose contents the
    program computes from indices where it uses them (a causal mask, a pooling-window table):
    its values come from ``get_inputs`` like a weight's, but it moves no bytes.
    """

    dims: tuple[str, ...] | str
    dtype: str | None = None
    role: str = "input"
    density: float | None = None
    fill: float | None = None
    value: float | None = None
    generated: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", parse_dims(self.dims))
        if self.dtype is not None:
            try:
                object.__setattr__(self, "dtype", lookup_dtype(self.dtype).name)
            except KeyError as e:
                raise LoopIRError(str(e.args[0])) from None
        if self.role not in ROLES:
            raise LoopIRError(f"role {self.role!r} is not one of {', '.join(ROLES)}")
        if self.density is not None and not (0.0 < float(self.density) <= 1.0):
            raise LoopIRError(f"density must be in (0, 1], got {self.density!r}")
        if self.fill is not None:
            object.__setattr__(self, "fill", float(self.fill))
        if self.value is not None:
            if self.role != "constant":
                raise LoopIRError(f"only role='constant' tensors have a value (got role {self.role!r})")
            object.__setattr__(self, "value", float(self.value))
        if not isinstance(self.generated, bool):
            raise LoopIRError(f"generated must be True or False, got {self.generated!r}")
        if self.generated and (self.role != "constant" or self.value is not None):
            raise LoopIRError("only role='constant' tensors without a value may be generated")


def Out(dims: str | tuple, dtype: str | None = None, density: float | None = None) -> Tensor:  # noqa: N802
    """A kernel output: allocated by the kernel call and returned (in parameter order)."""
    return Tensor(dims, dtype=dtype, role="output", density=density)


def Temp(dims: str | tuple, dtype: str | None = None, density: float | None = None) -> Tensor:  # noqa: N802
    """A kernel-local temporary: allocated by the call, written once, read by later nests
    (``density``: the fraction of it a real kernel computes and stores, e.g. a causal triangle)."""
    return Tensor(dims, dtype=dtype, role="intermediate", density=density)


@dataclass(eq=False)
class Value:
    """A tensor in ``model``: ``data`` (numpy) when executing, ``name``/``ranks`` when tracing."""

    dims: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: str
    data: np.ndarray | None = None
    name: str | None = None
    ranks: tuple[str, ...] = field(default=())
    density: float | None = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def size_of(self, dim: str) -> int:
        """The size of dimension ``dim``."""
        return self.shape[self.axis(dim)]

    def axis(self, dim: str) -> int:
        """The position of dimension ``dim``; LoopIRError names the dims if absent."""
        try:
            return self.dims.index(dim)
        except ValueError:
            raise LoopIRError(f"tensor {self.label()} has dims {','.join(self.dims)}, not {dim}") from None

    def label(self) -> str:
        return self.name or f"[{','.join(self.dims)}]"

    def numpy(self) -> np.ndarray:
        """The array (executing only)."""
        if self.data is None:
            raise LoopIRError(f"tensor {self.label()} has no values while the program is traced")
        return self.data

    def __bool__(self) -> bool:
        raise LoopIRError(f"tensor {self.label()} has no truth value: model control flow may depend "
                          "on shapes, not on tensor values")

    def __repr__(self) -> str:
        return f"Value({self.label()}, dims={','.join(self.dims)}, shape={self.shape}, dtype={self.dtype})"


def is_float(dtype: str) -> bool:
    return DTYPES[dtype].family == "float"
