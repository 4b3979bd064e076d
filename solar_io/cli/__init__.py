"""The ``solar-io`` command line: one module per command group; library packages never import typer.

``main`` (in ``main.py``) mounts ``capture`` (``capture.py``, definitions in ``capture_trace.py``),
``bound`` (``bound.py``), ``tiling``, ``sweep``, ``reorder``/``diff`` (``reorder_diff.py``),
``export``/``import`` (``export.py``), ``hw`` (``hardware.py``), ``measure``, ``check-bounds`` and
``report`` (``report.py``), and the file commands ``check``, ``fmt``, ``info``, ``migrate``.
"""

from .main import app, main

__all__ = ["app", "main"]
