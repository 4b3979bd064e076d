"""The roofline backend: unfused and fused speed-of-light bounds, headroom, inverse roofline.

``bound(graph, hw)`` returns a :class:`Report`; ``bound_many`` projects one graph on several chips;
:mod:`.report` writes the ``solar-io.sol-report`` document (YAML/JSON), :mod:`.table` the tables;
:mod:`.model` decides which peak each node's work runs at; :mod:`.inverse` the inverse roofline.
"""

from .bounds import (
    Fidelity,
    Load,
    NodeBound,
    Options,
    Report,
    Resource,
    Totals,
    bound,
    bound_many,
    cast_graph,
)
from .inverse import Inverse, InverseFidelity, Requirement, inverse_roofline
from .model import BoundError, PeakModel, Plan, Route, compute_class, parse_compute_dtype
from .report import document, to_json, to_yaml
from .units import parse_rate, parse_time

__all__ = [
    "BoundError", "Fidelity", "Inverse", "InverseFidelity", "Load", "NodeBound", "Options", "PeakModel", "Plan",
    "Report", "Requirement", "Resource", "Route", "Totals", "bound", "bound_many", "cast_graph", "compute_class",
    "document", "inverse_roofline", "parse_compute_dtype", "parse_rate", "parse_time", "to_json", "to_yaml",
]
