"""Lifting a traced kernel call into extended einsums.

For each store ``y[o] (op)= e`` of a nest with loop dims ``D``:

- the node's space is ``D`` (as graph ranks); its output is ``y[o]``; the ranks of ``D``
  absent from ``o`` are reduced, with ``add`` (``+=``), ``mul`` (``*=``), ``max``/``min``
  (``y[o] = max(y[o], e)``) or ``none`` (``=``);
- the top operator of ``e`` is the node's map (``+=`` of a product: ``mul``/``add``, a
  contraction); a bare read is ``identity`` (a ``copy`` data movement when nothing is
  reduced and the dtype is kept);
- each inner operator becomes its own elementwise einsum (reduce ``none``) writing an
  explicit temporary over the dims its operands use (``exp(x[b, n] - m[b])`` -> ``sub``
  over [B, N], then ``exp``); identical sub-expressions are computed once per store;
- tensor reads keep their affine indexes, renamed to graph ranks; reads beyond a
  tensor's bounds (declared ``fill``) give the node's ``pad`` and ``fill``; numeric
  constants and scalar parameters are immediate constant tensors.
"""

from __future__ import annotations

from ...affine import Access, AffineExpr
from ...dtypes import DTYPES
from ...graph import Node
from ...ops import MAP_OPS
from .ir import LoopIRError, Value
from .kir import bind_params
from .parse import Const, Op, Read, ScalarArg


def _rename(e: AffineExpr, ranks: dict[str, str]) -> AffineExpr:
    return AffineExpr(tuple(sorted((ranks[d], c) for d, c in e.terms)), e.const)


class _StoreLifter:
    def __init__(self, tr, k, b, tensor_of: dict[str, str], rank_of: dict[str, str], dims: tuple[str, ...],
                 out: str, dtype: str, location: str, attrs: tuple):
        self.tr, self.k, self.b = tr, k, b
        self.tensor_of, self.rank_of, self.dims = tensor_of, rank_of, dims
        self.out, self.dtype, self.location, self.attrs = out, dtype, location, attrs
        self.memo: dict = {}
        self.count = 0

    def const_dtype(self, siblings: tuple) -> str:
        """The dtype of a constant operand: that of a floating tensor it is combined with,
        else the result's (fp32 when the result is a predicate)."""
        for a in siblings:
            if isinstance(a, Read):
                dt = self.tr.tensors[self.tensor_of[a.param]].dtype
                if DTYPES[dt].family == "float":
                    return dt
        return self.dtype if self.dtype != "bool" else "fp32"

    def operand(self, e, cdt: str | None = None) -> tuple[Access, frozenset[str], dict, float | None]:
        """(access, IR dims it uses, pad entries {(tensor, rank): (lo, hi)}, fill); ``cdt``:
        the dtype of a constant ``e``."""
        if isinstance(e, Const):
            return self.tr.const(e.value, cdt or self.dtype), frozenset(), {}, None
        if isinstance(e, ScalarArg):
            return self.tr.const(self.b.scalars[e.param], cdt or self.dtype), frozenset(), {}, None
        if isinstance(e, Read):
            t = self.tensor_of[e.param]
            index = tuple(bind_params(x, self.b.scalars) for x in e.index)
            used = frozenset(d for x in index for d, _ in x.terms)
            pads, fill = {}, None
            granks = self.tr.tensors[t].ranks
            for pos in range(len(e.index)):
                p = self.b.pads.get((e.param, pos))
                if p is not None:
                    pads[(t, granks[pos])] = p
                    fill = self.k.ir.param(e.param).spec.fill
            return Access(t, tuple(_rename(x, self.rank_of) for x in index)), used, pads, fill
        assert isinstance(e, Op)
        if e in self.memo:
            return self.memo[e]
        cdt = self.const_dtype(e.args)
        ops = [self.operand(a, cdt) for a in e.args]
        used = frozenset().union(*(u for _, u, _, _ in ops))
        dims = tuple(d for d in self.dims if d in used)
        dtype = "bool" if MAP_OPS[e.op].result == "bool" else self.dtype
        name = f"{self.out}.t{self.count}"
        self.count += 1
        ranks = tuple(self.rank_of[d] for d in dims)
        self.tr.tensor(name, ranks, dtype)
        self.emit(name, ranks, [o for o in ops], e.op, "none", ranks)
        res = (Access(name, tuple(AffineExpr(((r, 1),), 0) for r in ranks)), used, {}, None)
        self.memo[e] = res
        return res

    def emit(self, name: str, out_ranks: tuple[str, ...], ops: list, op: str, reduce: str,
             space: tuple[str, ...]) -> None:
        pads: dict = {}
        fills = set()
        for _, _, p, f in ops:
            for key, (lo, hi) in p.items():
                plo, phi = pads.get(key, (0, 0))
                pads[key] = (max(plo, lo), max(phi, hi))
            if f is not None:
                fills.add(f)
        if len(fills) > 1:
            raise LoopIRError(f"{self.location}: kernel {self.k.name}: one statement reads borders with "
                              f"different fills {sorted(fills)}; split it into two statements")
        pad_t: dict[str, list] = {}
        for (t, r), (lo, hi) in pads.items():
            pad_t.setdefault(t, []).append((r, lo, hi))
        pad = tuple((t, tuple(sorted(v))) for t, v in sorted(pad_t.items()))
        out = Access(name, tuple(AffineExpr(((r, 1),), 0) for r in out_ranks))
        inputs = tuple(a for a, _, _, _ in ops)
        copy = (op == "identity" and reduce == "none" and len(inputs) == 1 and inputs[0].index
                and self.tr.tensors[inputs[0].tensor].dtype == self.tr.tensors[name].dtype)
        common = dict(name=name, op=f"loopir.{self.k.name}", inputs=inputs, outputs=(out,), space=space,
                      pad=pad, fill=fills.pop() if fills else None, location=self.location, attrs=self.attrs)
        if copy:
            self.tr.node(Node(kind="data_movement", movement="copy", **common))
        else:
            self.tr.node(Node(kind="einsum", map=op, reduce=reduce, **common))


def _ranks(tr, k, b) -> dict[str, str]:
    """Graph ranks of the kernel's loop dims: a dim bound by an argument takes that tensor's
    rank (so ranks follow the data: a second ``linear`` call keeps its input's names); the
    others get the rank of their own name and size. Distinct dims get distinct ranks."""
    loop = set(k.loop_dims)
    rank_of: dict[str, str] = {}
    used: set[str] = set()
    for name, v in b.values.items():
        for d, r in zip(k.ir.param(name).spec.dims, v.ranks, strict=True):
            if d in loop and d not in rank_of and r not in used:
                rank_of[d] = r
                used.add(r)
    for d in k.loop_dims:
        if d not in rank_of:
            r = tr.rank(d, b.sizes[d])
            if r in used:
                r = tr.fresh_rank(d, b.sizes[d])
            rank_of[d] = r
            used.add(r)
    return rank_of


def lift_call(tr, k, b) -> Value | tuple[Value, ...]:
    """Record the nodes of kernel ``k`` called with binding ``b``; its outputs as Values."""
    prefix = tr.prefix(k.name)
    rank_of = _ranks(tr, k, b)
    tensor_of = {n: v.name for n, v in b.values.items()}
    outs = []
    for p in k.ir.params:
        if p.kind not in ("out", "temp"):
            continue
        shape = tuple(b.sizes[d] for d in p.spec.dims)
        v = tr.result(f"{prefix}.{p.name}", p.spec.dims, shape, k.out_dtype(p.name, b), p.spec.density,
                      tuple(rank_of[d] for d in p.spec.dims))
        tensor_of[p.name] = v.name
        if p.kind == "out":
            outs.append(v)
    attrs = (("call", b.site), ("kernel", k.name))
    for nest in k.ir.nests:
        for st in nest.stores:
            out = tensor_of[st.param]
            location = f"{k.ir.file}:{st.line}"
            sl = _StoreLifter(tr, k, b, tensor_of, rank_of, nest.dims, out, tr.tensors[out].dtype, location, attrs)
            e = st.expr
            if isinstance(e, Op):
                cdt = sl.const_dtype(e.args)
                ops, op = [sl.operand(a, cdt) for a in e.args], e.op
            else:
                ops, op = [sl.operand(e)], "identity"
            space = tuple(rank_of[d] for d in nest.dims)
            sl.emit(out, tuple(rank_of[d] for d in st.dims), ops, op, st.reduce, space)
    return outs[0] if len(outs) == 1 else tuple(outs)
