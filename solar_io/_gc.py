"""Pausing Python's cyclic garbage collector around bulk construction of acyclic objects."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic collector while millions of small acyclic objects are built (its
    repeated full passes otherwise make loading a large graph superlinear)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
