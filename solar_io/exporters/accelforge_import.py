"""Import an AccelForge workload YAML as an einsum graph (``solar-io import accelforge``).

The inverse of :mod:`solar_io.exporters.accelforge`; its re-export is the same workload
(up to comments). What is read:

- ``rank_sizes`` (integers) size the tensor ranks; ``iteration_space_shape`` entries of the
  form ``0 <= v < N`` bound rank variables; a variable without one takes the size of a rank it
  indexes directly. Variable ``v`` is the graph rank ``v.upper()`` when that rank has the same
  size (the exporter's convention), else a new rank.
- Each einsum (``name``, ``tensor_accesses`` with list or dict projections, ``output``,
  ``is_copy_operation``, ``rank_sizes``; or an einsum string ``Z[m, n] = A[m, k] * B[k, n]``
  with ``RANK: expr`` entries) becomes a node. Contractions (two or more inputs and a reduced
  variable) are ``mul``/``add``; other einsums ``add``/``none`` (two or more inputs),
  ``identity``/``add`` (a reduction) or ``identity``/``none``: AccelForge does not say which
  operator an einsum applies, so only the work of contractions is exact (vector FLOPs are the
  cheapest operator's). Copy operations are ``data_movement``: a row-major ``reshape`` when
  the projections are exactly a reshape's, else an affine ``copy`` (never a ``view``).
- An index that can leave its rank's bounds (padded coordinates: an einsum ``rank_sizes``
  larger than the global one, or any expression reaching past the rank) is declared as a zero
  border (``pad``). AccelForge *skips* such iteration points while solar-io counts them: a
  warning says so when points fall below 0.
- ``bits_per_value`` (keys: tensor names, unions ``A | B`` or ``All``; per-access overrides)
  gives each tensor a dtype of that width (16 bits -> bf16, 8 -> fp8_e4m3, ...).
- Roles: never written -> ``weight`` if persistent (``persistent_tensors`` as a union of
  names, or per-access ``persistent``; other set expressions are noted and not evaluated),
  else ``input``; written and read later -> ``intermediate``; written and never read ->
  ``output``.

Jinja templates are not evaluated: render the template first. Top-level ``renames`` and
``arch`` sections are ignored.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from ..affine import Access, AffineExpr, parse_expr
from ..errors import SolarIOError
from ..format.files import dumps, loads
from ..format.yamltext import YamlError, parse
from ..graph import Graph, Node, Producer, Tensor, Validation
from .forms import Unexpressible, reshape_form

_BITS_DTYPE = {64: "fp64", 32: "fp32", 16: "bf16", 8: "fp8_e4m3", 6: "fp6_e2m3", 4: "fp4_e2m1",
               8.25: "mxfp8", 4.25: "mxfp4", 4.5: "nvfp4"}
_BOUND = re.compile(r"\s*0\s*<=\s*([A-Za-z_]\w*)\s*<\s*(\d+)\s*\Z")
_WORD = re.compile(r"[A-Za-z_]\w*")


class ImportError_(SolarIOError):
    """An AccelForge workload that cannot be read as an einsum graph."""


def _need(cond: bool, where: str, msg: str) -> None:
    if not cond:
        raise ImportError_(f"{where}: {msg}")


def _union(expr: Any, where: str, names: list[str]) -> set[str]:
    """The tensors of a set expression ``A | B | ...`` (or ``All``)."""
    _need(isinstance(expr, str), where, "expected a set expression string")
    parts = [p.strip() for p in str(expr).split("|")]
    if parts == ["All"]:
        return set(names)
    for p in parts:
        _need(bool(re.fullmatch(r"[A-Za-z_]\w*", p)) and p in names, where,
              f"only unions of tensor names (A | B) or All are read, not {expr!r}")
    return set(parts)


def _projection(ta: dict, where: str) -> list[tuple[str, str]]:
    proj = ta.get("projection")
    if isinstance(proj, list):
        return [(str(v).upper(), str(v)) for v in proj]
    _need(isinstance(proj, dict), where, "projection must be a list or a mapping")
    return [(str(k), str(v)) for k, v in proj.items()]


def _expr(text: str, var_rank: dict[str, str], where: str) -> AffineExpr:
    try:
        e = parse_expr(_WORD.sub(lambda m: var_rank.get(m.group(0), m.group(0)), text))
    except ValueError as err:
        raise ImportError_(f"{where}: {err}") from None
    _need(isinstance(e, AffineExpr), where, f"not an affine expression: {text!r}")
    return e  # type: ignore[return-value]


class _Reader:
    """State of one import: ranks, tensors and nodes as they are found."""

    def __init__(self, w: dict, file: str):
        self.w, self.file = w, file
        self.sizes: dict[str, int] = {}
        for k, v in (w.get("rank_sizes") or {}).items():
            _need(isinstance(v, int) and v > 0, f"{file}: rank_sizes.{k}", "expected a positive integer")
            self.sizes[str(k)] = v
        self.bounds: dict[str, int] = {}
        for v, text in (w.get("iteration_space_shape") or {}).items():
            m = _BOUND.match(str(text))
            _need(bool(m) and m.group(1) == v, f"{file}: iteration_space_shape.{v}",
                  f"only '0 <= {v} < N' is read, not {text!r}")
            self.bounds[str(v)] = int(m.group(2))  # type: ignore[union-attr]
        self.ranks: dict[str, int] = dict(self.sizes)
        self.notes: list[str] = []
        for v, n in self.bounds.items():  # variables' ranks in the order the file bounds them
            self.rank_for_var(v, n)

    def rank_for_var(self, v: str, size: int) -> str:
        """The graph rank that iterates variable ``v`` of extent ``size``."""
        base = v.upper()
        name, n = base, 1
        while name in self.ranks and self.ranks[name] != size:
            n += 1
            name = f"{base}_{n}"
        self.ranks.setdefault(name, size)
        return name

    def var_bounds(self, e: dict, where: str, local: dict[str, int]) -> dict[str, int]:
        out: dict[str, int] = {}
        for ta in e["tensor_accesses"]:
            for rank, text in _projection(ta, where):
                words = [x for x in _WORD.findall(text)]
                if len(words) == 1 and text.strip() == words[0] and words[0] not in self.bounds:
                    size = local.get(rank, self.sizes.get(rank))
                    if size is not None:
                        out[words[0]] = min(out.get(words[0], size), size)
                for x in words:
                    if x in self.bounds:
                        out[x] = self.bounds[x]
        for ta in e["tensor_accesses"]:
            for _, text in _projection(ta, where):
                for x in _WORD.findall(text):
                    _need(x in out, where, f"rank variable {x} has no bound")
        return out


def import_accelforge(text: str, file: str = "workload.yaml") -> tuple[Graph, list[str]]:
    """The einsum graph of an AccelForge workload, and notes on what it approximates."""
    _need("{%" not in text and "{{" not in text, file, "Jinja templates are not evaluated: render it first")
    try:
        doc = parse(text)
    except YamlError as e:
        raise ImportError_(f"{file}: {e}") from None
    _need(isinstance(doc, dict), file, "expected a mapping")
    w = doc.get("workload", doc)
    _need(isinstance(w, dict) and isinstance(w.get("einsums"), list) and w["einsums"], file,
          "no workload.einsums list")
    r = _Reader(w, file)
    einsums = [_einsum_entry(e, f"{file}: einsums[{i}]") for i, e in enumerate(w["einsums"])]
    seen = list(dict.fromkeys(str(ta["name"]) for e in einsums for ta in e["tensor_accesses"]))
    listed = [str(k) for k in (w.get("bits_per_value") or {}) if str(k) in seen]
    names = list(dict.fromkeys(listed + seen))  # the file's tensor order where it lists them
    bits: dict[str, float] = {}
    for key, b in (w.get("bits_per_value") or {}).items():
        for t in _union(key, f"{file}: bits_per_value", names):
            bits[t] = float(b)
    persistent: set[str] = set()
    if w.get("persistent_tensors"):
        try:
            persistent = _union(w["persistent_tensors"], f"{file}: persistent_tensors", names)
        except ImportError_ as e:
            r.notes.append(f"{e}: no tensor is taken as a weight from it")
    tdims: dict[str, list[str]] = {}
    nodes: list[Node] = []
    writes: dict[str, int] = {}
    reads: dict[str, int] = {}
    for i, e in enumerate(einsums):
        where = f"{file}: einsums[{i}] ({e.get('name')})"
        local = {str(k): int(v) for k, v in (e.get("rank_sizes") or {}).items()}
        bounds = r.var_bounds(e, where, local)
        var_rank = {v: r.rank_for_var(v, n) for v, n in bounds.items()}
        ins, outs, pads = [], [], []
        for ta in e["tensor_accesses"]:
            t = str(ta["name"])
            proj = _projection(ta, where)
            tdims.setdefault(t, [k for k, _ in proj])
            _need(tdims[t] == [k for k, _ in proj], where, f"tensor {t} has other ranks elsewhere")
            if "bits_per_value" in ta and ta["bits_per_value"] is not None:
                bits[t] = float(ta["bits_per_value"])
            if ta.get("persistent"):
                persistent.add(t)
            exprs = tuple(_expr(x, var_rank, where) for _, x in proj)
            dims = []
            for (k, _), ex in zip(proj, exprs, strict=True):
                lo, hi = ex.bounds(r.ranks)
                size = r.sizes.get(k)
                if size is None:
                    size = r.sizes[k] = r.ranks[k] = max(hi + 1, r.sizes.get(k, 0))
                top = max(hi, local.get(k, size) - 1)
                if lo < 0 or top > size - 1:
                    if lo < 0:
                        r.notes.append(f"{where}: {t}.{k} reaches below 0: AccelForge skips those "
                                       "iteration points, solar-io counts them with a zero border")
                    dims.append((k, max(0, -lo), top - (size - 1)))
            if dims:
                pads.append((t, tuple(dims)))
            (outs if ta.get("output") else ins).append(Access(t, exprs))
        _need(len(outs) == 1, where, "exactly one output tensor access is read")
        name = str(e.get("name", f"einsum{i}"))
        out = outs[0]
        space = tuple(dict.fromkeys([r_ for x in out.index or () for r_ in x.ranks]
                                    + [r_ for a in ins for x in a.index or () for r_ in x.ranks]))
        writes[out.tensor] = writes.get(out.tensor, 0) + 1
        for a in ins:
            reads[a.tensor] = i
        nodes.append(_node(name, bool(e.get("is_copy_operation")), ins, out, space, tuple(pads), where))
    tensors = []
    for t in names:
        _need(t in bits, f"{file}: bits_per_value", f"no bits per value for tensor {t}")
        dtype = _BITS_DTYPE.get(bits[t] if not bits[t].is_integer() else int(bits[t]))
        _need(dtype is not None, f"{file}: bits_per_value.{t}", f"no dtype of {bits[t]:g} bits")
        role = ("weight" if t in persistent else "input") if t not in writes else (
            "intermediate" if t in reads else "output")
        tensors.append(Tensor(t, tuple(tdims[t]), str(dtype), role))
    g = Graph(tuple(r.ranks.items()), tuple(tensors), tuple(_finish(n, tensors, r.ranks) for n in nodes),
              Producer(tool="solar-io", tool_version=_version(), frontend="accelforge",
                       source=Path(file).name, source_sha256=hashlib.sha256(text.encode()).hexdigest()),
              Validation(status="skipped", method="none", reason="imported from an AccelForge workload"),
              name=Path(file).name.split(".")[0] or None)
    try:
        return loads(dumps(g), file), r.notes
    except SolarIOError as err:
        raise ImportError_(f"{file}: the imported graph is not valid: {err}") from None


_ACCESS = re.compile(r"([A-Za-z_]\w*)\[([^\]]*)\]")


def _einsum_entry(e: Any, where: str) -> dict:
    """An einsum in the mapping form; einsum strings ``Z[m, n] = A[m, k] * B[k, n]`` are parsed."""
    if isinstance(e, str):
        e = {"einsum": e}
    _need(isinstance(e, dict), where, "an einsum must be a mapping or an einsum string")
    if "einsum" not in e:
        _need("tensor_accesses" in e, where, "an einsum needs tensor_accesses or an einsum string")
        return e
    text = str(e["einsum"])
    _need(text.count("=") == 1, where, f"einsum string needs one '=': {text!r}")
    lhs, rhs = text.split("=")
    out = _ACCESS.fullmatch(lhs.strip())
    _need(out is not None, where, f"bad einsum string output {lhs.strip()!r}")
    accesses = [_string_access(m.group(1), m.group(2), False, where) for m in _ACCESS.finditer(rhs)]
    accesses.append(_string_access(out.group(1), out.group(2), True, where))  # type: ignore[union-attr]
    extra = {k: v for k, v in e.items() if k != "einsum"}
    _need("tensor_accesses" not in extra, where, "tensor_accesses next to an einsum string are not read")
    return {"name": out.group(1), "tensor_accesses": accesses, **extra}  # type: ignore[union-attr]


def _string_access(name: str, proj: str, output: bool, where: str) -> dict:
    items: dict[str, str] = {}
    for part in (p.strip() for p in proj.split(",") if p.strip()):
        if ":" in part:
            k, v = (x.strip() for x in part.split(":", 1))
        else:
            _need(part[0].islower(), where, f"rank variable {part!r} must start lowercase")
            k, v = part.upper(), part
        items[k] = v
    return {"name": name, "projection": items, "output": output}


def _version() -> str:
    from .. import __version__

    return __version__


def _node(name: str, copy: bool, ins: list[Access], out: Access, space: tuple[str, ...],
          pads: tuple, where: str) -> Node:
    for x in out.index or ():
        _need(x.is_rank() or copy, where, f"output index {x} is not a plain rank variable")
    reduced = [r for r in space if r not in {x.terms[0][0] for x in out.index or () if x.is_rank()}]
    if copy:
        return Node(name, "data_movement", "accelforge.copy", tuple(ins), (out,), space=space,
                    movement="copy", pad=pads)
    if len(ins) >= 2:
        mp, rd = ("mul", "add") if reduced else ("add", "none")
    else:
        mp, rd = "identity", ("add" if reduced else "none")
    _need(bool(ins), where, "an einsum without an input tensor")
    return Node(name, "einsum", "accelforge.einsum", tuple(ins), (out,), space=space, map=mp,
                reduce=rd, pad=pads)


def _finish(n: Node, tensors: list[Tensor], ranks: dict[str, int]) -> Node:
    """A copy that is exactly a row-major reshape becomes one; other nodes are unchanged."""
    if n.kind != "data_movement" or len(n.inputs) != 1:
        return n
    src, dst = n.inputs[0], n.outputs[0]
    tmap = {t.name: t for t in tensors}
    cand = Node(n.name, "data_movement", n.op, (Access(src.tensor),), (Access(dst.tensor),), movement="reshape")
    g = Graph(tuple(ranks.items()), tuple(tensors), (cand,))
    if tmap[src.tensor].ranks and tmap[dst.tensor].ranks and _same(g, cand, src, dst):
        return cand
    if any(not x.is_rank() for x in dst.index or ()):
        raise ImportError_(f"copy {n.name}: an expression output index that is not a reshape")
    return n


def _same(g: Graph, cand: Node, src: Access, dst: Access) -> bool:
    from math import prod

    if prod(g.shape(src.tensor)) != prod(g.shape(dst.tensor)):
        return False
    try:
        form = reshape_form(g, cand)
    except Unexpressible:
        return False
    want = {src.tensor: src.index, dst.tensor: dst.index}
    return all(want[f.tensor] == f.exprs for f in form.tensors)
