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


def _erf(x: np.ndarray) -> np.ndarray:
    """erf with fractional error below 1.2e-7 (Numerical Recipes' Chebyshev fit of erfc).

    numpy has no erf; this is accurate well beyond the fp32 tolerances used in validation.
    """
    z = np.abs(x).astype(np.float64)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    return (np.sign(x) * (1.0 - t * np.exp(poly))).astype(np.result_type(x, np.float32))


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

MAP_OPS: dict[str, MapOp] = {m.name: m for m in _MAP}


@dataclass(frozen=True, slots=True)
class ReduceOp:
    """One reduce operator: its identity and numpy reduction over given axes."""

    name: str
    doc: str


REDUCE_OPS: dict[str, ReduceOp] = {r.name: r for r in [
    ReduceOp("none", "no reduction: every iteration point writes its own output element"),
    ReduceOp("add", "sum over the reduced ranks (one vector FLOP per combine)"),
    ReduceOp("mul", "product over the reduced ranks"),
    ReduceOp("max", "maximum over the reduced ranks"),
    ReduceOp("min", "minimum over the reduced ranks"),
    ReduceOp("argmax", "index of the maximum along the single reduced rank (first one on ties)"),
    ReduceOp("argmin", "index of the minimum along the single reduced rank (first one on ties)"),
]}


def arity_ok(op: MapOp, n: int) -> bool:
    """True when ``op`` accepts ``n`` inputs."""
    return n >= 2 if op.arity is None else n == op.arity
