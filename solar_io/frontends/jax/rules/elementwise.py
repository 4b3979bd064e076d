"""Elementwise primitives: maps, comparisons, select, clamp, casts (one einsum each, reduce none)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ....ops import MAP_OPS
from ..lower import Lowerer, Operand
from ..registry import NoLowering, rule
from .helpers import ew

_EW = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "max", "min": "min", "pow": "pow",
       "neg": "neg", "abs": "abs", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "tanh": "tanh",
       "sin": "sin", "cos": "cos", "erf": "erf", "logistic": "sigmoid", "sign": "sign", "floor": "floor",
       "ceil": "ceil", "round": "round", "square": "square", "eq": "eq", "ne": "ne", "lt": "lt", "le": "le",
       "gt": "gt", "ge": "ge", "add_any": "add",
       # format 1.1 special functions: one evaluation each, as exp or tanh
       "erfc": "erfc", "erf_inv": "erfinv", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan",
       "atan2": "atan2", "sinh": "sinh", "cosh": "cosh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh",
       "log1p": "log1p", "expm1": "expm1", "exp2": "exp2", "rem": "fmod"}


def _ew_rule(prim: str, map: str) -> None:
    @rule(prim)
    def lower(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
        if not any(isinstance(x, str) for x in ins):  # scalars only: fold now
            dt = np.dtype(eqn.outvars[0].aval.dtype)
            return [MAP_OPS[map].fn(*(np.asarray(x, dtype=dt) for x in ins)).astype(dt).item()]
        if prim == "round" and int(eqn.params.get("rounding_method", 1)) != 1:
            raise NoLowering("round half away from zero")
        if prim == "div" and ctx.out_dtype().startswith(("int", "uint")):
            raise NoLowering("integer division")
        return [ew(ctx, map, ins)]


for _p, _m in _EW.items():
    _ew_rule(_p, _m)


@rule("and", "or", "not")
def logical(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    if ctx.out_dtype() != "bool":
        raise NoLowering("bitwise operation on integers")
    return [ew(ctx, eqn.primitive.name, ins)]


@rule("integer_pow")
def integer_pow(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    y = int(eqn.params["y"])
    if y == 2:
        return [ew(ctx, "square", ins)]
    if y == 1:
        return [ew(ctx, "identity", ins)]
    if y == -1:
        return [ew(ctx, "reciprocal", ins)]
    if 2 < y <= 4:
        return [ew(ctx, "mul", [ins[0]] * y)]
    return [ew(ctx, "pow", [ins[0], float(y)])]


@rule("convert_element_type", "copy")
def convert(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    x = ins[0]
    if not isinstance(x, str):
        return [x]
    dt = ctx.out_dtype()
    if dt == ctx.dtype(x) and eqn.primitive.name != "copy":
        return [x]
    if dt == "bool" or (dt.startswith(("int", "uint")) and not ctx.dtype(x).startswith(("int", "uint", "bool"))):
        raise NoLowering(f"conversion {ctx.dtype(x)} -> {dt} (truncation or != 0)")
    return [ew(ctx, "identity", [x], dtype=dt)]


@rule("stop_gradient")
def passthrough(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    return [ins[0]]


@rule("select_n")
def select_n(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    if len(ins) != 3:
        raise NoLowering(f"select_n with {len(ins) - 1} cases")
    pred, f, t = ins
    if not any(isinstance(x, str) for x in ins):  # scalars only: fold now
        return [t if pred else f]
    if isinstance(pred, str) and ctx.dtype(pred) != "bool":
        raise NoLowering("integer selector")
    return [ew(ctx, "where", [pred, t, f])]


@rule("clamp")
def clamp(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    lo, x, hi = ins
    if not any(isinstance(v, str) for v in ins):  # scalars only: fold now
        return [min(max(x, lo), hi)]
    return [ew(ctx, "min", [ew(ctx, "max", [x, lo]), hi])]


@rule("is_finite")
def is_finite(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    """``|x| < inf``: false for infinities and NaN (every comparison with NaN is false)."""
    x = ins[0]
    if not isinstance(x, str):
        return [bool(np.isfinite(x))]
    return [ew(ctx, "lt", [ew(ctx, "abs", [x], dtype=ctx.dtype(x)), float("inf")])]


#: (exponent bits, mantissa bits) of the float dtypes
_FLOAT_BITS = {"fp64": (11, 52), "fp32": (8, 23), "bf16": (8, 7), "fp16": (5, 10)}


@rule("reduce_precision")
def reduce_precision(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
    """A no-op when the target format holds every value of the operand's dtype; a real rounding
    otherwise, which no map op expresses (opaque)."""
    x, p = ins[0], eqn.params
    have = _FLOAT_BITS.get(ctx.dtype(x)) if isinstance(x, str) else None
    if have is not None and p["exponent_bits"] >= have[0] and p["mantissa_bits"] >= have[1]:
        return [x]
    raise NoLowering(f"rounding to {p['exponent_bits']} exponent and {p['mantissa_bits']} mantissa bits has no "
                     "map op in the format")
