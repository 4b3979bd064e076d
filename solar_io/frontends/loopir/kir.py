"""The checked form of a kernel: loop nests of stores of scalar expressions.

``parse.parse_kernel`` builds it from a function's AST; ``codegen`` turns it into code,
``lift`` into einsums. Indexes are ``AffineExpr`` over the kernel's Dim names.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...affine import AffineExpr
from .ir import Dim, Tensor


@dataclass(frozen=True, slots=True)
class Read:
    """A tensor element read: parameter, one affine index per dim, source line."""
    param: str
    index: tuple[AffineExpr, ...]
    line: int


@dataclass(frozen=True, slots=True)
class Const:
    value: float


@dataclass(frozen=True, slots=True)
class ScalarArg:
    param: str


@dataclass(frozen=True, slots=True)
class Op:
    op: str
    args: tuple


Expr = Read | Const | ScalarArg | Op


@dataclass(frozen=True, slots=True)
class Store:
    param: str
    dims: tuple[str, ...]
    reduce: str  # none, add, mul, max, min
    expr: Expr
    line: int


@dataclass(frozen=True, slots=True)
class Nest:
    dims: tuple[str, ...]
    dim_objs: tuple[Dim, ...]
    stores: tuple[Store, ...]
    line: int


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    kind: str  # in, out, temp, scalar
    spec: Tensor | None


@dataclass(frozen=True)
class KernelIR:
    """``index_params``: the ``int`` scalar parameters that indexes use (as ``%name`` terms)."""

    name: str
    file: str
    line: int
    params: tuple[Param, ...]
    nests: tuple[Nest, ...]
    index_params: tuple[str, ...] = ()

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)


PARAM = "%"  # prefix of an int scalar parameter's term in an index (``x[b, t + 1]``)


def bind_params(e: AffineExpr, scalars: dict) -> AffineExpr:
    """``e`` with its int-parameter terms replaced by the call's values (a constant)."""
    if not any(d.startswith(PARAM) for d, _ in e.terms):
        return e
    const = e.const + sum(c * int(scalars[d[len(PARAM):]]) for d, c in e.terms if d.startswith(PARAM))
    return AffineExpr(tuple((d, c) for d, c in e.terms if not d.startswith(PARAM)), const)


def reads_of(e: Expr) -> list[Read]:
    """Every tensor read in ``e``."""
    if isinstance(e, Read):
        return [e]
    if isinstance(e, Op):
        return [r for a in e.args for r in reads_of(a)]
    return []
