"""The expression half of the restriction checker: a kernel's source and scope, values, affine indexes.

:class:`ExprParser` reads one ``@kernel`` function's source, resolves its global names and turns
the expressions of its loop bodies into IR values: arithmetic, comparisons, the builtins of
``scalars.SCALAR_FUNCS``, numeric constants (folded), and tensor reads whose indexes are affine
in the loop variables and int parameters (``2*p + r - 1``). :mod:`.parse` adds the statements.
"""

from __future__ import annotations

import ast
import inspect
import numbers
import os
import textwrap

from ...affine import AffineExpr
from ...ops import MAP_OPS
from .ir import LoopIRError
from .kir import PARAM, Const, Expr, Op, Param, Read, ScalarArg
from .scalars import BINARY, COMPARE, SCALAR_FUNCS


class ExprParser:
    """A kernel's source, scope and expressions; the loop-nest state (``loops``, ``locals``,
    ``pmap``) is set by :class:`~solar_io.frontends.loopir.parse.KernelParser`."""

    loops: dict
    locals: dict[str, Expr]
    pmap: dict[str, Param]

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        try:
            lines, start = inspect.getsourcelines(fn)
            self.file = os.path.basename(inspect.getsourcefile(fn) or "<kernel>")
        except (OSError, TypeError):
            raise LoopIRError(f"kernel {self.name}: its source is not available (define kernels in a file)") from None
        self.offset = start - 1
        tree = ast.parse(textwrap.dedent("".join(lines)))
        self.fdef = tree.body[0]
        if not isinstance(self.fdef, ast.FunctionDef):
            raise LoopIRError(f"{self.file}:{start}: @kernel applies to a plain function")
        cv = inspect.getclosurevars(fn)
        self.scope = {**fn.__globals__, **cv.nonlocals}
        self.int_params: set[str] = set()
        self.index_params: set[str] = set()

    # ------------------------------------------------------------------ helpers
    def err(self, node: ast.AST | None, msg: str) -> LoopIRError:
        line = self.offset + getattr(node, "lineno", 1) if node is not None else self.offset + 1
        return LoopIRError(f"{self.file}:{line}: kernel {self.name}: {msg}")

    def line(self, node: ast.AST) -> int:
        return self.offset + node.lineno

    def resolve(self, node: ast.AST):
        """The value of a global name or attribute chain (``math.pi``), or a sentinel."""
        if isinstance(node, ast.Name):
            return self.scope.get(node.id, _MISSING)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return _MISSING if base is _MISSING else getattr(base, node.attr, _MISSING)
        return _MISSING

    # ------------------------------------------------------------------ expressions
    def expr(self, e: ast.expr) -> Expr:
        if isinstance(e, ast.Constant):
            if isinstance(e.value, bool) or not isinstance(e.value, (int, float)):
                raise self.err(e, f"constant {e.value!r} is not a number")
            return Const(float(e.value))
        if isinstance(e, (ast.Name, ast.Attribute)):
            return self.named(e)
        if isinstance(e, ast.Subscript):
            return self.read(e)
        if isinstance(e, ast.BinOp):
            kind = type(e.op).__name__
            if kind not in BINARY:
                raise self.err(e, f"operator {ast.unparse(e)} is not in the IR (affine only in indexes; "
                               "values use + - * / **)")
            a, b = self.expr(e.left), self.expr(e.right)
            op = BINARY[kind][0]
            if op == "pow" and isinstance(b, Const) and b.value in (2.0, 0.5):
                return _fold(Op("square" if b.value == 2.0 else "sqrt", (a,)))
            if op in ("add", "mul"):
                return _fold(Op(op, _flat(op, a) + _flat(op, b)))
            return _fold(Op(op, (a, b)))
        if isinstance(e, ast.UnaryOp):
            a = self.expr(e.operand)
            if isinstance(e.op, ast.UAdd):
                return a
            if isinstance(e.op, ast.USub):
                return Const(-a.value) if isinstance(a, Const) else Op("neg", (a,))
            if isinstance(e.op, ast.Not):
                return Op("not", (a,))
            raise self.err(e, f"operator {ast.unparse(e)} is not in the IR")
        if isinstance(e, ast.Compare):
            if len(e.ops) != 1:
                raise self.err(e, "chained comparisons are not allowed; combine two with and")
            return Op(COMPARE[type(e.ops[0]).__name__][0], (self.expr(e.left), self.expr(e.comparators[0])))
        if isinstance(e, ast.BoolOp):
            op = "and" if isinstance(e.op, ast.And) else "or"
            vals = [self.expr(v) for v in e.values]
            out = vals[0]
            for v in vals[1:]:
                out = Op(op, (out, v))
            return out
        if isinstance(e, ast.Call):
            return self.call(e)
        if isinstance(e, ast.IfExp):
            raise self.err(e, "data-dependent branching (x if c else y) is not allowed; use where(c, x, y)")
        raise self.err(e, f"expression {ast.unparse(e)} is not allowed in a kernel")

    def named(self, e: ast.Name | ast.Attribute) -> Expr:
        if isinstance(e, ast.Name):
            if e.id in self.locals:
                return self.locals[e.id]
            if e.id in self.loops:
                raise self.err(e, f"loop variable {e.id} used as a value; pass the values as a constant tensor "
                               "(e.g. a causal mask or positions)")
            p = self.pmap.get(e.id)
            if p is not None:
                if p.kind == "scalar":
                    return ScalarArg(p.name)
                raise self.err(e, f"tensor {e.id} must be read with an index, {e.id}[...]")
        v = self.resolve(e)
        if isinstance(v, numbers.Real) and not isinstance(v, bool):
            return Const(float(v))
        raise self.err(e, f"unknown name {ast.unparse(e)} (a value is a tensor read, a local, a scalar "
                       "parameter or a numeric constant)")

    def read(self, e: ast.Subscript) -> Read:
        name = e.value.id if isinstance(e.value, ast.Name) else None
        p = self.pmap.get(name or "")
        if p is None or p.kind == "scalar":
            raise self.err(e, f"{ast.unparse(e.value)} is not a tensor parameter of the kernel")
        idx = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        if len(idx) != len(p.spec.dims):
            raise self.err(e, f"{name} has {len(p.spec.dims)} dims ({','.join(p.spec.dims)}), "
                           f"indexed with {len(idx)}")
        return Read(name, tuple(self.affine(x) for x in idx), self.line(e))

    def affine(self, e: ast.expr) -> AffineExpr:
        terms, const = self._affine(e)
        return AffineExpr(tuple(sorted((d, c) for d, c in terms.items() if c)), const)

    def _affine(self, e: ast.expr) -> tuple[dict[str, int], int]:
        if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
            return {}, e.value
        if isinstance(e, ast.Name) and e.id in self.loops:
            return {self.loops[e.id].name: 1}, 0
        if isinstance(e, ast.Name) and e.id in self.int_params:
            self.index_params.add(e.id)
            return {PARAM + e.id: 1}, 0
        if isinstance(e, ast.Subscript):
            raise self.err(e, f"non-affine index {ast.unparse(e)}: a tensor value used as an index "
                           "(data-dependent); use the gather builtin outside kernels")
        if isinstance(e, (ast.Name, ast.Attribute)):
            v = self.resolve(e)
            if isinstance(v, int) and not isinstance(v, bool):
                return {}, v
            raise self.err(e, f"index {ast.unparse(e)} is neither a loop variable, an int parameter nor an integer "
                           "constant")
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            t, c = self._affine(e.operand)
            return {d: -v for d, v in t.items()}, -c
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
            (ta, ca), (tb, cb) = self._affine(e.left), self._affine(e.right)
            s = 1 if isinstance(e.op, ast.Add) else -1
            out = dict(ta)
            for d, v in tb.items():
                out[d] = out.get(d, 0) + s * v
            return out, ca + s * cb
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mult):
            (ta, ca), (tb, cb) = self._affine(e.left), self._affine(e.right)
            if ta and tb:
                raise self.err(e, f"non-affine index {ast.unparse(e)}: a product of loop variables")
            t, c, k = (ta, ca, cb) if not tb else (tb, cb, ca)
            return {d: v * k for d, v in t.items()}, c * k
        raise self.err(e, f"non-affine index {ast.unparse(e)}: indexes are integer combinations of loop "
                       "variables plus a constant (2*p + r - 1)")

    def call(self, e: ast.Call) -> Expr:
        fname = (e.func.id if isinstance(e.func, ast.Name)
                 else e.func.attr if isinstance(e.func, ast.Attribute) else None)
        f = SCALAR_FUNCS.get(fname or "")
        if f is None or (isinstance(e.func, ast.Name) and (fname in self.pmap or fname in self.locals)):
            raise self.err(e, f"unknown builtin {ast.unparse(e.func)}() in a kernel; allowed: "
                           f"{', '.join(sorted(SCALAR_FUNCS))}")
        if e.keywords:
            raise self.err(e, f"{fname}() takes positional arguments only")
        n = len(e.args)
        if (f.arity is None and n < 2) or (f.arity is not None and n != f.arity):
            raise self.err(e, f"{fname}() takes {'2 or more' if f.arity is None else f.arity} arguments, got {n}")
        args = tuple(self.expr(a) for a in e.args)
        if f.op in ("max", "min"):
            args = tuple(x for a in args for x in _flat(f.op, a))
        return _fold(Op(f.op, args))


_MISSING = object()


def _fold(e: Op) -> Expr:
    """``e`` evaluated when every argument is a constant (``1.0 / 12`` is one immediate)."""
    if not all(isinstance(a, Const) for a in e.args) or MAP_OPS[e.op].result == "bool":
        return e
    import numpy as np

    with np.errstate(all="ignore"):
        v = float(MAP_OPS[e.op].fn(*(np.float64(a.value) for a in e.args)))
    return e if v != v else Const(v)


def _flat(op: str, e: Expr) -> tuple:
    return e.args if isinstance(e, Op) and e.op == op else (e,)
