"""The unfused bound over kernels: the rows of the nodes one kernel runs, merged into one row.

The kernels and the bytes crossing each one's boundary are the traffic model's
(:mod:`solar_io.backends.traffic.kernels`); here they are priced: work and unit times add up, the
units overlap inside the kernel, and only the kernel's DRAM bytes cross memory.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from solar_io.graph import Graph

from ..result import Load, NodeBound, time_and_bottleneck
from ..traffic.residency import NodeTraffic

MERGED_NOTE = ("; the {nodes} nodes run as {kernels} kernels (nodes lowered from one source op are one kernel, and so "
               "is a dequantisation chain with its contraction: inner tensors never cross DRAM)")


def kernel_rows(g: Graph, nodes: Sequence[NodeBound], groups: Sequence[tuple[int, ...]],
                ktraffic: Sequence[NodeTraffic], kdram: Sequence[float], bw: float) -> tuple[NodeBound, ...]:
    """One row per kernel (``groups``: node-index tuples; ``ktraffic``/``kdram``: what crosses each
    one's boundary); the node rows themselves when every kernel is one node moving the same bytes."""
    if all(len(k) == 1 for k in groups) and all(n.dram_bytes == d for n, d in zip(nodes, kdram, strict=True)):
        return tuple(nodes)
    return tuple(merge(nodes[k[0]].name if len(k) == 1 else g.nodes[k[-1]].name.split(".", 1)[0],
                       [nodes[v] for v in k], tr, d, bw)
                 for k, tr, d in zip(groups, ktraffic, kdram, strict=True))


def merge(name: str, rows: Sequence[NodeBound], traffic: NodeTraffic, dram: float, bw: float) -> NodeBound:
    """One kernel's bound from its nodes' rows: work and unit times add up, units overlap inside the
    kernel (its compute is the busiest unit's total), and only ``dram`` bytes cross DRAM."""
    if len(rows) == 1:
        r = rows[0]
        if dram == r.dram_bytes:  # its own row: the same bytes, hence the same memory time, time and bottleneck
            return r
        t, bn = time_and_bottleneck(r.matrix_time, r.vector_time, r.special_time, dram / bw)
        return replace(r, memory_time=dram / bw, dram_bytes=dram, time=t, bottleneck=bn)
    loads: dict[str, Load] = {}
    for r in rows:
        for ld in r.loads:
            if ld.unit == "dram":
                continue
            prev = loads.get(ld.resource)
            loads[ld.resource] = Load(resource=ld.resource, unit=ld.unit, work=ld.work + (prev.work if prev else 0.0),
                                      rate=ld.rate)
    if dram > 0:
        loads["dram"] = Load(resource="dram", unit="dram", work=dram, rate=bw)
    mt, vt, st = (math.fsum(getattr(r, f"{u}_time") for r in rows) for u in ("matrix", "vector", "special"))
    mem = dram / bw
    dtypes = {r.compute_dtype for r in rows if r.compute_dtype}
    if len(dtypes) > 1:  # a dequant chain and its contraction: the contraction's dtype names the kernel
        dtypes = {r.compute_dtype for r in rows if r.compute_dtype and r.flops_matrix > 0} or dtypes
    rules = {r.precision for r in rows if r.precision and not r.precision.startswith("dequant chain in ")}
    lead = rows[0] if len({r.op for r in rows}) == 1 else max(rows, key=lambda r: r.flops_matrix)
    t, bn = time_and_bottleneck(mt, vt, st, mem)
    return NodeBound(name=name, kind=lead.kind, op=lead.op, compute_dtype=dtypes.pop() if len(dtypes) == 1 else None,
                     macs=sum(r.macs for r in rows), flops_matrix=math.fsum(r.flops_matrix for r in rows),
                     flops_vector=math.fsum(r.flops_vector for r in rows),
                     transcendental=math.fsum(r.transcendental for r in rows), bytes=traffic.bytes,
                     bytes_exact=all(r.bytes_exact for r in rows),
                     effectual_fraction=min(r.effectual_fraction for r in rows),
                     compute_known=all(r.compute_known for r in rows),
                     unpriced=tuple(sorted({u for r in rows for u in r.unpriced})), loads=tuple(loads.values()),
                     matrix_time=mt, vector_time=vt, special_time=st, memory_time=mem, time=t, bottleneck=bn,
                     dram_bytes=dram, precision=rules.pop() if len(rules) == 1 else ("; ".join(sorted(rules)) or None))


__all__ = ["MERGED_NOTE", "kernel_rows", "merge"]
