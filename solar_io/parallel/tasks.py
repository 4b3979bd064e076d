"""One task: its result, how an exception becomes one line, and the book of attempts and retries.

>>> call_task(int, "x")[:3]
(False, None, "ValueError: invalid literal for int() with base 10: 'x'")
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from solar_io.errors import SolarIOError


class ExecutorError(SolarIOError):
    """An executor that cannot run as asked (unknown name, Ray missing or unreachable, bad jobs)."""


@dataclass
class TaskResult:
    """The outcome of one task: ``value`` when ``ok``, else ``error`` (one line) and ``value`` None.

    ``attempts`` counts the runs (1 + retries used); ``seconds`` is the wall time of all of them.
    """

    index: int
    item: Any
    ok: bool
    value: Any
    error: str | None
    attempts: int
    seconds: float


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def describe_error(e: BaseException) -> str:
    """One line for an exception: a user error's own message, else ``Type: message``."""
    text = _ANSI.sub("", str(e)).strip()
    text = text.splitlines()[0] if text else ""
    if isinstance(e, SolarIOError):
        return text[:500] or type(e).__name__
    return f"{type(e).__name__}: {text[:500]}" if text else type(e).__name__


def call_task(fn: Callable[[Any], Any], item: Any) -> tuple[bool, Any, str | None, float]:
    """``(ok, value, error, seconds)`` of ``fn(item)``; an exception becomes ``ok=False``."""
    start = time.perf_counter()
    try:
        value = fn(item)
    except (Exception, SystemExit) as e:
        return False, None, describe_error(e), time.perf_counter() - start
    return True, value, None, time.perf_counter() - start


class Book:
    """Attempts and time per task; decides between a retry and a final result."""

    def __init__(self, items: list[Any], retries: int) -> None:
        self.items = items
        self.retries = retries
        self.attempts = [0] * len(items)
        self.seconds = [0.0] * len(items)
        self.pending: deque[int] = deque(range(len(items)))

    def settle(self, i: int, ok: bool, value: Any, error: str | None, seconds: float) -> TaskResult | None:
        """Record one attempt of task ``i``: its final result, or None when it is queued again."""
        self.attempts[i] += 1
        self.seconds[i] += seconds
        if not ok and self.attempts[i] <= self.retries:
            self.pending.appendleft(i)
            return None
        return TaskResult(i, self.items[i], ok, value if ok else None, None if ok else error, self.attempts[i],
                          self.seconds[i])
