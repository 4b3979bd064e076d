"""Unfused and fused speed-of-light bounds of a graph on a chip (the pipeline: :mod:`solar_io.backends.bound`).

All times are lower bounds in seconds: a real run of the workload on the chip cannot be faster.

Per node v, each kind of work runs on one unit at one peak (:mod:`.model`); the *load* of v on a
resource (``matrix/bf16``, ``vector/fp32``, ``special/fp32``, ``dram``) is its work there (FLOPs,
special-function results or bytes) and takes ``work / rate`` seconds. Loads on the same unit add
up (an fp32 matmul routed to the vector unit shares it with the node's vector work); units and
DRAM run concurrently, so

- ``compute(v) = max over units u of time_u(v)``; ``memory(v) = DRAM bytes(v) / DRAM bandwidth``;
- **unfused**: every source op is its own kernel k (the nodes a frontend lowered from one op run
  as one, :mod:`.kernels`): ``T = sum_k max(busiest unit's total over k, DRAM bytes(k) / bandwidth)``;
  a hand-written graph has one kernel per node. DRAM bytes are what crosses the kernel's boundary
  less what on-chip memory (S bytes, the spec's on-chip levels) may keep between kernels
  (:mod:`solar_io.backends.traffic.residency`); ``residency=False`` charges every operand (the
  classical count, which a chip with caches can beat);
- **fused**: the graph is one kernel with unlimited on-chip memory; only graph inputs, weights,
  stored constants and outputs cross DRAM (``GraphMetrics.boundary_bytes``, views included:
  the part of a computed tensor that an output viewing it exposes, and inputs read only through
  views, :mod:`solar_io.views`):
  ``T = max(max_u sum_v time_u(v), boundary_bytes / bandwidth)``. Work on different units overlaps
  across nodes as well inside one kernel (a fused attention kernel runs its softmax on the vector
  and special units while the tensor cores run the next matmul), so the compute term is the busiest
  unit's total, which is at most ``sum_v compute(v)``; ``fused <= unfused`` always holds.
- **cache-aware** (finite on-chip memory) is :mod:`solar_io.backends.tiling`; without it its slot is
  reported "not computed".

Sparse tensors (``density`` d < 1). Bytes already scale with d (``solar_io.metrics``). For compute
there are two models of a node with a sparse operand: a dense kernel executes every multiply at
the dense peak (``2·MACs / P``); a sparse kernel skips the zeros and executes only the effectual
``d·MACs``. Hardware structured sparsity (2:4, d = 0.5) runs at twice the dense peak, i.e. it
executes the ``d·MACs`` effectual multiplies at the dense rate: ``2·MACs/(2P) = 2·d·MACs/P``; at
d < 0.5 a 2:4 engine cannot exploit more than half, so it is slower than ``2·d·MACs/P``. Since
d <= 1, the lower bound over both models (and over any sparse engine whose speed-up does not exceed
1/d) is the effectual one: **the node's work is scaled by d at the dense peaks**. Specs list dense
peaks only; a chip with a speed-up beyond 1/d would need a sparse peak, which no spec gives. With
several sparse tensors the factor is the product of the densities of every tensor the node reads
or writes (each once): the effectual fraction when the non-zeros are placed independently, which
is below every single density. The factor applies to matrix, vector and transcendental work alike
and is reported per node (``effectual_fraction``).

Opaque nodes have unknown compute: the bound uses their bytes only and the report lists them
(``opaque``); work the chip has no peak for at all is likewise listed (``unpriced``).
"""


from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from solar_io.graph import Graph
from solar_io.metrics import GraphMetrics

from ..result import UNITS, Fidelity, Load, NodeBound, Resource, Totals, time_and_bottleneck
from ..traffic.residency import NodeTraffic
from .model import MATRIX, SPECIAL, VECTOR, WORK_KINDS, BoundError, PeakModel, Plan, Route
from .precision import PrecisionPlan

UNFUSED_NOTE = ("each node is a kernel: sum over nodes of max(compute, DRAM bytes / DRAM bandwidth); "
                "on-chip memory keeps data between kernels")


#: the rules that price fp32 matrix work at a faster matrix class (:mod:`.precision`)
FP32_RULES = ("fp32->tf32", "fp32->bf16", "fp32->fp16")

@dataclass(frozen=True, slots=True)
class Priced:
    """The per-node rows of one graph on one chip and what pricing them noted."""

    nodes: tuple[NodeBound, ...]
    notes: tuple[str, ...]
    unpriced: tuple[tuple[str, str], ...]
    repriced: tuple[tuple[int, str, str], ...]  # (node index, compute class, the fp32 rule that priced it or "")


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What pricing needs of one node that no chip changes (:func:`node_facts`, kept per graph)."""

    common: dict  # the NodeBound fields that are the node's counts (name, kind, op, macs, FLOPs, bytes)
    work: tuple[float, float, float]  # matrix FLOPs, vector FLOPs, special-function results
    priced: bool  # compute known and some work: priced at the chip's peaks (else its bytes only)
    compute_known: bool
    dtypes: tuple[str, ...]  # the dtypes the node is priced from unless an operand is dequantised
    frac: float  # the effectual fraction (product of the densities of the sparse tensors it touches)


def node_facts(g: Graph, gm: GraphMetrics, traffic: Sequence[NodeTraffic]) -> tuple[NodeFacts, ...]:
    """The chip-independent part of :func:`price_nodes`, one entry per node of ``g``."""
    dtype_of = {t.name: t.dtype for t in g.tensors}
    sparse = {t.name: t.density for t in g.tensors if t.density is not None and t.density < 1.0}
    out = []
    for node, m, tr in zip(g.nodes, gm.nodes, traffic, strict=True):
        work = (m.flops_matrix, m.flops_vector, m.transcendental)
        frac = 1.0
        if sparse:  # product of the densities of the distinct sparse tensors the node touches
            for name in {a.tensor for a in node.inputs} | {a.tensor for a in node.outputs}:
                frac *= sparse.get(name, 1.0)
        out.append(NodeFacts(
            common=dict(name=node.name, kind=node.kind, op=node.op, macs=m.macs, flops_matrix=work[0],
                        flops_vector=work[1], transcendental=work[2], bytes=tr.bytes, bytes_exact=m.bytes_exact),
            work=work, priced=bool(m.compute_known and (work[0] or work[1] or work[2])),
            compute_known=m.compute_known, dtypes=tuple(dtype_of[a.tensor] for a in (node.inputs or node.outputs)),
            frac=frac))
    return tuple(out)


def price_nodes(g: Graph, gm: GraphMetrics, model: PeakModel, bw: float, traffic: Sequence[NodeTraffic],
                dram: Sequence[float], pplan: PrecisionPlan, facts: Sequence[NodeFacts] | None = None) -> Priced:
    """Every node of ``g`` as its own kernel on the chip of ``model``: its loads per unit at the peaks
    the model routes its work to, and ``dram[v]`` bytes at bandwidth ``bw`` (the module docstring).
    ``facts``: :func:`node_facts` of the graph (computed here when not given)."""
    if facts is None:
        facts = node_facts(g, gm, traffic)
    nodes: list[NodeBound] = []
    notes: dict[str, None] = {}
    unpriced: list[tuple[str, str]] = []
    repriced: list[tuple[int, str, str]] = []
    routed: dict[tuple, tuple] = {}
    matrix_peaks = {dt: p.value for dt, p in model.spec.units.get("matrix", {}).items()}
    for idx, (f, dbytes) in enumerate(zip(facts, dram, strict=True)):
        mem = dbytes / bw
        dram_load = (Load(resource="dram", unit="dram", work=dbytes, rate=bw),) if dbytes > 0 else ()
        work = f.work
        into = pplan.absorbed.get(idx)
        if into is not None and not work[MATRIX]:  # a folded dequant chain: the MMA does its work (precision.py)
            nodes.append(NodeBound(**f.common, memory_time=mem, dram_bytes=dbytes, compute_dtype=None,
                                   effectual_fraction=f.frac, compute_known=True, unpriced=(), loads=dram_load,
                                   matrix_time=0.0, vector_time=0.0, special_time=0.0, time=mem,
                                   bottleneck="memory" if mem > 0 else "none",
                                   precision=f"dequant chain in {g.nodes[into].name}'s MMA"))
            continue
        if not f.priced:
            nodes.append(NodeBound(**f.common, memory_time=mem, dram_bytes=dbytes, compute_dtype=None,
                                   effectual_fraction=1.0, compute_known=f.compute_known, unpriced=(),
                                   loads=dram_load, matrix_time=0.0, vector_time=0.0, special_time=0.0, time=mem,
                                   bottleneck="memory" if mem > 0 else "none"))
            continue
        operands = pplan.operands_on(idx, matrix_peaks) or f.dtypes
        dq = pplan.dequants.get(idx)
        key = (work, frac := f.frac, operands, tuple(sorted({d.origin for d in dq})) if dq else ())
        got = routed.get(key)  # the nodes of a repeated layer route the same work the same way
        if got is None:
            got = routed[key] = _route(g, idx, model, plan := model.plan(operands), work, frac,
                                       _rule(plan, work[MATRIX], pplan, idx))
        compute_dtype, rule, fp32_rule, loads, missing, mt, vt, st, texts = got
        if rule:
            repriced.append((idx, compute_dtype, fp32_rule))
        for text in texts:
            notes.setdefault(text)
        t, bn = time_and_bottleneck(mt, vt, st, mem)
        if missing:
            unpriced.extend((f.common["name"], k) for k in missing)
        nodes.append(NodeBound(**f.common, memory_time=mem, dram_bytes=dbytes, compute_dtype=compute_dtype,
                               effectual_fraction=frac, compute_known=True, unpriced=missing,
                               loads=loads + dram_load, matrix_time=mt, vector_time=vt,
                               special_time=st, time=t, bottleneck=bn, precision=rule))
    return Priced(tuple(nodes), tuple(notes), tuple(unpriced), tuple(repriced))


def _route(g: Graph, idx: int, model: PeakModel, plan: Plan, work: tuple[float, float, float], frac: float,
           rule: str | None) -> tuple:
    """What :func:`price_nodes` needs of node ``idx``'s compute, the same for every node of that work,
    effectual fraction, operand dtypes and precision rules: (compute dtype, rule, its fp32 part, the
    compute loads, the work kinds no unit prices, the matrix, vector and special seconds, the notes)."""
    loads: dict[str, Load] = {}
    missing: list[str] = []
    for kind in (MATRIX, VECTOR, SPECIAL):
        w = work[kind]
        if w <= 0:
            continue
        route = plan.routes[kind]
        if isinstance(route, str):
            raise BoundError(f"node {g.nodes[idx].name!r} ({WORK_KINDS[kind]} work in {plan.compute_dtype}): {route}")
        if route is None:
            missing.append(WORK_KINDS[kind])
            continue
        key = route.key
        prev = loads.get(key)
        loads[key] = Load(resource=key, unit=route.unit, work=w * frac + (prev.work if prev else 0.0), rate=route.peak)
    texts = tuple(text for kind, text in plan.notes if kind < 0 or work[kind] > 0)
    mt = vt = st = 0.0
    for ld in loads.values():
        if ld.unit == "matrix":
            mt += ld.work / ld.rate
        elif ld.unit == "vector":
            vt += ld.work / ld.rate
        else:
            st += ld.work / ld.rate
    fp32_rule = next((r for r in rule.split("; ") if r in FP32_RULES), "") if rule else ""
    return plan.compute_dtype, rule, fp32_rule, tuple(loads.values()), tuple(missing), mt, vt, st, texts


def _rule(plan: Plan, matrix_work: float, pplan: PrecisionPlan, idx: int) -> str | None:
    """The precision rules that repriced node ``idx`` (``dequant fp8_e4m3``, ``fp32->tf32``), or None."""
    rules = []
    ds = pplan.dequants.get(idx)
    if ds:
        rules.append("dequant " + "/".join(sorted({d.origin for d in ds})))
    route = plan.routes[MATRIX]
    fp32 = "fp32" in plan.compute_dtype.split("/")
    if matrix_work > 0 and isinstance(route, Route) and fp32 and f"fp32->{route.dtype}" in FP32_RULES:
        rules.append(f"fp32->{route.dtype}")
    return "; ".join(rules) or None



def _sum(xs: Iterable[float]) -> float:
    return math.fsum(xs)


def headroom(measured: float | None, t: float | None) -> float | None:
    """measured / bound (None without a measurement or for a zero bound)."""
    return measured / t if measured is not None and t is not None and t > 0 else None


def unit_totals(rows: Sequence[NodeBound]) -> tuple[tuple[str, float], ...]:
    """Seconds per unit over ``rows`` (correctly rounded sums)."""
    return tuple((u, _sum(getattr(n, f"{u}_time") for n in rows)) for u in UNITS)


def unfused_fidelity(kernels: Sequence[NodeBound], measured: float | None, note: str = UNFUSED_NOTE) -> Fidelity:
    """The unfused bound: every kernel of ``kernels`` alone, their times summed."""
    u_time = unfused_time(kernels)
    by_bn: dict[str, list[float]] = {}
    for k in kernels:
        by_bn.setdefault(k.bottleneck, []).append(k.time)
    split = tuple(sorted(((b, _sum(v)) for b, v in by_bn.items() if b != "none"), key=lambda kv: -kv[1]))
    return Fidelity(name="unfused", computed=True, time=u_time, compute_time=_sum(k.compute_time for k in kernels),
                    memory_time=_sum(k.memory_time for k in kernels), bytes=_sum(k.dram_bytes for k in kernels),
                    unit_times=unit_totals(kernels), time_by_bottleneck=split,
                    bottleneck=split[0][0] if split else None, headroom=headroom(measured, u_time), note=note)


def fused_fidelity(nodes: Sequence[NodeBound], boundary: float, bw: float, measured: float | None) -> Fidelity:
    """The fused bound: one kernel, unlimited on-chip memory; only ``boundary`` bytes cross DRAM."""
    u_units = unit_totals(nodes)
    f_compute = max(t for _, t in u_units)
    f_memory = boundary / bw
    f_time, f_bn = time_and_bottleneck(*(t for _, t in u_units), f_memory)
    return Fidelity(name="fused", computed=True, time=f_time, compute_time=f_compute, memory_time=f_memory,
                    bytes=boundary, unit_times=u_units, bottleneck=f_bn if f_time > 0 else None,
                    headroom=headroom(measured, f_time),
                    note="one kernel, unlimited on-chip memory: max(busiest unit's total, boundary bytes / DRAM "
                         "bandwidth)")


def resources(nodes: Sequence[NodeBound], bw: float, unfused_bytes: float, boundary: float) -> tuple[Resource, ...]:
    """Every resource the graph uses, its rate and its work unfused and fused (DRAM last)."""
    work: dict[str, list] = {}
    for n in nodes:
        for ld in n.loads:
            if ld.unit != "dram":
                entry = work.setdefault(ld.resource, [ld.unit, ld.rate, []])
                entry[2].append(ld.work)
    out = [Resource(key=k, unit=u, dtype=k.split("/", 1)[1], rate=rate, work_unfused=_sum(ws), work_fused=_sum(ws))
           for k, (u, rate, ws) in sorted(work.items(), key=lambda kv: (UNITS.index(kv[1][0]), kv[0]))]
    out.append(Resource(key="dram", unit="dram", dtype=None, rate=bw, work_unfused=unfused_bytes, work_fused=boundary))
    return tuple(out)


def totals(gm: GraphMetrics, nodes: int) -> Totals:
    """The graph's dense totals (``solar_io.metrics``)."""
    return Totals(nodes=nodes, macs=gm.macs, flops_matrix=gm.flops_matrix, flops_vector=gm.flops_vector,
                  transcendental=gm.transcendental, bytes=gm.bytes, boundary_bytes=gm.boundary_bytes)


def unfused_time(nodes: Sequence[NodeBound]) -> float:
    """The unfused bound: the sum of the node times (correctly rounded)."""
    return _sum(n.time for n in nodes)


__all__ = ["UNFUSED_NOTE", "NodeFacts", "Priced", "fused_fidelity", "headroom", "node_facts", "price_nodes",
           "resources", "totals", "unfused_fidelity", "unfused_time", "unit_totals"]
