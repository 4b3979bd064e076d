"""A node with its tensor names replaced by their positions: the key under which the nodes of repeated
layers pose one problem.

The 80 layers of a Llama-3-70B graph are the same 58 nodes again under other names. A pass whose
answer for a node depends only on the node's fields and on the shapes and types of the tensors it
touches (validation of one node, its metrics) can answer once per distinct :func:`local_form` and
reuse the answer for every node of that form, renaming what it says.

:func:`local_form` gives ``(form, names)``: ``names`` are the tensors the node names (its accesses
in order, then ``init``, ``pad`` and ``@`` index tensors not accessed), and ``form`` is every field
of the node that says what it computes, with each tensor name replaced by its position in
``names``: not the fields that name the node or where it comes from (``name``, ``op``,
``location``, ``kernel``, ``phase``, the source op's ``attrs``: an optimizer node's ``param``
names its layer's weight), and of ``reason`` only whether there is one. Two nodes with equal forms
whose tensors at each position agree in what the pass reads (ranks, dtype, ...) get the same answer
up to renaming.

>>> from solar_io.affine import parse_access
>>> from solar_io.graph import Node
>>> def add(name, a, b, y):
...     return Node(name, "einsum", "aten.add", (parse_access(f"{a}[M]"), parse_access(f"{b}[M]")),
...                 (parse_access(f"{y}[M]"),), space=("M",), map="add", reduce="none")
>>> f0, n0 = local_form(add("l0.add", "l0.x", "l0.h", "l0.y"))
>>> f1, n1 = local_form(add("l1.add", "l1.x", "l1.h", "l1.y"))
>>> f0 == f1, n1
(True, ('l1.x', 'l1.h', 'l1.y'))
>>> local_form(add("twice", "x", "x", "y"))[0] == f0  # one tensor read twice is another problem
False
"""

from __future__ import annotations

from .affine import Access, Indirect
from .graph import Node

#: The fields of :class:`~solar_io.graph.Node` a form leaves out (module docstring); every other field is in
#: it (``reason`` as whether there is one). A test changes each field and checks the form follows this.
LEFT_OUT = frozenset({"name", "op", "location", "attrs", "kernel", "phase"})


def local_form(n: Node) -> tuple[tuple, tuple[str, ...]]:
    """``(form, names)`` of node ``n`` (module docstring)."""
    local: dict[str, int] = {}
    for a in n.inputs:
        local.setdefault(a.tensor, len(local))
    for a in n.outputs:
        local.setdefault(a.tensor, len(local))

    def acc(a: Access) -> tuple:
        index = a.index
        if index is not None and any(type(e) is Indirect for e in index):
            index = tuple(("@", local.setdefault(e.tensor, len(local))) if type(e) is Indirect else e  # type: ignore[union-attr]
                          for e in index)
        return local[a.tensor], index

    inputs, outputs = tuple(acc(a) for a in n.inputs), tuple(acc(a) for a in n.outputs)
    init = None if n.init is None else local.setdefault(n.init, len(local))
    pad = tuple((local.setdefault(t, len(local)), dims) for t, dims in n.pad) if n.pad else ()
    form = (n.kind, n.space, n.map, n.reduce, n.movement, n.axis, n.view, n.fill, bool((n.reason or "").strip()),
            n.scan, inputs, outputs, init, pad, n.live, n.fft)
    return form, tuple(local)


def forms(nodes: tuple[Node, ...]) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """Per node, ``(form id, names)``: nodes of equal :func:`local_form` share the id (numbered in order
    of first appearance). ``Graph.node_forms`` keeps them per graph.

    >>> from solar_io.affine import parse_access
    >>> from solar_io.graph import Node
    >>> relu = lambda x, y: Node(y, "einsum", "aten.relu", (parse_access(f"{x}[M]"),), (parse_access(f"{y}[M]"),),
    ...                          space=("M",), map="relu", reduce="none")
    >>> forms((relu("a", "b"), relu("b", "c")))
    ((0, ('a', 'b')), (0, ('b', 'c')))
    """
    ids: dict[tuple, int] = {}
    out = []
    for n in nodes:
        form, names = local_form(n)
        out.append((ids.setdefault(form, len(ids)), names))
    return tuple(out)


__all__ = ["LEFT_OUT", "forms", "local_form"]
