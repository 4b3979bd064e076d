"""Kernels of the unfused bound: the nodes one source operation was lowered to run as one kernel.

A frontend lowers one source op (``aten.scaled_dot_product_attention``, ``aten._softmax``,
``aten.native_layer_norm``) into several einsums. Since format 1.3 its nodes declare it: they share
a ``kernel`` id (``Node.kernel``) and stand consecutively. A graph that declares no kernel at all
(a file before 1.3 that was not migrated, a graph built in code) falls back to the earlier rule:
its nodes share the op and a name prefix ``CALL`` (``sdpa.scores``, ``sdpa.max``, ``sdpa.exp``,
..., ``sdpa``; the convention of every solar-io frontend). The source program runs such an op as
one kernel that never writes those inner tensors to memory, so charging each of them a DRAM
round trip would give an unfused time that the source program itself beats. The unfused bound
therefore runs each *kernel* (a maximal run of consecutive nodes of one kernel id) as
``max(busiest unit's total, DRAM bytes / bandwidth)``, the bytes being what crosses the kernel's
boundary (:mod:`.residency` for what on-chip memory keeps between kernels; the pricing is
:mod:`solar_io.backends.roofline.kernel_bound`). Node names are unique, so a hand-written graph
whose names share no ``CALL.`` prefix and that declares no kernel has one kernel per node.

Under the precision policy's dequant rule (:mod:`solar_io.backends.roofline.precision`) the nodes
of a dequantisation chain
(casts, scale multiplies, moves) join the kernel of the contraction they feed, wherever they stand
in the graph (:func:`kernel_groups`): an fp8 kernel applies the scales in its loop, so the wide
dequantised tensors never cross DRAM. The group runs at the contraction's place; that is a valid
order because the chain's tensors are read by nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from solar_io.format.kernels import declare_kernels, kernel_spans
from solar_io.graph import Graph

from .residency import NodeTraffic


def kernels(g: Graph) -> list[tuple[int, int]]:
    """The kernels of ``g`` as inclusive node-index ranges, in order (see the module docstring): the
    declared kernels (:func:`solar_io.format.kernels.kernel_spans`), or, in a graph that declares none,
    those the name-prefix rule declares (:func:`solar_io.format.kernels.declare_kernels`)."""
    declared = any(n.kernel is not None for n in g.nodes)
    return kernel_spans(g.nodes if declared else declare_kernels(g.nodes))


def kernel_groups(g: Graph, absorbed: Mapping[int, int] | None = None,
                  spans: Sequence[tuple[int, int]] | None = None) -> list[tuple[int, ...]]:
    """The kernels of ``g`` as sorted node-index tuples, in order: the :func:`kernels` spans (``spans``
    when given), with each node of ``absorbed`` (chain node index -> contraction index) moved into its
    contraction's kernel."""
    spans = kernels(g) if spans is None else spans
    if not absorbed:
        return [tuple(range(i, j + 1)) for i, j in spans]
    groups: list[list[int]] = []
    owner: dict[int, int] = {}
    for i, j in spans:
        members = [v for v in range(i, j + 1) if v not in absorbed]
        if members:
            owner.update((v, len(groups)) for v in members)
            groups.append(members)
    for v, c in absorbed.items():
        groups[owner[c]].append(v)
    return [tuple(sorted(m)) for m in groups]


def kernel_traffic(g: Graph, traffic: Sequence[NodeTraffic], groups: Sequence[tuple[int, ...]],
                   exposed: dict[str, float]) -> list[NodeTraffic]:
    """What each kernel (a tuple of node indices, :func:`kernel_groups`) reads from outside it and
    writes for outside it (a graph output, a tensor a later kernel reads, or the part of an inner
    tensor that graph outputs viewing it expose)."""
    role = {t.name: t.role for t in g.tensors}
    where: dict[str, int] = {}  # tensor -> the kernel that writes it
    readers: dict[str, set[int]] = {}
    for k, members in enumerate(groups):
        for v in members:
            for t in traffic[v].writes:
                where.setdefault(t, k)
            for t in traffic[v].reads:
                readers.setdefault(t, set()).add(k)
    out = []
    for k, members in enumerate(groups):
        if len(members) == 1:
            out.append(traffic[members[0]])
            continue
        rd: dict[str, float] = {}
        wr: dict[str, float] = {}
        for v in members:
            for t, b in traffic[v].reads.items():
                if where.get(t) != k:
                    rd[t] = max(rd.get(t, 0.0), b)
            for t, b in traffic[v].writes.items():
                if role.get(t) == "output" or readers.get(t, set()) - {k}:
                    wr[t] = max(wr.get(t, 0.0), b)
                elif exposed.get(t, 0.0) > 0:  # an inner tensor: only what output views expose
                    wr[t] = max(wr.get(t, 0.0), min(b, exposed[t]))
        out.append(NodeTraffic(rd, {t: b for t, b in wr.items() if b > 0}))
    return out
