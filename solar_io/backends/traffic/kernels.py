"""Kernels of the unfused bound: the nodes one source operation was lowered to run as one kernel.

A frontend lowers one source op (``aten.scaled_dot_product_attention``, ``aten._softmax``,
``aten.native_layer_norm``) into several einsums: its nodes share the op and a name prefix
``CALL`` (``sdpa.scores``, ``sdpa.max``, ``sdpa.exp``, ..., ``sdpa``; the convention of every
solar-io frontend). The source program runs such an op as one kernel that never writes those
inner tensors to memory, so charging each of them a DRAM round trip would give an unfused time
that the source program itself beats. The unfused bound therefore runs each *kernel* (a maximal
run of consecutive nodes with the same op and call prefix) as
``max(busiest unit's total, DRAM bytes / bandwidth)``, the bytes being what crosses the kernel's
boundary (:mod:`.residency` for what on-chip memory keeps between kernels). Node names are
unique, so a hand-written graph whose names share no ``CALL.`` prefix has one kernel per node.

Under the precision policy's dequant rule (:mod:`.precision`) the nodes of a dequantisation chain
(casts, scale multiplies, moves) join the kernel of the contraction they feed, wherever they stand
in the graph (:func:`kernel_groups`): an fp8 kernel applies the scales in its loop, so the wide
dequantised tensors never cross DRAM. The group runs at the contraction's place; that is a valid
order because the chain's tensors are read by nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ...graph import Graph, Node
from .residency import NodeTraffic
from .result import Load, NodeBound


def kernel_key(node: Node) -> tuple[str, str]:
    """``(op, call)``: the source op and the call prefix of the node's name (``call`` for ``call.part``
    and for ``call`` itself, which frontends give the node producing the call's result)."""
    return node.op, node.name.split(".", 1)[0]


def kernels(g: Graph) -> list[tuple[int, int]]:
    """The kernels of ``g`` as inclusive node-index ranges, in order (see the module docstring)."""
    out: list[tuple[int, int]] = []
    prev: tuple[str, str] | None = None
    for i, n in enumerate(g.nodes):
        key = kernel_key(n)
        if out and key == prev:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
        prev = key
    return out


def kernel_groups(g: Graph, absorbed: Mapping[int, int] | None = None) -> list[tuple[int, ...]]:
    """The kernels of ``g`` as sorted node-index tuples, in order: the :func:`kernels` spans, with each
    node of ``absorbed`` (chain node index -> contraction index) moved into its contraction's kernel."""
    spans = kernels(g)
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


def merge(name: str, rows: Sequence[NodeBound], traffic: NodeTraffic, dram: float, bw: float) -> NodeBound:
    """One kernel's bound from its nodes' rows: work and unit times add up, units overlap inside the
    kernel (its compute is the busiest unit's total), and only ``dram`` bytes cross DRAM."""
    if len(rows) == 1:
        return replace(rows[0], memory_time=dram / bw, dram_bytes=dram,
                       time=max(rows[0].compute_time, dram / bw),
                       bottleneck=_bottleneck(rows[0].matrix_time, rows[0].vector_time, rows[0].special_time,
                                              dram / bw))
    loads: dict[str, Load] = {}
    for r in rows:
        for ld in r.loads:
            if ld.unit == "dram":
                continue
            prev = loads.get(ld.resource)
            loads[ld.resource] = Load(ld.resource, ld.unit, ld.work + (prev.work if prev else 0.0), ld.rate)
    if dram > 0:
        loads["dram"] = Load("dram", "dram", dram, bw)
    mt, vt, st = (math.fsum(getattr(r, f"{u}_time") for r in rows) for u in ("matrix", "vector", "special"))
    mem = dram / bw
    dtypes = {r.compute_dtype for r in rows if r.compute_dtype}
    if len(dtypes) > 1:  # a dequant chain and its contraction: the contraction's dtype names the kernel
        dtypes = {r.compute_dtype for r in rows if r.compute_dtype and r.flops_matrix > 0} or dtypes
    rules = {r.precision for r in rows if r.precision}
    lead = rows[0] if len({r.op for r in rows}) == 1 else max(rows, key=lambda r: r.flops_matrix)
    return NodeBound(name, lead.kind, lead.op, dtypes.pop() if len(dtypes) == 1 else None,
                     sum(r.macs for r in rows), math.fsum(r.flops_matrix for r in rows),
                     math.fsum(r.flops_vector for r in rows), math.fsum(r.transcendental for r in rows),
                     traffic.bytes, all(r.bytes_exact for r in rows), min(r.effectual_fraction for r in rows),
                     all(r.compute_known for r in rows), tuple(sorted({u for r in rows for u in r.unpriced})),
                     tuple(loads.values()), mt, vt, st, mem, max(mt, vt, st, mem), _bottleneck(mt, vt, st, mem),
                     dram, rules.pop() if len(rules) == 1 else ("; ".join(sorted(rules)) or None))


def _bottleneck(mt: float, vt: float, st: float, mem: float) -> str:
    t = max(mt, vt, st, mem)
    return "none" if t <= 0 else ("matrix" if t == mt else "vector" if t == vt else "special" if t == st
                                  else "memory")
