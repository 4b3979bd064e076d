"""Running a user's model code: a time limit, and exits or interrupts raised by it as capture errors.

``capture`` runs the code in a model file (its module body, ``get_inputs``, the forward pass).
:func:`user_code` wraps that run so that

- a model that never ends (``while True``) stops after ``timeout`` seconds with one
  :class:`CaptureError` line, and a folder capture goes on to the next file: a SIGALRM timer
  raises :class:`Expired` (a ``BaseException``, so the model's own ``except Exception`` does not
  swallow it) in the main thread; if the run has not stopped ``GRACE`` seconds later (stuck in
  native code, or swallowing it), a watchdog thread prints the line and ends the process (exit 124);
- ``sys.exit(0)`` or ``raise KeyboardInterrupt`` in the model is a capture error, not a silent
  exit 0 with no file; Ctrl-C pressed by the user still interrupts as usual.

>>> with user_code("m.py", timeout=5):
...     x = sum(range(10))
>>> try:
...     with user_code("m.py"):
...         raise SystemExit(0)
... except CaptureError as e:
...     print(e)
m.py: the model called sys.exit(0) during capture (a capture must return to solar-io)
"""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import CaptureError

#: The default time limit of one capture (one model file, or one workload of a definition).
DEFAULT_TIMEOUT_S = 30 * 60.0
#: Seconds after the limit before the watchdog ends a process the timer could not stop.
GRACE_S = 30.0


class Expired(BaseException):  # noqa: N818 - a signal, like KeyboardInterrupt, not an error class
    """The time limit of a capture passed (raised into the running model code by the timer)."""


def parse_timeout(value: float | None, option: str = "--timeout") -> float | None:
    """Seconds > 0 and finite, or None (``0`` means no limit); CaptureError naming ``option`` otherwise.

    >>> parse_timeout(60.0), parse_timeout(0)
    (60.0, None)
    """
    if value is None or value == 0:
        return None
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise CaptureError(f"{option}: must be a positive, finite number of seconds (0: no limit), got {value!r}")
    return float(value)


def _duration(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def _forget_half_imported() -> None:
    """Drop modules whose import the timer cut short from ``sys.modules`` (importlib marks them
    ``__spec__._initializing``), so the next capture imports them afresh instead of failing on a
    partially initialised module."""
    for name, mod in list(sys.modules.items()):
        if getattr(getattr(mod, "__spec__", None), "_initializing", False):
            sys.modules.pop(name, None)


@contextmanager
def user_code(what: str, timeout: float | None = DEFAULT_TIMEOUT_S) -> Iterator[None]:
    """Run the ``with`` body (a capture) under a time limit of ``timeout`` seconds (None: none),
    turning a timeout, ``SystemExit`` and a ``KeyboardInterrupt`` the code raised into one-line
    :class:`CaptureError` s that name ``what`` (the file). The timer needs the main thread; in
    another thread only the watchdog limits the run."""
    main = threading.current_thread() is threading.main_thread()
    state = {"active": True, "interrupted": False}
    old_int = old_alarm = None
    outer = started = 0.0
    done = threading.Event()
    if main:
        def on_interrupt(signum, frame):  # noqa: ANN001, ANN202 - Ctrl-C by the user: stop everything
            state["interrupted"] = True
            raise KeyboardInterrupt

        def on_alarm(signum, frame):  # noqa: ANN001, ANN202
            if state["active"]:
                raise Expired

        old_int = signal.signal(signal.SIGINT, on_interrupt)
        if timeout is not None:
            old_alarm = signal.signal(signal.SIGALRM, on_alarm)
            outer, _ = signal.setitimer(signal.ITIMER_REAL, timeout)  # an enclosing limit's time left, or 0
            started = time.monotonic()
    if timeout is not None:
        def watch() -> None:
            if not done.wait(timeout + GRACE_S):
                print(f"error: {what}: capture did not stop within {GRACE_S:g} s of its {_duration(timeout)} time "
                      "limit (--timeout); solar-io ended it", file=sys.stderr, flush=True)
                os._exit(124)

        threading.Thread(target=watch, name="solar-io capture watchdog", daemon=True).start()
    try:
        yield
    except Expired:
        _forget_half_imported()
        raise CaptureError(f"{what}: capture timed out after {_duration(timeout or 0)} (--timeout; does the model "
                           "loop forever?)") from None
    except SystemExit as e:
        raise CaptureError(f"{what}: the model called sys.exit({e.code!r}) during capture (a capture must return "
                           "to solar-io)") from None
    except KeyboardInterrupt:
        if state["interrupted"]:
            raise
        raise CaptureError(f"{what}: the model raised KeyboardInterrupt during capture") from None
    finally:
        state["active"] = False
        done.set()
        if main:
            if timeout is not None:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, signal.SIG_DFL if old_alarm is None else old_alarm)
                if outer > 0:  # nested: the enclosing limit runs on
                    signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 1e-3))
            signal.signal(signal.SIGINT, signal.SIG_DFL if old_int is None else old_int)


__all__ = ["DEFAULT_TIMEOUT_S", "GRACE_S", "Expired", "parse_timeout", "user_code"]
