"""Emitting repeated structure through the graph builder: instances of a template, and their block.

A frontend that knows it is about to emit the same nodes many times (a recurrence's time steps)
lowers one instance normally, turns it into a template (names with ``{t}`` slots, the step as the
term ``t`` of an index; :mod:`solar_io.format.repeat`), and calls :func:`replicate`: the builder
gets every instance as plain nodes and tensors at once, without running the lowering again, and
remembers the block. :func:`blocks` (called by ``GraphBuilder.build``) then keeps each block whose
instances survived the build unchanged (dead-node pruning, the graph's kernels) as a
:class:`~solar_io.graph.Repeat`, so the file writes it once; a block that did not survive is
simply dropped (the graph is the same either way).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ...format.repeat import expand_node, fill, matches
from ...format.repeat_codec import canonical
from ...graph import Node, Repeat, Tensor

if TYPE_CHECKING:
    from .builder import GraphBuilder


@dataclass(frozen=True)
class Pending:
    """A block handed to the builder: its variable's values and its templates."""

    var: str
    start: int
    step: int
    count: int
    nodes: tuple[Node, ...]
    tensors: tuple[Tensor, ...]


def replicate(b: GraphBuilder, var: str, start: int, step: int, count: int, nodes: Sequence[Node],
              tensors: Sequence[Tensor]) -> bool:
    """Emit ``count`` instances of the template ``nodes`` and ``tensors`` (``var`` = start, start + step,
    ...) into ``b``; False (nothing emitted) when an instance's name is taken already."""
    from .builder import TensorInfo

    values = [start + k * step for k in range(count)]
    names = [fill(t.name, var, v) for v in values for t in tensors]
    node_names = [fill(n.name, var, v) for v in values for n in nodes]
    if len(set(names)) != len(names) or any(n in b.tensors for n in names) or \
            len(set(node_names)) != len(node_names) or any(n in b._node_names for n in node_names):
        return False
    sizes = b.sizes
    shapes = [tuple(sizes[r] for r in t.ranks) for t in tensors]
    for v in values:
        for t, shape in zip(tensors, shapes, strict=True):
            name = fill(t.name, var, v)
            b.tensors[name] = TensorInfo(name, shape, t.dtype, t.role, t.ranks, t.value)
        for n in nodes:
            node = expand_node(n, var, v)
            b._node_names.add(node.name)
            b.nodes.append(node)
    b.repeats.append(Pending(var, start, step, count, tuple(nodes), tuple(tensors)))
    return True


def blocks(pending: Sequence[Pending], nodes: Sequence[Node], tensors: Sequence[Tensor]) -> tuple[Repeat, ...]:
    """The blocks among ``pending`` whose instances stand in the built ``nodes`` and ``tensors`` as
    emitted (node fields the build sets, such as ``kernel``, taken from the first instance)."""
    node_at = {n.name: i for i, n in enumerate(nodes)} if pending else {}
    tensor_at = {t.name: i for i, t in enumerate(tensors)} if pending else {}
    out: list[Repeat] = []
    for p in pending:
        i = node_at.get(fill(p.nodes[0].name, p.var, p.start)) if p.nodes else None
        if i is not None:
            body = tuple(replace(n, kernel=nodes[i + j].kernel) if i + j < len(nodes) else n
                         for j, n in enumerate(p.nodes))
            r = Repeat(p.var, p.start, p.step, p.count, i, nodes=body)
            if i + p.count * len(body) <= len(nodes) and matches(r, nodes):
                out.append(r)
        j = tensor_at.get(fill(p.tensors[0].name, p.var, p.start)) if p.tensors else None
        if j is not None:
            r = Repeat(p.var, p.start, p.step, p.count, j, tensors=p.tensors)
            if j + p.count * len(p.tensors) <= len(tensors) and matches(r, tuple(tensors)):
                out.append(r)
    return canonical(out)
