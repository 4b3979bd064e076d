"""The scalar builtins a kernel body may call, their map operators and their code.

Each entry gives the map operator of the einsum graph (``solar_io.ops.MAP_OPS``), the
arity (None: two or more) and a Python expression template that both numba and plain
Python run (``{0}``, ``{1}``, ... are the arguments; ``{args}`` all of them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np


@dataclass(frozen=True, slots=True)
class ScalarFn:
    """One builtin: map operator, arity (None = 2 or more), code template."""

    op: str
    arity: int | None
    template: str


SCALAR_FUNCS: dict[str, ScalarFn] = {
    "exp": ScalarFn("exp", 1, "math.exp({0})"),
    "log": ScalarFn("log", 1, "math.log({0})"),
    "sqrt": ScalarFn("sqrt", 1, "math.sqrt({0})"),
    "rsqrt": ScalarFn("rsqrt", 1, "(1.0 / math.sqrt({0}))"),
    "reciprocal": ScalarFn("reciprocal", 1, "(1.0 / ({0}))"),
    "tanh": ScalarFn("tanh", 1, "math.tanh({0})"),
    "sin": ScalarFn("sin", 1, "math.sin({0})"),
    "cos": ScalarFn("cos", 1, "math.cos({0})"),
    "erf": ScalarFn("erf", 1, "math.erf({0})"),
    "sigmoid": ScalarFn("sigmoid", 1, "(1.0 / (1.0 + math.exp(-({0}))))"),
    "silu": ScalarFn("silu", 1, "(({0}) / (1.0 + math.exp(-({0}))))"),
    "gelu": ScalarFn("gelu", 1, "(0.5 * ({0}) * (1.0 + math.erf(({0}) * 0.7071067811865476)))"),
    "gelu_tanh": ScalarFn("gelu_tanh", 1,
                          "(0.5 * ({0}) * (1.0 + math.tanh(0.7978845608028654 * (({0}) + 0.044715 * ({0}) ** 3))))"),
    "relu": ScalarFn("relu", 1, "max({0}, 0.0)"),
    "abs": ScalarFn("abs", 1, "abs({0})"),
    "square": ScalarFn("square", 1, "(({0}) * ({0}))"),
    "sign": ScalarFn("sign", 1, "(1.0 if ({0}) > 0 else (-1.0 if ({0}) < 0 else 0.0))"),
    "floor": ScalarFn("floor", 1, "float(math.floor({0}))"),
    "ceil": ScalarFn("ceil", 1, "float(math.ceil({0}))"),
    "round": ScalarFn("round", 1, "float(round({0}))"),
    "where": ScalarFn("where", 3, "(({1}) if ({0}) else ({2}))"),
    "max": ScalarFn("max", None, "max({args})"),
    "min": ScalarFn("min", None, "min({args})"),
    "pow": ScalarFn("pow", 2, "(({0}) ** ({1}))"),
}

#: Infix operators of the body: AST operator class name -> (map op, code template).
BINARY = {"Add": ("add", "({0} + {1})"), "Sub": ("sub", "({0} - {1})"), "Mult": ("mul", "({0} * {1})"),
          "Div": ("div", "({0} / {1})"), "Pow": ("pow", "({0} ** {1})")}
COMPARE = {"Lt": ("lt", "<"), "LtE": ("le", "<="), "Gt": ("gt", ">"), "GtE": ("ge", ">="), "Eq": ("eq", "=="),
           "NotEq": ("ne", "!=")}
#: Code of the map ops that infix syntax produces.
OP_CODE = {"add": "({args_plus})", "mul": "({args_times})", "sub": "({0} - {1})", "div": "({0} / {1})",
           "neg": "(-{0})", "lt": "({0} < {1})", "le": "({0} <= {1})", "gt": "({0} > {1})", "ge": "({0} >= {1})",
           "eq": "({0} == {1})", "ne": "({0} != {1})", "and": "({0} and {1})", "or": "({0} or {1})",
           "not": "(not {0})"}


def code_of(op: str, args: list[str]) -> str:
    """The Python code applying map ``op`` to argument codes ``args``."""
    if op in OP_CODE:
        tpl = OP_CODE[op]
    else:
        tpl = next(f.template for f in SCALAR_FUNCS.values() if f.op == op)
    return tpl.format(*args, args=", ".join(args), args_plus=" + ".join(args), args_times=" * ".join(args))


#: ``math`` as seen by kernels run without numba: numpy's scalar functions give inf/nan
#: where ``math`` would raise, like compiled code does.
PURE_MATH = SimpleNamespace(exp=np.exp, log=np.log, sqrt=np.sqrt, tanh=np.tanh, sin=np.sin, cos=np.cos,
                            erf=math.erf, floor=np.floor, ceil=np.ceil, inf=math.inf, nan=math.nan, pi=math.pi)
