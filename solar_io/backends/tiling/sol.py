"""The cache-aware fidelity of a bound (``solar-io bound``, on by default; :mod:`solar_io.backends.bound`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from solar_io.hardware import HardwareSpec

from ..result import CacheAware, Fidelity, NodeBound, time_and_bottleneck
from ..roofline.model import BoundError
from ..traffic.graph import GraphTraffic
from .partition import cache_aware, capacity_of


def cache_aware_fidelity(gt: GraphTraffic, nodes: Sequence[NodeBound], spec: HardwareSpec,
                         capacity: float | None, bound: str, residency: bool, fused_time: float,
                         unfused_time: float, measured: float | None) -> tuple[Fidelity, CacheAware]:
    """The cache-aware fidelity of the graph of ``gt`` on ``spec`` (``nodes``: its priced rows) and
    its details (groups, tilings). ``capacity``: bytes on chip (None: the spec's on-chip levels)."""
    if bound not in ("ilp", "floor"):
        raise BoundError(f"--cache-bound: use ilp or floor, not {bound!r}")
    cap, source = capacity_of(spec, capacity)
    units = [{"matrix": n.matrix_time, "vector": n.vector_time, "special": n.special_time} for n in nodes]
    ca = cache_aware(gt.graph, gt.metrics, units, float(spec.dram_bandwidth), cap, fused_time,  # type: ignore[arg-type]
                     unfused_time,
                     bound=bound, capacity_source=source, residency=residency)
    bn = time_and_bottleneck(*(t for _, t in ca.unit_times), ca.memory)[1] if ca.time > 0 else None
    headroom = measured / ca.time if measured is not None and ca.time > 0 else None
    fid = Fidelity(name="cache-aware", computed=True, time=ca.time, compute_time=ca.compute, memory_time=ca.memory,
                   bytes=ca.traffic, unit_times=ca.unit_times, bottleneck=bn, headroom=headroom, note=note(ca))
    return fid, ca


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
    apart = [gr.nodes for gr in ca.groups if not gr.consecutive]
    if apart:
        shown = "; ".join("{" + ", ".join(nodes[:6]) + (", ..." if len(nodes) > 6 else "") + "}" for nodes in apart[:3])
        text += (f"; {len(apart)} group(s) are convex node sets that are not consecutive in the file's node order, "
                 f"run together by a reordered schedule ({shown}{' ...' if len(apart) > 3 else ''})")
    if ca.raised_to_fused:
        text += "; raised to the fused bound"
    return text


__all__ = ["cache_aware_fidelity", "note"]
