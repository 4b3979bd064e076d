"""Which frontend captures a source file, and capturing it: the library entry for dse, measure and the CLI.

The frontend is picked from the file's imports, read from its parsed module (``import torch`` or
``import os, torch`` -> torch, ``solar_io.frontends.loopir`` -> loopir, ``jax``/``flax`` -> jax)
unless a frontend is named; each frontend package exposes
``capture_file(path, *, validate, strict, **options) -> Graph``.

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "m.py"; _ = p.write_text("import os, torch\\n")
>>> detect_frontend(p)
'torch'
"""

from __future__ import annotations

import importlib
from pathlib import Path

from ..errors import SolarIOError
from ..graph import Graph
from .common.errors import CaptureError
from .common.imports import imported

FRONTENDS = ("torch", "loopir", "jax", "agent")
#: the first of these whose package a file imports decides its frontend.
_PACKAGES = (("loopir", ("solar_io.frontends.loopir",)), ("jax", ("jax", "flax")), ("torch", ("torch",)))
#: options only loop-IR programs take, with the flag that sets each.
LOOPIR_ONLY = {"jit": "--no-jit", "sizes": "--sizes", "validate_sizes": "--validate-sizes"}


def detect_frontend(path: Path) -> str:
    """The frontend a source file needs, from the imports of its parsed module."""
    from ..format.yamltext import YamlError, max_bytes, read_limited

    try:
        text = read_limited(path, max_bytes()).decode("utf-8", errors="replace")  # capture /dev/zero: one line
    except YamlError as e:
        raise CaptureError(f"{path}: {e}") from None
    except OSError as e:
        raise CaptureError(f"{path}: cannot read: {e.strerror or e}") from None
    names = imported(text)
    for name, packages in _PACKAGES:
        if any(p in names for p in packages):
            return name
    raise CaptureError(f"{path}: cannot tell the frontend from its imports (no torch, jax or loopir import); "
                       "give --frontend")


def frontend_module(name: str):  # noqa: ANN201
    """The frontend package ``solar_io.frontends.<name>`` (CaptureError if unavailable)."""
    if name not in FRONTENDS:
        raise CaptureError(f"unknown frontend {name!r}; choose one of {', '.join(FRONTENDS)}")
    try:
        mod = importlib.import_module(f"solar_io.frontends.{name}")
    except ImportError as e:
        raise CaptureError(f"frontend {name} is not available: {e} (install solar-io[{name}])") from None
    if not hasattr(mod, "capture_file"):
        raise CaptureError(f"frontend {name} is not available yet")
    return mod


def capture(path: Path, frontend: str | None = None, **options) -> Graph:
    """Capture one source file through ``frontend`` (default: detected from its imports).

    ``options`` are the frontend's ``capture_file`` keywords; ``agent_fallback=True`` hands opaque
    ops to the agent. Errors a user can cause are SolarIOError with one line naming the file."""
    name = frontend or detect_frontend(path)
    misplaced = [flag for key, flag in LOOPIR_ONLY.items() if key in options and name != "loopir"]
    if misplaced:
        raise CaptureError(f"{path.name}: {misplaced[0]} applies to loop-IR programs only (this is a {name} "
                           "source)")
    mod = frontend_module(name)
    if options.get("agent_fallback"):  # before any work: translated ops run only in the jail (or --unsafe-exec)
        from .agent.sandbox import require_jail

        require_jail(bool(options.get("unsafe_exec")))
    try:
        g = mod.capture_file(path, **options)
        if options.get("agent_fallback") and any(n.kind == "opaque" for n in g.nodes):
            from .agent.fallback import resolve_opaque

            g = resolve_opaque(g, path, model=options.get("model"), max_attempts=options.get("max_attempts", 5),
                               no_cache=bool(options.get("no_cache")), seed=options.get("seed", 0),
                               unsafe_exec=bool(options.get("unsafe_exec"))).graph
        return g
    except SolarIOError:
        raise
    except Exception as e:
        raise CaptureError(f"{path.name}: capture failed: {type(e).__name__}: {str(e)[:300]}") from e
