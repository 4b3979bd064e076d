"""Backends: bounds computed from an einsum graph and a hardware spec (map: ``README.md`` here).

:mod:`.bound` is the pipeline (``bound``, ``bound_many``): :mod:`.traffic` (bytes, views, residency,
kernels: built once per graph) -> :mod:`.roofline` (unfused, fused) -> :mod:`.tiling` (cache-aware)
-> the :class:`~.result.Report` -> :mod:`.inverse` (inverse roofline).
"""

from .bound import bound, bound_many
from .result import Report
from .roofline.model import BoundError

__all__ = ["BoundError", "Report", "bound", "bound_many"]
