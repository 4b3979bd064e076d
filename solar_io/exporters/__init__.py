"""Exporters of einsum graphs to accelerator-modelling tools, and the AccelForge importer.

- :mod:`.accelforge`: AccelForge workload YAML (``solar-io export accelforge``), with
  :mod:`.accelforge_arch` (a two-level architecture for ``--arch``) and
  :mod:`.accelforge_eval` (running AccelForge's mapper, Python >= 3.12).
- :mod:`.timeloop`: Timeloop v0.4 problem files and a LoopTree (fused) einsum list.
- :mod:`.accelforge_import`: AccelForge workload -> einsum graph (``solar-io import accelforge``).

Exporters read only a graph (the file), never a frontend; outputs are deterministic, written
atomically and stamped with solar-io's version and the source graph's SHA-256. Nodes a target
cannot express are skipped with a listed reason, or refused under ``--strict``.
"""

from .accelforge import export_accelforge
from .accelforge_import import import_accelforge
from .common import ExportError, ExportResult, write_exports
from .timeloop import export_timeloop

__all__ = ["ExportError", "ExportResult", "export_accelforge", "export_timeloop", "import_accelforge",
           "write_exports"]
