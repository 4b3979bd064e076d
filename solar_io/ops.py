"""The registry of map and reduce operators of an extended einsum.

A node applies its *map* operator to the values its inputs give at each point of the
iteration space, then combines points that share an output element with its *reduce*
operator. Each map operator declares its arity, what one application costs (vector FLOPs
and transcendental operations: the minimum a hardware unit must execute, so that SOL
stays a lower bound) and its numpy meaning, which the reference executor uses.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def _erfc_pos(z: np.ndarray) -> np.ndarray:
    """erfc(|z|) in float64 with fractional error below 1.2e-7 (Numerical Recipes' Chebyshev fit)."""
    z = np.abs(z).astype(np.float64)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    return t * np.exp(poly)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf, accurate well beyond the fp32 tolerances used in validation (numpy has no erf)."""
    return (np.sign(x) * (1.0 - _erfc_pos(x))).astype(np.result_type(x, np.float32))


def _erfc(x: np.ndarray) -> np.ndarray:
    """erfc = 1 - erf without cancellation for large arguments (erfc(-z) = 2 - erfc(z))."""
    c = _erfc_pos(x)
    return np.where(np.asarray(x) < 0, 2.0 - c, c).astype(np.result_type(x, np.float32))


def _erfinv(x: np.ndarray) -> np.ndarray:
    """Inverse error function: M. Giles' single-precision approximation, then two Newton steps on erf.

    +-inf at +-1, nan outside [-1, 1] (as torch.erfinv).
    """
    x64 = np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = -np.log((1.0 - x64) * (1.0 + x64))
        a = w - 2.5
        p = 2.81022636e-08
        for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                  -0.00417768164, 0.246640727, 1.50140941):
            p = c + p * a
        b = np.sqrt(np.maximum(w, 0.0)) - 3.0
        q = -0.000200214257
        for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                  0.00943887047, 1.00167406, 2.83297682):
            q = c + q * b
        y = np.where(w < 5.0, p, q) * x64
        for _ in range(2):  # Newton on erf(y) - x; erf'(y) = 2/sqrt(pi) exp(-y^2)
            step = (np.sign(y) * (1.0 - _erfc_pos(y)) - x64) / (2.0 / math.sqrt(math.pi) * np.exp(-y * y))
            y = np.where(np.isfinite(step), y - step, y)
        y = np.where(np.abs(x64) == 1.0, np.copysign(np.inf, x64), y)
        y = np.where(np.abs(x64) > 1.0, np.nan, y)
    return y.astype(np.result_type(x, np.float32))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


@dataclass(frozen=True, slots=True)
class MapOp:
    """One map operator: arity (None = two or more), cost per application, numpy meaning."""

    name: str
    arity: int | None
    vector: int
    transcendental: int
    fn: Callable[..., np.ndarray]
    result: str = "same"  # "same": dtype of the output tensor; "bool": a predicate
    doc: str = ""
    since: tuple[int, int] = (1, 0)  # the format version that introduced the operator


def _fold(f: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    def apply(*xs: np.ndarray) -> np.ndarray:
        out = xs[0]
        for x in xs[1:]:
            out = f(out, x)
        return out

    return apply


_MAP = [
    MapOp("identity", 1, 0, 0, lambda x: x, doc="copy the single input (reductions, casts, data movement)"),
    MapOp("add", None, 1, 0, _fold(np.add), doc="sum of the inputs; n-1 FLOPs per point"),
    MapOp("sub", 2, 1, 0, np.subtract, doc="a - b"),
    MapOp("mul", None, 1, 0, _fold(np.multiply), doc="product of the inputs; with reduce add: a contraction"),
    MapOp("div", 2, 1, 0, np.divide, doc="a / b"),
    MapOp("max", None, 1, 0, _fold(np.maximum), doc="elementwise maximum"),
    MapOp("min", None, 1, 0, _fold(np.minimum), doc="elementwise minimum"),
    MapOp("pow", 2, 0, 1, np.power, doc="a ** b (exp/log on a special-function unit)"),
    MapOp("neg", 1, 1, 0, np.negative, doc="-a"),
    MapOp("abs", 1, 1, 0, np.abs, doc="|a|"),
    MapOp("square", 1, 1, 0, np.square, doc="a * a"),
    MapOp("relu", 1, 1, 0, lambda x: np.maximum(x, 0), doc="max(a, 0)"),
    MapOp("sign", 1, 1, 0, np.sign, doc="sign(a)"),
    MapOp("floor", 1, 1, 0, np.floor, doc="floor(a)"),
    MapOp("ceil", 1, 1, 0, np.ceil, doc="ceil(a)"),
    MapOp("round", 1, 1, 0, np.round, doc="round half to even"),
    MapOp("exp", 1, 0, 1, np.exp, doc="e ** a"),
    MapOp("log", 1, 0, 1, np.log, doc="natural logarithm"),
    MapOp("sqrt", 1, 0, 1, np.sqrt, doc="square root"),
    MapOp("rsqrt", 1, 0, 1, lambda x: 1.0 / np.sqrt(x), doc="1 / sqrt(a)"),
    MapOp("reciprocal", 1, 0, 1, lambda x: 1.0 / x, doc="1 / a"),
    MapOp("tanh", 1, 0, 1, np.tanh, doc="hyperbolic tangent"),
    MapOp("sin", 1, 0, 1, np.sin, doc="sine"),
    MapOp("cos", 1, 0, 1, np.cos, doc="cosine"),
    MapOp("erf", 1, 0, 1, _erf, doc="error function"),
    MapOp("sigmoid", 1, 2, 1, _sigmoid, doc="1 / (1 + exp(-a)): one exp, one add, one divide"),
    MapOp("silu", 1, 3, 1, lambda x: x * _sigmoid(x), doc="a * sigmoid(a)"),
    MapOp("gelu", 1, 4, 1, lambda x: 0.5 * x * (1.0 + _erf(x * (1.0 / math.sqrt(2.0)))),
          doc="exact GELU: 0.5 * a * (1 + erf(a / sqrt(2)))"),
    MapOp("gelu_tanh", 1, 6, 1,
          lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
          doc="tanh-approximated GELU"),
    MapOp("where", 3, 1, 0, lambda c, a, b: np.where(c.astype(bool), a, b), doc="c ? a : b"),
    MapOp("eq", 2, 1, 0, np.equal, "bool", "a == b"),
    MapOp("ne", 2, 1, 0, np.not_equal, "bool", "a != b"),
    MapOp("lt", 2, 1, 0, np.less, "bool", "a < b"),
    MapOp("le", 2, 1, 0, np.less_equal, "bool", "a <= b"),
    MapOp("gt", 2, 1, 0, np.greater, "bool", "a > b"),
    MapOp("ge", 2, 1, 0, np.greater_equal, "bool", "a >= b"),
    MapOp("and", 2, 1, 0, np.logical_and, "bool", "logical and"),
    MapOp("or", 2, 1, 0, np.logical_or, "bool", "logical or"),
    MapOp("not", 1, 1, 0, np.logical_not, "bool", "logical not"),
]

# Format 1.1. Every special function is one special-function evaluation (as exp, tanh, erf
# above); integer-valued rounding and remainders are one vector operation (as floor, div).
_V1_1 = (1, 1)
_MAP += [
    MapOp("tan", 1, 0, 1, np.tan, doc="tangent", since=_V1_1),
    MapOp("asin", 1, 0, 1, np.arcsin, doc="inverse sine", since=_V1_1),
    MapOp("acos", 1, 0, 1, np.arccos, doc="inverse cosine", since=_V1_1),
    MapOp("atan", 1, 0, 1, np.arctan, doc="inverse tangent", since=_V1_1),
    MapOp("sinh", 1, 0, 1, np.sinh, doc="hyperbolic sine", since=_V1_1),
    MapOp("cosh", 1, 0, 1, np.cosh, doc="hyperbolic cosine", since=_V1_1),
    MapOp("asinh", 1, 0, 1, np.arcsinh, doc="inverse hyperbolic sine", since=_V1_1),
    MapOp("acosh", 1, 0, 1, np.arccosh, doc="inverse hyperbolic cosine", since=_V1_1),
    MapOp("atanh", 1, 0, 1, np.arctanh, doc="inverse hyperbolic tangent", since=_V1_1),
    MapOp("atan2", 2, 0, 1, np.arctan2, doc="angle of the point (b, a): atan(a / b) in the right quadrant",
          since=_V1_1),
    MapOp("erfc", 1, 0, 1, _erfc, doc="complementary error function 1 - erf(a)", since=_V1_1),
    MapOp("erfinv", 1, 0, 1, _erfinv, doc="inverse error function", since=_V1_1),
    MapOp("log1p", 1, 0, 1, np.log1p, doc="log(1 + a), accurate near 0", since=_V1_1),
    MapOp("expm1", 1, 0, 1, np.expm1, doc="exp(a) - 1, accurate near 0", since=_V1_1),
    MapOp("log2", 1, 0, 1, np.log2, doc="base-2 logarithm", since=_V1_1),
    MapOp("log10", 1, 0, 1, np.log10, doc="base-10 logarithm", since=_V1_1),
    MapOp("exp2", 1, 0, 1, np.exp2, doc="2 ** a", since=_V1_1),
    MapOp("trunc", 1, 1, 0, np.trunc, doc="round toward zero", since=_V1_1),
    MapOp("fmod", 2, 1, 0, np.fmod, doc="remainder of a / b with the sign of a (C fmod)", since=_V1_1),
    MapOp("remainder", 2, 1, 0, np.remainder, doc="remainder of a / b with the sign of b (Python %)",
          since=_V1_1),
]

MAP_OPS: dict[str, MapOp] = {m.name: m for m in _MAP}


@dataclass(frozen=True, slots=True)
class ReduceOp:
    """One reduce operator and its numpy ufunc (None for none/argmax/argmin).

    Operators with a ufunc are associative: they can also run as a scan (``ufunc.accumulate``
    along the node's ``scan`` rank) and combine into an indirectly indexed output (``ufunc.at``).
    """

    name: str
    doc: str
    ufunc: np.ufunc | None = None


REDUCE_OPS: dict[str, ReduceOp] = {r.name: r for r in [
    ReduceOp("none", "no reduction: every iteration point writes its own output element"),
    ReduceOp("add", "sum over the reduced ranks (one vector FLOP per combine)", np.add),
    ReduceOp("mul", "product over the reduced ranks", np.multiply),
    ReduceOp("max", "maximum over the reduced ranks", np.maximum),
    ReduceOp("min", "minimum over the reduced ranks", np.minimum),
    ReduceOp("argmax", "index of the maximum along the single reduced rank (first one on ties)"),
    ReduceOp("argmin", "index of the minimum along the single reduced rank (first one on ties)"),
]}


def arity_ok(op: MapOp, n: int) -> bool:
    """True when ``op`` accepts ``n`` inputs."""
    return n >= 2 if op.arity is None else n == op.arity
