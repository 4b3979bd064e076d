"""SOL reports as documents: the ``solar-io.sol-report`` format (YAML or JSON).

The structure is ``schema/sol-report-v1.schema.json`` (every field described there). One document
holds one report per chip (``reports``) and, for several chips, a ``comparison`` list. Numbers are
SI: seconds (``*_s``), FLOP/s or bytes/s (``rate``), bytes, Hz. A figure that does not exist (a
fidelity not computed, a headroom without a measurement) is null, never a made-up number.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...format.yamltext import emit

if TYPE_CHECKING:  # annotations only: Report._repr_html_ renders through this module (no import cycle)
    from ..result import Fidelity, Inverse, InverseFidelity, NodeBound, Report

FORMAT_NAME = "solar-io.sol-report"
FORMAT_VERSION = "1.2"  # 1.1: cache-aware inverse roofline, comparison columns, fallbacks; 1.2: precision, clock,
#                         cache-aware groups' floor_ratio and achieved


def _fidelity(f: Fidelity) -> dict[str, Any]:
    return {
        "status": "computed" if f.computed else "not computed",
        "time_s": f.time,
        "compute_s": f.compute_time,
        "memory_s": f.memory_time,
        "bytes": f.bytes,
        "unit_s": dict(f.unit_times) if f.computed else None,
        "time_by_bottleneck_s": dict(f.time_by_bottleneck) if f.name == "unfused" and f.computed else None,
        "bottleneck": f.bottleneck,
        "headroom": f.headroom,
        "note": f.note,
    }


def _node(n: NodeBound) -> dict[str, Any]:
    return {
        "name": n.name,
        "kind": n.kind,
        "op": n.op,
        "compute_dtype": n.compute_dtype,
        "compute_known": n.compute_known,
        "macs": n.macs,
        "flops_matrix": n.flops_matrix,
        "flops_vector": n.flops_vector,
        "transcendental": n.transcendental,
        "effectual_fraction": n.effectual_fraction,
        "bytes": n.bytes,
        "dram_bytes": n.dram_bytes,
        "bytes_exact": n.bytes_exact,
        "intensity": n.intensity,
        "loads": [{"resource": ld.resource, "work": ld.work, "time_s": ld.time} for ld in n.loads],
        "unpriced": list(n.unpriced),
        "matrix_s": n.matrix_time,
        "vector_s": n.vector_time,
        "special_s": n.special_time,
        "compute_s": n.compute_time,
        "memory_s": n.memory_time,
        "sol_s": n.time,
        "bottleneck": n.bottleneck,
        "precision": n.precision,
    }


def _precision(r: Report) -> dict[str, Any] | None:
    p = r.precision
    if p is None:
        return None
    return {"policy": p.policy, "fp32_tf32": p.tf32, "fp32_half": p.half, "dequant": p.dequant,
            "repriced": [{"rule": x.rule, "nodes": list(x.nodes), "scales": list(x.scales), "folded": x.folded,
                          "text": x.describe()} for x in p.repriced]}


def _inverse_fidelity(f: InverseFidelity | None) -> dict[str, Any] | None:
    if f is None:
        return None
    return {
        "chip_time_s": f.chip_time,
        "feasible": f.feasible,
        "chip_scale": f.chip_scale,
        "requirements": [{
            "resource": r.resource, "unit": r.unit, "dtype": r.dtype, "chip_rate": r.chip, "work": r.work,
            "any_chip_rate": r.any_chip, "any_chip_ratio": r.any_chip_ratio,
            "with_chip_rest_rate": r.with_chip_rest, "with_chip_rest_ratio": r.with_chip_rest_ratio,
            "binding": r.binding,
        } for r in f.requirements],
    }


def _inverse(inv: Inverse | None) -> dict[str, Any] | None:
    if inv is None:
        return None
    return {
        "target_latency_s": inv.target_latency,
        "target_rate_hz": inv.target_rate,
        "fidelities": {
            "unfused": _inverse_fidelity(inv.fidelity("unfused")),
            "fused": _inverse_fidelity(inv.fidelity("fused")),
            "cache_aware": _inverse_fidelity(inv.fidelity("cache-aware")),
        },
    }


def _cache(r: Report) -> dict[str, Any] | None:
    c = r.cache
    if c is None:
        return None
    return {
        "capacity": None if c.capacity == float("inf") else c.capacity,
        "capacity_source": c.capacity_source,
        "bound": c.bound,
        "vs_unfused": c.vs_unfused,
        "raised_to_fused": c.raised_to_fused,
        "groups": [{"nodes": list(gr.nodes), "kind": gr.kind, "traffic": gr.traffic, "floor": gr.floor,
                    "avoided": gr.avoided, "compute_s": gr.compute, "time_s": gr.time, "detail": gr.detail,
                    "fallback": gr.fallback, "resident": gr.resident, "floor_ratio": gr.floor_ratio,
                    "achieved": gr.achieved, "consecutive": gr.consecutive}
                   for gr in c.groups],
        "fallbacks": list(c.fallbacks),
        "distinct_einsum_ilps": c.ilps_solved,
        "distinct_chain_ilps": c.chain_ilps,
    }


def report_dict(r: Report, top: int | None = None) -> dict[str, Any]:
    """One report as a mapping of the schema's ``report`` definition (``top`` nodes, all when None)."""
    shown = r.top(top)
    return {
        "hardware": {"name": r.hardware, "full_name": r.hardware_full_name, "dram_bandwidth": r.dram_bandwidth},
        "options": {"allow_tf32": r.options.allow_tf32, "dtype": r.options.dtype,
                    "compute_dtype": dict(r.options.compute_dtype) or None, "strict_fp32": r.options.strict_fp32,
                    "strict_dequant": r.options.strict_dequant, "clock_hz": r.options.clock_hz},
        "precision": _precision(r),
        "totals": {"nodes": r.totals.nodes, "macs": r.totals.macs, "flops_matrix": r.totals.flops_matrix,
                   "flops_vector": r.totals.flops_vector, "transcendental": r.totals.transcendental,
                   "bytes": r.totals.bytes, "boundary_bytes": r.totals.boundary_bytes},
        "fidelities": {"unfused": _fidelity(r.unfused), "fused": _fidelity(r.fused),
                       "cache_aware": _fidelity(r.cache_aware)},
        "fusion_gain": r.fusion_gain,
        "measured_s": r.measured,
        "compute_complete": r.compute_complete,
        "opaque_nodes": list(r.opaque),
        "unpriced": [{"node": n, "work": w} for n, w in r.unpriced],
        "notes": list(r.notes),
        "resources": [{"resource": x.key, "unit": x.unit, "dtype": x.dtype, "rate": x.rate,
                       "work_unfused": x.work_unfused, "work_fused": x.work_fused} for x in r.resources],
        "nodes_shown": len(shown),
        "nodes": [_node(n) for n in shown],
        "inverse": _inverse(r.inverse),
        "cache_aware": _cache(r),
    }


def comparison(reports: Sequence[Report]) -> list[dict[str, Any]]:
    """One row per chip: the headline numbers side by side."""
    rows = []
    for r in reports:
        inv = r.inverse
        ca = r.cache_aware if r.cache_aware.computed else None
        cinv = inv.fidelity("cache-aware") if inv else None
        rows.append({
            "hardware": r.hardware,
            "unfused_s": r.unfused.time,
            "fused_s": r.fused.time,
            "fusion_gain": r.fusion_gain,
            "unfused_bottleneck": r.unfused.bottleneck,
            "fused_bottleneck": r.fused.bottleneck,
            "headroom_unfused": r.unfused.headroom,
            "headroom_fused": r.fused.headroom,
            "chip_scale_unfused": inv.fidelity("unfused").chip_scale if inv else None,
            "chip_scale_fused": inv.fidelity("fused").chip_scale if inv else None,
            "cache_aware_s": ca.time if ca else None,
            "cache_aware_bottleneck": ca.bottleneck if ca else None,
            "headroom_cache_aware": ca.headroom if ca else None,
            "chip_scale_cache_aware": cinv.chip_scale if cinv else None,
        })
    return rows


def document(reports: Sequence[Report], top: int | None = None) -> dict[str, Any]:
    """The whole ``solar-io.sol-report`` document for one or more chips."""
    if not reports:
        raise ValueError("a SOL report document needs at least one report")
    first = reports[0]
    doc: dict[str, Any] = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "graph": {"name": first.graph, "nodes": first.totals.nodes},
        "reports": [report_dict(r, top) for r in reports],
    }
    if len(reports) > 1:
        doc["comparison"] = comparison(reports)
    return doc


def to_yaml(reports: Sequence[Report], top: int | None = None) -> str:
    """The document as canonical YAML (solar-io's deterministic emitter)."""
    return emit(document(reports, top))


def to_json(reports: Sequence[Report], top: int | None = None) -> str:
    """The document as JSON (two-space indentation, key order as in the schema)."""
    return json.dumps(document(reports, top), indent=2, allow_nan=False) + "\n"


__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "comparison", "document", "report_dict", "to_json", "to_yaml"]
