"""The roofline backend: unfused and fused speed-of-light bounds and how work meets the chip's peaks.

:mod:`.bounds` prices every node and builds the unfused and fused fidelities; :mod:`.kernel_bound`
merges the nodes of one kernel; :mod:`.model` decides which peak each node's work runs at;
:mod:`.precision` the precision policy; :mod:`.clock` a chip at another clock; :mod:`.report`
writes the ``solar-io.sol-report`` document (YAML/JSON), :mod:`.table` the tables. The pipeline
(``bound``, ``bound_many``) is :mod:`solar_io.backends.bound`, re-exported here on first use (it
imports this package's modules); the inverse roofline is :mod:`solar_io.backends.inverse`.
"""

from __future__ import annotations

import importlib

from solar_io.units import parse_rate, parse_time

from ..inverse import Inverse, InverseFidelity, Requirement, inverse_roofline
from ..result import Fidelity, Load, NodeBound, Options, Report, Resource, Totals
from .model import BoundError, PeakModel, Plan, Route, compute_class, parse_compute_dtype
from .report import document, to_json, to_yaml

_PIPELINE = ("bound", "bound_many", "cast_graph")


def __getattr__(name: str):  # noqa: ANN202 - PEP 562: the pipeline imports this package's modules
    if name in _PIPELINE:
        return getattr(importlib.import_module("solar_io.backends.bound"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BoundError", "Fidelity", "Inverse", "InverseFidelity", "Load", "NodeBound", "Options", "PeakModel", "Plan",
    "Report", "Requirement", "Resource", "Route", "Totals", "bound", "bound_many", "cast_graph", "compute_class",
    "document", "inverse_roofline", "parse_compute_dtype", "parse_rate", "parse_time", "to_json", "to_yaml",
]
