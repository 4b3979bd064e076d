"""Process-wide mode of the IR runtime: tracing or executing, jit or not, dim overrides."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Mode:
    """``tracer``: the active Tracer (None: execute); ``jit``: numba or plain Python;
    ``sizes``: Dim sizes that override the program's defaults."""

    tracer: Any = None
    jit: bool = field(default_factory=lambda: os.environ.get("SOLAR_IO_LOOPIR_NO_JIT", "") in ("", "0"))
    sizes: dict[str, int] = field(default_factory=dict)


_MODE: ContextVar[Mode | None] = ContextVar("loopir_mode", default=None)
_DEFAULT = Mode()


def mode() -> Mode:
    return _MODE.get() or _DEFAULT


@contextmanager
def using(**changes: Any):
    """Run a block with some fields of the mode replaced."""
    cur = mode()
    token = _MODE.set(Mode(**{**cur.__dict__, **changes}))
    try:
        yield
    finally:
        _MODE.reset(token)


def call_site(depth: int = 2) -> str:
    """``file.py:LINE`` of the caller ``depth`` frames up (for messages and node locations)."""
    f = sys._getframe(depth)
    return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}"


def size(dim) -> int:
    """The size of ``dim`` (a Dim or its name) in the running capture: an override given to
    ``capture_file(sizes=...)``, else the Dim's declared size."""
    name = getattr(dim, "name", dim)
    n = mode().sizes.get(name, getattr(dim, "size", None))
    if n is None:
        from .ir import LoopIRError

        raise LoopIRError(f"dim {name} has no size; declare Dim('{name}', size)")
    return n
