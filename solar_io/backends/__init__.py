"""Backends: bounds computed from an einsum graph and a hardware spec.

``roofline``: unfused and fused speed-of-light bounds, headroom and the inverse roofline.
"""

from .roofline import BoundError, Report, bound, bound_many

__all__ = ["BoundError", "Report", "bound", "bound_many"]
