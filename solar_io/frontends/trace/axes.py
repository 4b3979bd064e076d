"""Axes of a FlashInfer-Trace definition: ``const``, ``var`` and ``expr``, and its constraints.

An ``expr`` axis (``"batch_size * seq_len"``) and a constraint (``"H_qo == H_kv * H_r"``) are
evaluated by walking their Python AST: numbers, axis names, ``+ - * / // % **``, unary ``+ -``,
parentheses, and (constraints only) comparisons joined by ``and``/``or``/``not``. Nothing is ever
passed to ``eval``; any other syntax is an error naming the expression.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Mapping
from dataclasses import dataclass

from ..common.errors import CaptureError

AXIS_KINDS = ("const", "var", "expr")

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge}
_MAX_POWER = 64  # 2**64 is larger than any axis; a bigger exponent is a typo, not a size


class ExprError(ValueError):
    """An expression that is not arithmetic over known names (the message says what is wrong)."""


@dataclass(frozen=True, slots=True)
class Axis:
    """One named axis: its kind, its value (const), or its expression (expr)."""

    name: str
    kind: str
    value: int | None = None
    expression: str | None = None


def names_in(expression: str) -> set[str]:
    """The names an expression refers to (ExprError if it does not parse)."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as e:
        raise ExprError(f"{expression!r} does not parse: {e.msg}") from None
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def evaluate(expression: str, env: Mapping[str, int | float | bool], *, logical: bool = False) -> int | float | bool:
    """The value of ``expression`` with the names in ``env``.

    Arithmetic only (``+ - * / // % **``, unary ``+ -``); with ``logical`` also comparisons (chained
    too), ``and``, ``or`` and ``not``. ExprError names the first thing that is not allowed.
    """
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as e:
        raise ExprError(f"{expression!r} does not parse: {e.msg}") from None
    return _eval(tree.body, env, logical, expression)


def _eval(node: ast.AST, env: Mapping, logical: bool, text: str):  # noqa: ANN202, C901
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise ExprError(f"{text!r} names {node.id!r}, which is not an axis (known: {', '.join(sorted(env))})")
        return env[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left, env, logical, text), _eval(node.right, env, logical, text)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_POWER:
            raise ExprError(f"{text!r}: exponent {right} is too large")
        try:
            return _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ExprError(f"{text!r} divides by zero") from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, env, logical, text))
    if logical and isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _eval(node.operand, env, logical, text)
    if logical and isinstance(node, ast.BoolOp):
        values = [_eval(v, env, logical, text) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if logical and isinstance(node, ast.Compare) and all(type(o) in _COMPARE for o in node.ops):
        left = _eval(node.left, env, logical, text)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, env, logical, text)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    what = type(node).__name__
    allowed = "arithmetic (+ - * / // % **) over axis names and numbers"
    if logical:
        allowed += ", comparisons, and/or/not"
    raise ExprError(f"{text!r} uses {what}, which is not allowed: only {allowed}")


def resolve(axes: Mapping[str, Axis], given: Mapping[str, int], where: str, field: str = "") -> dict[str, int]:
    """{axis: size} from the const values, the workload's ``var`` values and the ``expr`` axes.

    ``where`` prefixes every error (the workload file and line), ``field`` the path to ``axes``. A
    var axis missing from ``given``, a value that is not a non-negative integer, or an expr that is
    not a whole number is an error.
    """
    sizes: dict[str, int] = {}
    for name, ax in axes.items():
        if ax.kind == "const":
            sizes[name] = int(ax.value)  # type: ignore[arg-type]
    for name in given:
        if name not in axes:
            raise CaptureError(f"{where}: {field}axes.{name}: not an axis of the definition "
                               f"(its axes: {', '.join(axes)})")
        if axes[name].kind != "var":
            raise CaptureError(f"{where}: {field}axes.{name}: is a {axes[name].kind} axis; a workload sets var "
                               "axes only")
    for name, ax in axes.items():
        if ax.kind != "var":
            continue
        if name not in given:
            raise CaptureError(f"{where}: {field}axes.{name}: missing (a var axis needs a value in every workload)")
        v = given[name]
        if type(v) is not int or v < 0:
            raise CaptureError(f"{where}: {field}axes.{name}: must be a non-negative integer, got {v!r}")
        sizes[name] = v
    pending = {n: a for n, a in axes.items() if a.kind == "expr"}
    while pending:  # expr axes may refer to each other in any order; definition checks ruled out cycles
        progress = False
        for name, ax in list(pending.items()):
            if names_in(ax.expression or "") <= sizes.keys():
                sizes[name] = _whole(ax, sizes, where)
                del pending[name]
                progress = True
        if not progress:
            name = next(iter(pending))
            raise CaptureError(f"{where}: axes.{name}: expression {pending[name].expression!r} depends on itself")
    return {n: sizes[n] for n in axes}


def _whole(ax: Axis, sizes: Mapping[str, int], where: str) -> int:
    try:
        v = evaluate(ax.expression or "", sizes)
    except ExprError as e:
        raise CaptureError(f"{where}: axes.{ax.name}.expression: {e}") from None
    if isinstance(v, float):
        if not v.is_integer():
            raise CaptureError(f"{where}: axes.{ax.name}: expression {ax.expression!r} gives {v}, not a whole number")
        v = int(v)
    if v < 0:
        raise CaptureError(f"{where}: axes.{ax.name}: expression {ax.expression!r} gives {v} < 0")
    return int(v)


def check_constraints(constraints: tuple[str, ...], env: Mapping[str, int | float | bool], where: str) -> None:
    """Every constraint holds over the axis sizes (and scalar inputs); CaptureError names the first that does not."""
    for i, c in enumerate(constraints):
        try:
            ok = evaluate(c, env, logical=True)
        except ExprError as e:
            raise CaptureError(f"{where}: constraints[{i}]: {e}") from None
        if not ok:
            shown = ", ".join(f"{n}={env[n]}" for n in sorted(names_in(c)) if n in env)
            raise CaptureError(f"{where}: constraints[{i}]: {c!r} does not hold ({shown})")
