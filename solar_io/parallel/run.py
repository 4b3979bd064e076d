"""The entry point: :func:`run_tasks` on a named executor, with a progress bar; failures as lines.

>>> from operator import neg
>>> [(r.index, r.value) for r in run_tasks(neg, [1, 2], progress=False)]
[(0, -1), (1, -2)]
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from solar_io.parallel.local import run_local
from solar_io.parallel.on_ray import run_ray
from solar_io.parallel.tasks import Book, ExecutorError, TaskResult

#: Executor name -> runner(fn, book, jobs, address, timeout_s, preload) yielding final results.
EXECUTORS: dict[str, Callable[..., Iterator[TaskResult]]] = {"local": run_local, "ray": run_ray}


def run_tasks(fn: Callable[[Any], Any], items: Iterable[Any], *, jobs: int | None = 1, executor: str = "local",
              address: str | None = None, timeout_s: float | None = None, retries: int = 1,
              label: str | None = None, progress: bool = True, preload: Sequence[str] = ()) -> Iterator[TaskResult]:
    """Run ``fn(item)`` for every item on ``executor`` and stream one :class:`TaskResult` per item.

    ``jobs``: worker processes (local; None: one per CPU) or tasks in flight (ray; None: one per
    cluster CPU). ``timeout_s``: seconds a task may run before its worker is killed. ``retries``:
    further attempts after a failure. ``label``: the progress bar's text; the bar is drawn on
    stderr only when ``progress`` and stderr is a terminal. ``preload``: modules the local pool's
    fork server imports once before it forks the workers (e.g. ``torch``: each worker then starts
    without importing it; only the first pool of a process sets them; Ray ignores them).
    Raises :class:`ExecutorError` for an unknown executor, ``jobs < 1``, ``retries < 0`` or an
    unreachable cluster.
    """
    runner = EXECUTORS.get(executor)
    if runner is None:
        raise ExecutorError(f"--executor: unknown executor {executor!r}; use one of {', '.join(EXECUTORS)}")
    if jobs is not None and jobs < 1:
        raise ExecutorError(f"--jobs: must be at least 1, got {jobs}")
    if retries < 0:
        raise ExecutorError(f"retries: must be 0 or more, got {retries}")
    if timeout_s is not None and not timeout_s > 0:
        raise ExecutorError(f"--timeout: must be a positive number of seconds, got {timeout_s}")
    book = Book(list(items), retries)
    if not book.items:
        return
    stream = runner(fn, book, jobs, address, timeout_s, tuple(preload))
    if not (progress and sys.stderr.isatty()):
        yield from stream
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(file=sys.stderr), transient=True) as bar:
        task = bar.add_task(label or "running", total=len(book.items))
        for r in stream:
            bar.advance(task)
            yield r


def _item_text(item: Any) -> str:
    text = str(item)
    return text if len(text) <= 120 else text[:117] + "..."


def summarize_failures(results: Iterable[TaskResult]) -> list[str]:
    """One line per failed result, in item order: ``item: error (N attempts)``."""
    failed = sorted((r for r in results if not r.ok), key=lambda r: r.index)
    return [f"{_item_text(r.item)}: {r.error} ({r.attempts} attempt{'s' if r.attempts != 1 else ''})"
            for r in failed]
