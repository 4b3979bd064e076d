"""The restriction checker: a ``@kernel`` function's AST -> ``KernelIR``.

A kernel body is a sequence of perfectly nested loop nests ``for i in I: for j in J: ...``
over ``Dim`` objects. The innermost body holds scalar-local assignments and stores into
kernel outputs/temps (``y[i, j] = e``, ``y[i] += e``, ``y[i] *= e``,
``y[i] = max(y[i], e)``, ``y[i] = min(y[i], e)``); expressions are arithmetic, comparisons,
the builtins of ``scalars.SCALAR_FUNCS``, numeric constants and tensor reads with
affine indexes. Anything else is rejected with a message naming the line.
"""

from __future__ import annotations

import ast
import inspect
import numbers
import os
import textwrap

from ...affine import AffineExpr
from ...ops import MAP_OPS
from .ir import Dim, LoopIRError, Tensor
from .kir import PARAM, Const, Expr, KernelIR, Nest, Op, Param, Read, ScalarArg, Store, reads_of
from .scalars import BINARY, COMPARE, SCALAR_FUNCS

__all__ = ["Const", "KernelIR", "Nest", "Op", "Param", "Read", "ScalarArg", "Store", "parse_kernel", "reads_of"]


_REDUCE_AUG = {"Add": "add", "Mult": "mul"}


class _Parser:
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

    # ------------------------------------------------------------------ signature
    def params(self) -> tuple[Param, ...]:
        try:
            ann = inspect.get_annotations(self.fn, eval_str=True)
        except Exception as e:  # an annotation that does not evaluate
            raise self.err(self.fdef, f"annotations do not evaluate: {' '.join(str(e).split())[:200]}") from None
        a = self.fdef.args
        if a.vararg or a.kwarg or a.posonlyargs or a.kwonlyargs or a.defaults:
            raise self.err(self.fdef, "parameters are plain names with annotations (no *args, defaults or "
                           "keyword-only parameters)")
        out = []
        for arg in a.args:
            spec = ann.get(arg.arg)
            if isinstance(spec, Tensor):
                kind = {"output": "out", "intermediate": "temp"}.get(spec.role, "in")
                out.append(Param(arg.arg, kind, spec))
            elif spec in (float, int):
                out.append(Param(arg.arg, "scalar", None))
                if spec is int:
                    self.int_params.add(arg.arg)
            else:
                raise self.err(arg, f"parameter {arg.arg} needs an annotation: Tensor('I,J'), Out('I,J'), "
                               "Temp('I'), float or int")
        if not any(p.kind == "out" for p in out):
            raise self.err(self.fdef, "a kernel needs at least one Out(...) parameter")
        return tuple(out)

    # ------------------------------------------------------------------ body
    def parse(self) -> KernelIR:
        self.pmap = {p.name: p for p in self.params()}
        nests = []
        for st in self.fdef.body:
            if _is_doc(st):
                continue
            if isinstance(st, ast.For):
                nests.append(self.nest(st))
            elif isinstance(st, ast.If):
                raise self.err(st, "data-dependent branching (if) is not allowed; use where(cond, a, b)")
            elif isinstance(st, ast.While):
                raise self.err(st, "while loops are not allowed; loops run over Dims (for i in I:)")
            elif isinstance(st, (ast.Assign, ast.AugAssign)) and isinstance(
                    st.targets[0] if isinstance(st, ast.Assign) else st.target, ast.Subscript):
                nests.append(self.scalar_nest(st))
            else:
                raise self.err(st, f"a kernel body is a sequence of loop nests (for i in I: ...), found "
                               f"{type(st).__name__.lower()} statement")
        if not nests:
            raise self.err(self.fdef, "a kernel needs at least one loop nest")
        k = KernelIR(self.name, self.file, self.offset + self.fdef.lineno, tuple(self.pmap.values()), tuple(nests),
                     tuple(sorted(self.index_params)))
        _check_dataflow(k, self)
        return k

    def nest(self, st: ast.For) -> Nest:
        loops: dict[str, Dim] = {}
        node = st
        while True:
            if node.orelse:
                raise self.err(node, "for ... else is not allowed")
            if not isinstance(node.target, ast.Name):
                raise self.err(node, "a loop variable is one plain name (for i in I:)")
            dim = self.resolve(node.iter)
            if not isinstance(dim, Dim):
                raise self.err(node, f"loops run over Dim objects (for i in I:), not {ast.unparse(node.iter)}")
            var = node.target.id
            if var in loops or var in self.pmap:
                raise self.err(node, f"loop variable {var} is already used")
            if any(d.name == dim.name for d in loops.values()):
                raise self.err(node, f"Dim {dim.name} is looped over twice in one nest; declare a second Dim "
                               "of the same size")
            loops[var] = dim
            body = [s for s in node.body if not _is_doc(s)]
            if len(body) == 1 and isinstance(body[0], ast.For):
                node = body[0]
                continue
            bad = next((s for s in body if isinstance(s, (ast.For, ast.While))), None)
            if isinstance(bad, ast.While):
                raise self.err(bad, "while loops are not allowed; loops run over Dims (for i in I:)")
            if bad is not None:
                raise self.err(bad, "loop nests must be perfectly nested: a loop body holds either exactly "
                               "one loop or only statements")
            break
        self.loops = loops
        self.locals: dict[str, Expr] = {}
        stores = tuple(s for s in (self.statement(s) for s in body) if s is not None)
        if not stores:
            raise self.err(st, "the loop nest stores nothing")
        return Nest(tuple(d.name for d in loops.values()), tuple(loops.values()), stores, self.line(st))

    def scalar_nest(self, st: ast.stmt) -> Nest:
        """A store outside any loop: a nest of no loops (its target and reads are scalars)."""
        self.loops, self.locals = {}, {}
        store = self.statement(st)
        return Nest((), (), (store,), self.line(st))

    def statement(self, st: ast.stmt) -> Store | None:
        if isinstance(st, ast.If):
            raise self.err(st, "data-dependent branching (if) is not allowed; use where(cond, a, b)")
        if isinstance(st, ast.Assign):
            if len(st.targets) != 1:
                raise self.err(st, "one assignment target per statement")
            t = st.targets[0]
            if isinstance(t, ast.Name):
                if t.id in self.loops or t.id in self.pmap or t.id in self.locals:
                    raise self.err(st, f"{t.id} is already defined; a local scalar is assigned once")
                self.locals[t.id] = self.expr(st.value)
                return None
            if isinstance(t, ast.Subscript):
                return self.store(st, t, st.value, None)
            raise self.err(st, "assign to a local name or to a tensor element y[i, j]")
        if isinstance(st, ast.AugAssign):
            if not isinstance(st.target, ast.Subscript):
                raise self.err(st, "accumulate into a tensor element (y[i] += ...), not into a local scalar")
            red = _REDUCE_AUG.get(type(st.op).__name__)
            if red is None:
                raise self.err(st, "only += and *= accumulate; write y[i] = max(y[i], e) or min(...)")
            return self.store(st, st.target, st.value, red)
        raise self.err(st, f"{type(st).__name__.lower()} statements are not allowed in a loop body")

    def store(self, st: ast.stmt, target: ast.Subscript, value: ast.expr, reduce: str | None) -> Store:
        name = target.value.id if isinstance(target.value, ast.Name) else None
        p = self.pmap.get(name or "")
        if p is None or p.kind == "scalar":
            raise self.err(st, f"{ast.unparse(target.value)} is not a tensor parameter of the kernel")
        if p.kind == "in":
            raise self.err(st, f"kernel input {name} is read-only; declare outputs with Out(...)")
        idx = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
        dims = []
        for e in idx:
            if not (isinstance(e, ast.Name) and e.id in self.loops):
                raise self.err(st, f"store indexes are plain loop variables, got {ast.unparse(e)}")
            dims.append(self.loops[e.id].name)
        if tuple(dims) != p.spec.dims:
            raise self.err(st, f"{name} is declared with dims {','.join(p.spec.dims)}; store it with the loop "
                           f"variables of those dims in that order, got {','.join(dims)}")
        same = ast.unparse(target)
        if reduce is None:
            reduce, value = self.accumulation(value, same)
        expr = self.expr(value)
        if any(r.param == name for r in reads_of(expr)):
            raise self.err(st, f"the store to {name} reads {name} itself (other than as y[i] += ... or "
                           "y[i] = max(y[i], ...))")
        missing = [d for d in self.loops.values() if d.name not in dims]
        if reduce == "none" and missing:
            raise self.err(st, f"y[...] = e leaves loop dim {missing[0].name} out of the index of {name}: each "
                           "element would be written many times; accumulate with +=, max(...) or min(...)")
        return Store(name, tuple(dims), reduce, expr, self.line(st))

    def accumulation(self, value: ast.expr, target: str) -> tuple[str, ast.expr]:
        """``y = max(y, e)`` / ``min`` / ``y + e`` / ``y * e`` -> (reduce, e); else ("none", value)."""
        if (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("max", "min")
                and len(value.args) == 2):
            a, b = value.args
            if ast.unparse(a) == target:
                return value.func.id, b
            if ast.unparse(b) == target:
                return value.func.id, a
        op = type(value.op).__name__ if isinstance(value, ast.BinOp) else ""
        if op in _REDUCE_AUG and ast.unparse(value.left) == target:
            return _REDUCE_AUG[op], value.right
        return "none", value

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


def _is_doc(st: ast.stmt) -> bool:
    return isinstance(st, ast.Pass) or (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)
                                         and isinstance(st.value.value, str))


def _check_dataflow(k: KernelIR, p: _Parser) -> None:
    """Each output/temp is stored by one statement and read only after it; temps are read."""
    written: dict[str, tuple[int, Store]] = {}
    read: set[str] = set()
    for ni, nest in enumerate(k.nests):
        for st in nest.stores:
            for r in reads_of(st.expr):
                kind = k.param(r.param).kind
                if kind == "in":
                    continue
                read.add(r.param)
                if r.param not in written:
                    raise LoopIRError(f"{k.file}:{r.line}: kernel {k.name}: {r.param} is read before it is "
                                      "written")
                wn, ws = written[r.param]
                plain = tuple(AffineExpr(((d, 1),), 0) for d in ws.dims)
                if wn == ni and (ws.reduce != "none" or r.index != plain):
                    raise LoopIRError(f"{k.file}:{r.line}: kernel {k.name}: {r.param} is written in this loop "
                                      "nest; read it in a later nest (or, if stored with =, at the same index)")
            if st.param in written:
                raise LoopIRError(f"{k.file}:{st.line}: kernel {k.name}: {st.param} is written twice; each "
                                  "output or temp is stored by one statement")
            written[st.param] = (ni, st)
    for prm in k.params:
        if prm.kind in ("out", "temp") and prm.name not in written:
            raise p.err(p.fdef, f"{prm.kind} {prm.name} is never written")
        if prm.kind == "temp" and prm.name not in read:
            raise p.err(p.fdef, f"temp {prm.name} is never read")


def parse_kernel(fn) -> KernelIR:
    """Check ``fn`` against the IR's restrictions and return its loop nests."""
    return _Parser(fn).parse()
