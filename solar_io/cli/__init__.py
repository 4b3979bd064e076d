"""The ``solar-io`` command line: one module per command group; library packages never import typer.

``main`` (in ``main.py``) mounts ``capture`` (``capture.py``, definitions in ``capture_trace.py``),
``bound`` (``bound.py``), ``tiling``, ``sweep``, ``reorder``/``diff`` (``reorder_diff.py``),
``export``/``import`` (``export.py``), ``hw`` (``hardware.py``), ``measure``, ``check-bounds`` and
``report`` (``report.py``), and the file commands ``check``, ``fmt``, ``info``, ``migrate``.
"""

from .main import build_app, main


def __getattr__(name: str):  # noqa: ANN202 - PEP 562: ``app`` imports every command, so only when asked for
    if name == "app":
        import importlib

        return importlib.import_module(f"{__name__}.main").app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["app", "build_app", "main"]
