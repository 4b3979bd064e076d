"""Fill the cache-aware fidelity of a roofline :class:`Report` (``solar-io bound --cache-aware``)."""

from __future__ import annotations

import math
from dataclasses import replace

from solar_io.backends.roofline.model import BoundError
from solar_io.backends.roofline.result import Fidelity, Report
from solar_io.backends.roofline.units import parse_bytes
from solar_io.graph import Graph
from solar_io.hardware import HardwareSpec
from solar_io.metrics import GraphMetrics

from .partition import CacheAware, cache_aware, capacity_of


def with_cache_aware(r: Report, g: Graph, gm: GraphMetrics, spec: HardwareSpec, capacity: float | str | None,
                     bound: str = "ilp", residency: bool = True) -> Report:
    """``r`` with its cache-aware fidelity computed (and the details in ``r.cache``)."""
    if bound not in ("ilp", "floor"):
        raise BoundError(f"--cache-bound: use ilp or floor, not {bound!r}")
    cap, source = capacity_of(spec, parse_bytes(capacity))
    units = [{"matrix": n.matrix_time, "vector": n.vector_time, "special": n.special_time} for n in r.nodes]
    ca = cache_aware(g, gm, units, r.dram_bandwidth, cap, r.fused.time or 0.0, r.unfused.time or 0.0, bound=bound,
                     capacity_source=source, residency=residency)
    terms = (*ca.unit_times, ("memory", ca.memory))
    bn = max(terms, key=lambda kv: kv[1])[0] if ca.time > 0 else None
    headroom = r.measured / ca.time if r.measured is not None and ca.time > 0 else None
    fid = Fidelity("cache-aware", True, ca.time, ca.compute, ca.memory, ca.traffic, ca.unit_times, (), bn, headroom,
                   note(ca))
    return replace(r, cache_aware=fid, cache=ca)


def note(ca: CacheAware) -> str:
    """One sentence: what the cache-aware figure is and which bound it uses."""
    how = ("the larger of the provable floor and the tiling relaxation (at most the traffic of every grid tiling "
           "of any integer tile sizes and loop order, and of every chain tile of a fused group)"
           if ca.bound == "ilp" else "the provable floor (compulsory, Smith matmul, HBL)")
    cap = "unlimited" if math.isinf(ca.capacity) else f"{ca.capacity:.6g} B"
    text = (f"on-chip capacity S = {cap} ({ca.capacity_source}); sum over {len(ca.groups)} group(s) of "
            f"max(compute, Q(S) / DRAM bandwidth) with Q(S) from {how}; {ca.vs_unfused} the unfused bound")
    if ca.fallbacks:
        text += (f"; {len(ca.fallbacks)} group(s) use their provable floor: their ILP reached its time limit "
                 f"({', '.join(ca.fallbacks[:5])}{' ...' if len(ca.fallbacks) > 5 else ''})")
    if ca.raised_to_fused:
        text += "; raised to the fused bound"
    return text


__all__ = ["parse_bytes", "with_cache_aware"]
