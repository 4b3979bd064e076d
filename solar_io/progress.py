"""Progress on stderr for steps that can take seconds, and the ``--quiet`` switch.

A step shows a transient spinner with its elapsed time on stderr, and only where stderr is a
terminal and ``--quiet`` is off: piped or redirected output never holds progress text, and
nothing is printed for a step that ends before ``delay`` seconds (2 s by default).

>>> with step("bounding g.yaml on h100-sxm"):
...     pass  # work; prints nothing here (a doctest's stderr is not a terminal)

Library code may call :func:`step` too; it never imports typer.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_QUIET = False

#: Seconds a step runs before its spinner appears.
DELAY_S = 2.0


def set_quiet(quiet: bool) -> None:
    """``--quiet``: no progress, and (the CLI's part) no warnings or notes on stderr."""
    global _QUIET
    _QUIET = quiet


def is_quiet() -> bool:
    return _QUIET


def enabled() -> bool:
    """Progress is drawn: stderr is a terminal and ``--quiet`` is off."""
    return not _QUIET and bool(getattr(sys.stderr, "isatty", lambda: False)())


@contextmanager
def step(description: str, delay: float = DELAY_S) -> Iterator[None]:
    """Show ``description`` with a spinner and elapsed time once the step has run ``delay`` seconds."""
    if not enabled():
        yield
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), transient=True,
                   console=Console(file=sys.stderr))
    bar.add_task(description, total=None)
    lock = threading.Lock()
    state = {"done": False, "shown": False}

    def show() -> None:
        with lock:
            if not state["done"]:
                bar.start()
                state["shown"] = True

    timer = threading.Timer(delay, show)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with lock:
            state["done"] = True
            if state["shown"]:
                bar.stop()


__all__ = ["DELAY_S", "enabled", "is_quiet", "set_quiet", "step"]
