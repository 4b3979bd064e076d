"""Plain-text report of a :class:`~.sol.ParallelReport` (what ``solar-io bound --parallel`` prints),
and its mapping form for ``--format yaml/json``."""

from __future__ import annotations

from typing import Any

from solar_io.units import format_time

from .sol import ParallelReport


def _b(x: float) -> str:
    for scale, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if x >= scale:
            return f"{x / scale:.4g} {unit}"
    return f"{x:.4g} B"


def render(r: ParallelReport) -> str:
    """The report as text: the layout, each stage's chip, its collectives, the step, the assumptions."""
    t = format_time
    lines = [f"{r.graph or 'graph'} on {r.system.name}: --parallel {r.layout} ({r.layout.chips} chips), "
             f"{r.microbatches} microbatch(es)"]
    p = r.plan
    if p.column or p.row:
        ranks = [f"{k}/{v}" for k, v in p.tp_splits.items()]
        shown = ", ".join(ranks[:8]) + (f", ... ({len(ranks)} ranks)" if len(ranks) > 8 else "")
        lines.append(f"  tensor parallel: {len(p.column)} column-parallel, {len(p.row)} row-parallel linears; "
                     f"split ranks {shown}")
    if p.replicated:
        shown = "; ".join(f"{n} ({why})" for n, why in p.replicated[:6])
        more = f"; ... {len(p.replicated) - 6} more" if len(p.replicated) > 6 else ""
        lines.append(f"  replicated (not sharded): {shown}{more}")
    for st in r.stages:
        lines.append(f"stage {st.index} ({st.nodes} nodes: {', '.join(st.parts)}), per chip per microbatch; "
                     f"weights {_b(st.weight_bytes)}"
                     + (" (more than the chip's DRAM!)" if st.weight_bytes > (r.system.chip.dram.capacity or 1e300)
                        else ""))
        for f in r.fidelities:
            w = st.work[f]
            lines.append(f"  {f:8s} compute {t(w.compute)}  memory {t(w.memory)}  bound {t(w.time)}  "
                         f"communication {t(st.comm)}")
        if st.step_work:
            for f in r.fidelities:
                w = st.step_work[f]
                lines.append(f"  {f:8s} optimizer once per step: compute {t(w.compute)}  memory {t(w.memory)}  "
                             f"bound {t(w.time)}; gradient accumulation {t(st.accumulation.get(f, 0.0))} per step")
        for pc in st.collectives:
            c = pc.collective
            per = "per step" if c.dim in ("dp", "edp") else "per microbatch"
            lines.append(f"  {c.kind:14s} {c.dim:3s} n={pc.group:<3d} {_b(c.nbytes):>10s} {t(pc.total):>10s} {per}: "
                         f"{c.tensor} ({c.reason}; {pc.links})")
    lines.append("step (all microbatches):")
    for f in r.fidelities:
        h = r.headroom(f)
        lines.append(f"  {f:8s} SOL overlapped (max of compute and communication) {t(r.overlapped[f])}, "
                     f"serial (sum) {t(r.serial[f])}" + (f"; measured {t(r.measured)}: headroom {h:.3g}x" if h else ""))
    for kind in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send/recv"):
        s = r.collective_seconds(kind)
        if s > 0:
            lines.append(f"  {kind} per step: {t(s)}")
    lines.append("assumptions:")
    lines.extend(f"  - {a}" for a in r.assumptions)
    return "\n".join(lines) + "\n"


def document(r: ParallelReport) -> dict[str, Any]:
    """The report as a plain mapping (seconds, bytes), for YAML or JSON (``schema/parallel-report-v1.schema.json``)."""
    return {
        "format": "solar-io.parallel-report", "version": "1.0", "allreduce": r.allreduce,
        "graph": r.graph, "system": r.system.name, "chip": r.system.chip.name, "layout": str(r.layout),
        "chips": r.layout.chips, "microbatches": r.microbatches, "bubble": r.bubble,
        "tp_split_ranks": dict(r.plan.tp_splits), "column_parallel": list(r.plan.column),
        "row_parallel": list(r.plan.row), "replicated": [{"node": n, "reason": w} for n, w in r.plan.replicated],
        "stages": [{
            "index": st.index, "nodes": st.nodes, "parts": list(st.parts), "weight_bytes": st.weight_bytes,
            "work": {f: {"compute_s": w.compute, "memory_s": w.memory, "time_s": w.time} for f, w in st.work.items()},
            "communication_s": st.comm, "gradient_allreduce_s": st.dp_comm,
            "collectives": [{"kind": pc.collective.kind, "dim": pc.collective.dim, "tensor": pc.collective.tensor,
                             "bytes": pc.collective.nbytes, "group": pc.group, "seconds": pc.total,
                             "links": pc.links, "reason": pc.collective.reason} for pc in st.collectives],
            **({"optimizer_work": {f: {"compute_s": w.compute, "memory_s": w.memory, "time_s": w.time}
                                   for f, w in st.step_work.items()},
                "accumulation_s": dict(st.accumulation)} if st.step_work else {}),
        } for st in r.stages],
        "step": {f: {"overlapped_s": r.overlapped[f], "serial_s": r.serial[f],
                     **({"headroom": r.headroom(f)} if r.measured is not None else {})} for f in r.fidelities},
        **({"measured_s": r.measured} if r.measured is not None else {}),
        "assumptions": list(r.assumptions),
    }


__all__ = ["document", "render"]
