"""The restriction checker: a ``@kernel`` function's AST -> ``KernelIR``.

A kernel body is a sequence of perfectly nested loop nests ``for i in I: for j in J: ...``
over ``Dim`` objects. The innermost body holds scalar-local assignments and stores into
kernel outputs/temps (``y[i, j] = e``, ``y[i] += e``, ``y[i] *= e``,
``y[i] = max(y[i], e)``, ``y[i] = min(y[i], e)``); expressions are arithmetic, comparisons,
the builtins of ``scalars.SCALAR_FUNCS``, numeric constants and tensor reads with
affine indexes. Anything else is rejected with a message naming the line.

The expressions (values, affine indexes, constant folding) are :mod:`.parse_expr`'s; this module
checks the statements, the loop nests and the data flow between them.
"""

from __future__ import annotations

import ast
import inspect

from ...affine import AffineExpr
from .ir import Dim, LoopIRError, Tensor
from .kir import Const, Expr, KernelIR, Nest, Op, Param, Read, ScalarArg, Store, reads_of
from .parse_expr import ExprParser

__all__ = ["Const", "KernelIR", "Nest", "Op", "Param", "Read", "ScalarArg", "Store", "parse_kernel", "reads_of"]


_REDUCE_AUG = {"Add": "add", "Mult": "mul"}


class KernelParser(ExprParser):
    """The statements of one kernel: its signature, its loop nests and the stores in them."""

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


def _is_doc(st: ast.stmt) -> bool:
    return isinstance(st, ast.Pass) or (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)
                                         and isinstance(st.value.value, str))


def _check_dataflow(k: KernelIR, p: KernelParser) -> None:
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
    return KernelParser(fn).parse()
