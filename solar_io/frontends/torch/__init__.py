"""The PyTorch frontend: ``capture_file(path)`` turns a model file into a validated einsum graph.

The only part of solar-io that imports torch. See ``capture`` (pipeline), ``lower`` and
``registry`` (one rule per ATen op, in ``rules/``), ``check`` (whole-graph validation).
"""

from __future__ import annotations

from .capture import DEFAULT_BUDGET, Capture, capture_file, capture_source

NAME = "torch"

__all__ = ["Capture", "DEFAULT_BUDGET", "NAME", "capture_file", "capture_source"]
