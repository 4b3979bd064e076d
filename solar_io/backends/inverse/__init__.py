"""Inverse roofline: what a chip needs to run the graph within a target time.

:func:`inverse_roofline` gives, per fidelity, every resource's requirement (definitions in
:mod:`.roofline`: unfused and fused; :mod:`.cache`: cache-aware; :mod:`.solve`: the one solver).
"""

from __future__ import annotations

import math

from ..result import Inverse, InverseFidelity, Report, Requirement
from .cache import cache_aware_inverse
from .roofline import fused_inverse, unfused_inverse


def inverse_roofline(report: Report, target: float, rate: float | None = None) -> Inverse:
    """The inverse roofline of ``report`` for the target latency ``target`` seconds (the cache-aware
    fidelity too when the report has it)."""
    if not (target > 0 and math.isfinite(target)):
        raise ValueError(f"target latency must be a positive number of seconds, got {target!r}")
    cache = cache_aware_inverse(report, target)
    return Inverse(target_latency=target, target_rate=rate,
                   fidelities=(unfused_inverse(report, target), fused_inverse(report, target))
                   + ((cache,) if cache is not None else ()))


__all__ = ["Inverse", "InverseFidelity", "Requirement", "inverse_roofline"]
