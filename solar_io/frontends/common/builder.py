"""A frontend-independent graph builder: canonical rank names, unique tensor names, node emission.

Frontends lower their source ops through one ``GraphBuilder``:

- **Ranks** are global names with one size each. ``rank(hint, size, avoid)`` returns the first
  name of the hint's *family* (``D``, ``D2``, ``D3``, ...) that already has this size and is not
  in ``avoid``, or declares the first free name of the family. So every 4096-wide hidden dim of
  a model reads ``D`` wherever that is possible, a 14336-wide one ``D2`` or ``F`` (depending on
  the hint), and two dims of one tensor or one iteration space always get distinct names.
- **Tensors** keep the rank names they were declared with wherever they are used; a node that
  needs a different name for one of their dims (``x @ x.T``: both dims of ``S``) indexes the
  tensor with another rank of the same size. Source tensors (inputs, weights, constants) can be
  declared *unbound*: their ranks are chosen by the first rule that uses them
  (``bind``), so a linear weight gets the rank names of the activations it multiplies.
- **Nodes** are emitted in topological order; ``build`` drops dead nodes and unread sources,
  marks graph outputs and returns an immutable, validated-shape ``Graph``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from math import prod

from ...affine import Access, AffineExpr, parse_expr
from ...format.kernels import declare_kernels
from ...fourier import Fourier
from ...graph import Graph, Node, Producer, Scalar, Tensor, Validation
from .contract import contract_products
from .repeat_build import blocks

_FAMILY = re.compile(r"^(.*?)(\d*)$")
_NAME_OK = re.compile(r"[^A-Za-z0-9_.:/\-]")
_RANK_OK = re.compile(r"[^A-Za-z0-9_]")


def family(rank: str) -> str:
    """The family of a rank name: the name without trailing digits (``D2`` -> ``D``)."""
    base = _FAMILY.match(rank).group(1)  # type: ignore[union-attr]
    return base or rank


def expr(text: str | int) -> AffineExpr:
    """An affine index expression from text (``"2*P + R - 1"``) or an integer constant."""
    key = (type(text), text)  # True == 1 as a key, but "True" parses as a rank name
    got = _EXPRS.get(key)
    if got is None:
        got = parse_expr(str(text))
        assert isinstance(got, AffineExpr), text
        if len(_EXPRS) < _MAX_EXPRS:  # a builder meets the same rank names again and again
            _EXPRS[key] = got
    return got


_EXPRS: dict[tuple[type, str | int], AffineExpr] = {}  # parsed expressions (immutable), by their text
_MAX_EXPRS = 1 << 16


def access(tensor: str, index: Iterable[str | int | AffineExpr]) -> Access:
    """``tensor[index...]``; items are rank names, expression text, integers or AffineExprs."""
    return Access(tensor, tuple(i if type(i) is AffineExpr else expr(i) for i in index))


@dataclass
class TensorInfo:
    """A tensor being built: ``ranks`` is None while a source tensor is still unbound."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str
    ranks: tuple[str, ...] | None = None
    value: float | None = None
    hints: tuple[str, ...] = ()
    density: float | None = None
    generated: bool = False


@dataclass
class GraphBuilder:
    """Accumulates ranks, tensors and nodes; see the module docstring."""

    sizes: dict[str, int] = field(default_factory=dict)
    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    _node_names: set[str] = field(default_factory=set)
    output_names: list[str] = field(default_factory=list)
    repeats: list = field(default_factory=list)  # blocks emitted by repeat_build.replicate

    # ------------------------------------------------------------------ ranks
    def rank(self, hint: str, size: int, avoid: Iterable[str] = ()) -> str:
        """A rank of ``size`` in the family of ``hint``, not in ``avoid`` (declared if new).

        ``hint`` itself is used when it already has ``size``; otherwise the family
        ``F, F2, F3, ...`` of ``family(hint)`` is searched for a name with this size, and
        the first undeclared name of the family is declared.
        """
        avoid = set(avoid)
        hint = _RANK_OK.sub("_", hint) or "R"
        if hint[0].isdigit():
            hint = "R" + hint
        if self.sizes.get(hint) == size and hint not in avoid:
            return hint
        fam = family(hint)
        i = 1
        while True:
            name = fam if i == 1 else f"{fam}{i}"
            have = self.sizes.get(name)
            if have is None:
                self.sizes[name] = size
                return name
            if have == size and name not in avoid:
                return name
            i += 1

    def distinct(self, ranks: Sequence[str], avoid: Iterable[str] = ()) -> tuple[str, ...]:
        """``ranks`` with repeats (and names in ``avoid``) replaced by other ranks of the same size."""
        taken = set(avoid)
        out: list[str] = []
        for r in ranks:
            if r in taken:
                r = self.rank(r, self.sizes[r], taken | set(ranks))
            taken.add(r)
            out.append(r)
        return tuple(out)

    def new_ranks(self, hints: Sequence[str], shape: Sequence[int], avoid: Iterable[str] = ()) -> tuple[str, ...]:
        """Distinct ranks for ``shape``, one per hint.

        A hint is a rank name to reuse when its size fits, or ``"F*"``: any rank of family
        ``F`` (chosen after the exact names are claimed, so ``["D*", "D"]`` gives ``D2, D``).
        """
        taken = set(avoid)
        out: list[str | None] = [None] * len(shape)
        for i, (h, s) in enumerate(zip(hints, shape, strict=True)):
            if not h.endswith("*") and self.sizes.get(h) == s and h not in taken:
                out[i] = h
                taken.add(h)
        for i, (h, s) in enumerate(zip(hints, shape, strict=True)):
            if out[i] is None:
                out[i] = self.rank(h.rstrip("*"), s, taken)
                taken.add(out[i])
        return tuple(out)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ tensors
    def unique_name(self, base: str) -> str:
        """A tensor name derived from ``base`` that no tensor has yet."""
        base = _NAME_OK.sub("_", base) or "t"
        if not (base[0].isalpha() or base[0] == "_"):
            base = "t_" + base
        name, i = base, 1
        while name in self.tensors:
            i += 1
            name = f"{base}_{i}"
        return name

    def source(self, name: str, shape: Sequence[int], dtype: str, role: str, hints: Sequence[str] = (),
               value: float | None = None) -> str:
        """Declare an input/weight/constant, unbound until a rule binds it; returns its name."""
        name = self.unique_name(name)
        self.tensors[name] = TensorInfo(name, tuple(shape), dtype, role, None, value, tuple(hints))
        return name

    def tensor(self, name: str, ranks: Sequence[str], dtype: str, role: str = "intermediate",
               value: float | None = None, generated: bool = False) -> str:
        """Declare a tensor with known ranks; returns its (unique) name.

        ``generated``: a constant the source program computes from indices where it uses it
        (a causal mask, an arange), never read from memory.
        """
        name = self.unique_name(name)
        shape = tuple(self.sizes[r] for r in ranks)
        self.tensors[name] = TensorInfo(name, shape, dtype, role, tuple(ranks), value, generated=generated)
        return name

    def constant(self, base: str, value: float, dtype: str) -> str:
        """A scalar constant that is one immediate value (no bytes)."""
        return self.tensor(base, (), dtype, "constant", float(value))

    def ranks(self, tensor: str) -> tuple[str, ...]:
        """The ranks of ``tensor``, binding an unbound source with its default hints."""
        t = self.tensors[tensor]
        if t.ranks is None:
            self.bind(tensor, [None] * len(t.shape))
        return t.ranks  # type: ignore[return-value]

    def bind(self, tensor: str, hints: Sequence[str | None]) -> tuple[str, ...]:
        """Choose the ranks of an unbound source tensor (no-op if bound); returns its ranks.

        Each hint is a rank name (reused when its size fits) or None for the tensor's default
        hint for that dim (from ``source(hints=...)``, else ``guess``).
        """
        t = self.tensors[tensor]
        if t.ranks is None:
            defaults = list(t.hints) + [None] * (len(t.shape) - len(t.hints))
            chosen = [h if h is not None else defaults[i] for i, h in enumerate(hints)]
            t.ranks = self.new_ranks(self.guess(chosen, t.shape), t.shape)
        return t.ranks

    def guess(self, hints: Sequence[str | None], shape: Sequence[int]) -> list[str]:
        """``hints`` with each None replaced by the one declared rank of that size (if exactly
        one, not a size-1 ``U`` rank, and not already hinted), else the generic family ``A``."""
        by_size: dict[int, list[str]] = {}
        for r, s in self.sizes.items():
            if family(r) != "U":
                by_size.setdefault(s, []).append(r)
        out: list[str] = []
        for h, s in zip(hints, shape, strict=True):
            if h is None:
                cands = [r for r in by_size.get(s, []) if r not in hints and r not in out]
                h = cands[0] if len(cands) == 1 and s != 1 else ("U" if s == 1 else "A*")
            out.append(h)
        return out

    def shape(self, tensor: str) -> tuple[int, ...]:
        return self.tensors[tensor].shape

    def dtype(self, tensor: str) -> str:
        return self.tensors[tensor].dtype

    # ------------------------------------------------------------------ nodes
    def _node_name(self, base: str) -> str:
        base = _NAME_OK.sub("_", base) or "n"
        name, i = base, 1
        while name in self._node_names:
            i += 1
            name = f"{base}_{i}"
        self._node_names.add(name)
        return name

    def einsum(self, name: str, op: str, space: Sequence[str], inputs: Sequence[Access], output: Access,
               map: str, reduce: str = "none", *, pad: dict[str, dict[str, tuple[int, int]]] | None = None,
               fill: float | None = None, attrs: dict[str, Scalar] | None = None,
               location: str | None = None, scan: str | None = None, init: str | None = None) -> str:
        """Emit an extended einsum node; returns the node name.

        ``scan`` (a rank of the output) makes it an inclusive prefix along that rank; ``init`` (the
        tensor a scattered output starts from) goes with an ``@t`` index in ``output`` (format 1.1).
        """
        return self._add(Node(self._node_name(name), "einsum", op, tuple(inputs), (output,), tuple(space),
                              map=map, reduce=reduce, pad=_pad(pad), fill=fill, attrs=_attrs(attrs),
                              location=location, scan=scan, init=init))

    def copy(self, name: str, op: str, space: Sequence[str], inputs: Sequence[Access], output: Access, *,
             view: bool = False, pad: dict[str, dict[str, tuple[int, int]]] | None = None,
             fill: float | None = None, attrs: dict[str, Scalar] | None = None,
             location: str | None = None) -> str:
        """Emit a ``copy`` data movement (permute, slice, pad, broadcast, gather)."""
        return self._add(Node(self._node_name(name), "data_movement", op, tuple(inputs), (output,),
                              tuple(space), movement="copy", view=view, pad=_pad(pad), fill=fill,
                              attrs=_attrs(attrs), location=location))

    def reshape(self, name: str, op: str, src: str, dst: str, *, view: bool = True,
                attrs: dict[str, Scalar] | None = None, location: str | None = None) -> str:
        """Emit a row-major reshape of whole tensors."""
        return self._add(Node(self._node_name(name), "data_movement", op, (Access(src),), (Access(dst),),
                              movement="reshape", view=view, attrs=_attrs(attrs), location=location))

    def concat(self, name: str, op: str, srcs: Sequence[str], dst: str, axis: str, *,
               attrs: dict[str, Scalar] | None = None, location: str | None = None) -> str:
        """Emit a concat of whole tensors along ``axis`` (a rank of ``dst``)."""
        return self._add(Node(self._node_name(name), "data_movement", op, tuple(Access(s) for s in srcs),
                              (Access(dst),), movement="concat", axis=axis, attrs=_attrs(attrs),
                              location=location))

    def opaque(self, name: str, op: str, srcs: Sequence[str], dsts: Sequence[str], reason: str, *,
               attrs: dict[str, Scalar] | None = None, location: str | None = None) -> str:
        """Emit an opaque node: whole tensors in and out, compute unknown."""
        return self._add(Node(self._node_name(name), "opaque", op, tuple(Access(s) for s in srcs),
                              tuple(Access(d) for d in dsts), reason=reason, attrs=_attrs(attrs),
                              location=location))

    def fft(self, name: str, op: str, src: str, dst: str, spec: Fourier, *,
            attrs: dict[str, Scalar] | None = None, location: str | None = None) -> str:
        """Emit an ``fft`` node (format 1.7): ``spec`` over whole tensor ``src`` into ``dst``."""
        return self._add(Node(self._node_name(name), "fft", op, (Access(src),), (Access(dst),), fft=spec,
                              attrs=_attrs(attrs), location=location))

    def _add(self, node: Node) -> str:
        self.nodes.append(node)
        return node.name

    # ------------------------------------------------------------------ result
    def build(self, outputs: Sequence[str], *, name: str | None = None, producer: Producer | None = None,
              validation: Validation | None = None, contract: bool = True) -> Graph:
        """The finished graph: ``outputs`` get role output, dead nodes and unread sources are dropped,
        and (``contract``) each broadcast product summed over ranks becomes one contraction
        (:mod:`.contract`).

        An output that is a source tensor or repeats an earlier output is first copied into
        a tensor of its own (a graph output is written by exactly one node).
        """
        outs: list[str] = []
        for o in outputs:
            t = self.tensors[o]
            if t.role != "intermediate" or o in outs:
                ranks = self.ranks(o)
                dst = self.tensor(f"{o}.out", ranks, t.dtype)
                self.copy(f"{o}.out", "output_copy", ranks, [access(o, ranks)], access(dst, ranks))
                o = dst
            outs.append(o)
        for o in outs:
            self.tensors[o].role = "output"
        self.output_names = outs
        nodes = _live(self.nodes, set(outs))
        if contract:
            immediates = {t.name for t in self.tensors.values() if t.value is not None}
            nodes = contract_products(nodes, set(outs), self.sizes, immediates)
        read = {a.tensor for n in nodes for a in n.inputs} | {a.tensor for n in nodes for a in n.outputs}
        tensors = []
        for t in self.tensors.values():
            if t.name not in read:
                continue
            ranks = self.ranks(t.name)
            tensors.append(Tensor(t.name, ranks, t.dtype, t.role, t.density, t.value, t.generated))
        used = {r for t in tensors for r in t.ranks} | {r for n in nodes for r in n.space}
        ranks = tuple((r, s) for r, s in self.sizes.items() if r in used)
        nodes = declare_kernels(nodes)
        return Graph(ranks, tuple(tensors), nodes, producer or Producer(), validation or Validation(), name,
                     repeats=blocks(self.repeats, nodes, tensors))

    def numel(self, tensor: str) -> int:
        return prod(self.tensors[tensor].shape)


def _live(nodes: list[Node], outputs: set[str]) -> list[Node]:
    """Nodes that contribute to ``outputs``; opaque nodes keep only outputs someone reads."""
    needed = set(outputs)
    keep: list[Node] = []
    for n in reversed(nodes):
        written = [a for a in n.outputs if a.tensor in needed]
        if not written:
            continue
        if n.kind == "opaque" and len(written) != len(n.outputs):
            n = Node(n.name, n.kind, n.op, n.inputs, tuple(written), reason=n.reason, attrs=n.attrs,
                     location=n.location)
        keep.append(n)
        needed.update(a.tensor for a in n.inputs)
    keep.reverse()
    return keep


def _pad(pad: dict[str, dict[str, tuple[int, int]]] | None) -> tuple:
    if not pad:
        return ()
    return tuple((t, tuple((r, int(lo), int(hi)) for r, (lo, hi) in sorted(dims.items())))
                 for t, dims in sorted(pad.items()) if dims)


def _attrs(attrs: dict[str, Scalar] | None) -> tuple:
    if not attrs:
        return ()
    out = []
    for k, v in sorted(attrs.items()):
        if v is None:
            continue
        if isinstance(v, (list, tuple)):
            v = "[" + ", ".join(str(x) for x in v) + "]"
        elif not isinstance(v, (str, int, float, bool)):
            v = str(v)
        out.append((k, v))
    return tuple(out)
