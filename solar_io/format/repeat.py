"""Repeat blocks (format 1.4): a block of nodes or tensor declarations written once for many instances.

A recurrence unrolled over time (a GRU's 512 steps in 12 layer-directions) is the same few nodes
again and again, with only the step in their names and in one index. A block says so once::

    - repeat:
        var: t
        start: 1
        step: 1
        count: 511
        nodes:
        - name: gru.l0.t{t}.hw.mm
          ...
          inputs:
          - gru.l0.t{t-1}.h[S, HID]
          - gru.l0.xw[t, S, G]

Instance ``k`` sets ``t = start + k * step``: ``{t}``, ``{t+C}`` and ``{t-C}`` in names and
tensor references become the value plus or minus ``C``, and the term ``t`` of an index expression
becomes that integer. The graph in memory holds every instance (``Graph.nodes``/``Graph.tensors``
are the unrolled graph, so each count and bound is the unrolled graph's) and a
:class:`~solar_io.graph.Repeat` per block saying where its instances lie; the file holds the block.

>>> fill("gru.l0.t{t-1}.h", "t", 5)
'gru.l0.t4.h'
>>> from solar_io.affine import parse_access
>>> str(expand_access(parse_access("x[t + 1, B]"), "t", 3))
'x[4, B]'
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache

from ..affine import Access, AffineExpr
from ..errors import Issue
from ..graph import Graph, Node, Repeat, Tensor

#: A repeat variable: letters and digits (no ``_``: the decoder's placeholder tokens use it).
VAR_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")
SLOT = re.compile(r"\{([A-Za-z][A-Za-z0-9]*)([+-][0-9]+)?\}")
_TOKEN = re.compile(r"__rep_([A-Za-z][A-Za-z0-9]*)(?:_([pm])([0-9]+))?__")


@lru_cache(maxsize=8192)
def _pieces(text: str, var: str) -> tuple[tuple[str, int | None], ...] | None:
    """``text`` split into (literal, offset) pieces for ``var`` (offset None: the literal ends it);
    None when ``text`` holds no slot of ``var``."""
    out: list[tuple[str, int | None]] = []
    pos = 0
    for m in SLOT.finditer(text):
        if m.group(1) != var:
            continue
        out.append((text[pos:m.start()], int(m.group(2) or 0)))
        pos = m.end()
    if not out:
        return None
    out.append((text[pos:], None))
    return tuple(out)


def fill(text: str, var: str, value: int) -> str:
    """``text`` with every ``{var}``, ``{var+C}``, ``{var-C}`` replaced by ``value`` (+/- C)."""
    pieces = _pieces(text, var)
    if pieces is None:
        return text
    return "".join(lit if off is None else lit + str(value + off) for lit, off in pieces)


def has_slot(text: str, var: str) -> bool:
    """True when ``text`` holds a slot of ``var``."""
    return _pieces(text, var) is not None


def tokens(text: str) -> str:
    """Slots as name-safe tokens (``{t-1}`` -> ``__rep_t_m1__``), so a block's names parse as names."""
    def tok(m: re.Match) -> str:
        off = m.group(2)
        return f"__rep_{m.group(1)}__" if not off else \
            f"__rep_{m.group(1)}_{'p' if off[0] == '+' else 'm'}{off[1:]}__"
    return SLOT.sub(tok, text)


def slots(text: str) -> str:
    """The inverse of :func:`tokens`."""
    def slot(m: re.Match) -> str:
        if m.group(2) is None:
            return "{" + m.group(1) + "}"
        return "{" + m.group(1) + ("+" if m.group(2) == "p" else "-") + m.group(3) + "}"
    return _TOKEN.sub(slot, text)


def _expr(e: object, var: str, value: int) -> object:
    if not isinstance(e, AffineExpr) or var not in e.ranks:
        return e
    c = dict(e.terms)[var]
    return AffineExpr(tuple(t for t in e.terms if t[0] != var), e.const + c * value)


def expand_access(a: Access, var: str, value: int) -> Access:
    """``a`` in the instance where ``var`` is ``value``."""
    name = fill(a.tensor, var, value)
    if a.index is None or not any(var in getattr(e, "ranks", ()) for e in a.index):
        return a if name == a.tensor else Access(name, a.index)
    return Access(name, tuple(_expr(e, var, value) for e in a.index))  # type: ignore[misc]


def expand_node(n: Node, var: str, value: int) -> Node:
    """Node ``n`` of a block in the instance where ``var`` is ``value``."""
    return Node(fill(n.name, var, value), n.kind, n.op, tuple(expand_access(a, var, value) for a in n.inputs),
                tuple(expand_access(a, var, value) for a in n.outputs), n.space, n.map, n.reduce, n.movement, n.axis,
                n.view, tuple((fill(t, var, value), dims) for t, dims in n.pad) if n.pad else (), n.fill, n.reason,
                n.location, n.attrs, n.scan, None if n.init is None else fill(n.init, var, value),
                None if n.kernel is None else fill(n.kernel, var, value), n.phase, n.live, n.fft)


def expand_tensor(t: Tensor, var: str, value: int) -> Tensor:
    """Tensor declaration ``t`` of a block in the instance where ``var`` is ``value``."""
    name = fill(t.name, var, value)
    updates = None if t.updates is None else fill(t.updates, var, value)
    return t if name == t.name and updates == t.updates else replace(t, name=name, updates=updates)


def instances(r: Repeat) -> tuple:
    """Every item of every instance of ``r``, in order (nodes, or tensors)."""
    if r.nodes:
        return tuple(expand_node(n, r.var, v) for v in r.values for n in r.nodes)
    return tuple(expand_tensor(t, r.var, v) for v in r.values for t in r.tensors)


def unrolled(g: Graph) -> Graph:
    """``g`` without its repeat blocks: the same nodes and tensors, written out one by one."""
    return replace(g, repeats=()) if g.repeats else g


_SAME = ("kind", "op", "space", "map", "reduce", "movement", "axis", "view", "fill", "reason", "location", "attrs",
         "scan", "phase")


def _is_instance(item: Node, n: Node, var: str, value: int) -> bool:
    """True when ``item`` is node ``n`` of a block in the instance where ``var`` is ``value`` (the
    same test as ``expand_node(n, var, value) == item``, without building the node)."""
    if item.name != fill(n.name, var, value) or len(item.inputs) != len(n.inputs) or \
            len(item.outputs) != len(n.outputs) or any(getattr(item, f) != getattr(n, f) for f in _SAME):
        return False
    for x, a in zip(item.inputs + item.outputs, n.inputs + n.outputs, strict=True):
        if x.tensor != fill(a.tensor, var, value) or (x.index is not a.index and x.index != expand_access(
                Access(x.tensor, a.index), var, value).index):
            return False
    return (item.init == (None if n.init is None else fill(n.init, var, value))
            and item.kernel == (None if n.kernel is None else fill(n.kernel, var, value))
            and item.pad == tuple((fill(t, var, value), dims) for t, dims in n.pad))


def matches(r: Repeat, items: tuple) -> bool:
    """True when ``items[r.at:]`` begins with the instances of ``r``, in order."""
    if r.tensors:
        return instances(r) == tuple(items[r.at:r.at + r.count * r.size])
    k = r.at
    for v in r.values:
        for n in r.nodes:
            if not _is_instance(items[k], n, r.var, v):
                return False
            k += 1
    return True


def check(g: Graph) -> list[Issue]:
    """Errors of ``g``'s repeat blocks (a bad variable or count, instances out of range or overlapping),
    and a warning for a block whose instances differ from the nodes/tensors it says they are (a graph
    changed after capture, e.g. given training phases: the file writes those items one by one)."""
    out: list[Issue] = []
    ranks = dict(g.ranks)
    covered: dict[str, list[tuple[int, int]]] = {"nodes": [], "tensors": []}
    for i, r in enumerate(g.repeats):
        path = ("repeats", i)
        what = "nodes" if r.nodes else "tensors"
        if bool(r.nodes) == bool(r.tensors):
            out.append(Issue(path, "a repeat block holds either nodes or tensors (one non-empty list)"))
            continue
        if not VAR_RE.match(r.var) or r.var in ranks:
            out.append(Issue(path + ("var",), f"repeat var {r.var!r} must be letters and digits and not a rank"))
            continue
        if r.count < 1 or r.step == 0:
            out.append(Issue(path, f"repeat count must be >= 1 and step non-zero, got count {r.count}, step {r.step}"))
            continue
        items = g.nodes if r.nodes else g.tensors
        end = r.at + r.count * r.size
        if r.at < 0 or end > len(items):
            out.append(Issue(path, f"repeat block covers {what} {r.at}..{end - 1}, the graph has {len(items)}"))
            continue
        if any(a < end and r.at < b for a, b in covered[what]):
            out.append(Issue(path, f"repeat block over {what} {r.at}..{end - 1} overlaps another block"))
            continue
        covered[what].append((r.at, end))
        if not matches(r, items):  # a graph transformed after capture: the block no longer says what it did
            out.append(Issue(path, f"the instances of repeat block {i} differ from {what} {r.at}..{end - 1}: "
                                   f"they are written one by one", "warning"))
    return out


def usable(g: Graph) -> tuple[Repeat, ...]:
    """The blocks of ``g`` that :func:`check` finds right: what a file may write as blocks (the others'
    items are written one by one, so the file is the graph either way)."""
    if not g.repeats:
        return ()
    bad = {i.path[1] for i in check(g) if len(i.path) > 1 and i.path[0] == "repeats"}
    return tuple(r for i, r in enumerate(g.repeats) if i not in bad)


def covered_nodes(g: Graph, issues: list[Issue]) -> set[int]:
    """Indices of nodes whose per-node checks their block's instances 0, 1 and last already make.

    ``issues`` is :func:`check`'s result (a block it found wrong covers nothing). Instance ``k`` of a
    correct block is its node with the variable set: the same fields, and references to the same
    tensors or to tensors declared alike (checked here for each instance); its index constants are
    affine in the variable, so in bounds for every instance when in bounds for the first and last.
    """
    bad = {i.path[1] for i in issues if len(i.path) > 1 and i.path[0] == "repeats"}
    tmap = g.tensor_map
    out: set[int] = set()

    def decl(name: str) -> tuple | None:
        t = tmap.get(name)
        return None if t is None else (t.ranks, t.dtype, t.role, t.value, t.density, t.generated)

    for i, r in enumerate(g.repeats):
        if i in bad or not r.nodes or r.count < 4:
            continue
        refs = [(j, a.tensor) for j, n in enumerate(r.nodes) for a in n.inputs + n.outputs
                if has_slot(a.tensor, r.var)]
        second = r.start + r.step
        want = [decl(fill(name, r.var, second)) for _, name in refs]
        if None in want:
            continue
        for k in range(2, r.count - 1):
            v = r.start + k * r.step
            if all(decl(fill(name, r.var, v)) == w for (_, name), w in zip(refs, want, strict=True)):
                out.update(range(r.at + k * r.size, r.at + (k + 1) * r.size))
    return out


def checked(g: Graph) -> tuple[list[Issue], set[int]]:
    """:func:`check`'s errors and :func:`covered_nodes` (empty for a graph without blocks)."""
    if not g.repeats:
        return [], set()
    issues = check(g)
    return issues, covered_nodes(g, issues)
