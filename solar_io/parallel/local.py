"""The local executor: a pool of worker processes (forkserver, else spawn), or the calling process.

A worker runs ``(index, fn, item)`` messages from its pipe; a task that runs past its time limit or
kills its interpreter costs that worker, which is replaced. See :mod:`solar_io.parallel`.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import wait
from typing import Any

from solar_io.parallel.tasks import Book, ExecutorError, TaskResult, call_task, describe_error

_THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")


def _one_thread() -> None:
    """Numeric libraries use one thread in a pool worker (as in Ray's workers): the pool's
    parallelism is its processes, and per-process thread pools would oversubscribe the cores."""
    for var in _THREAD_ENV:
        os.environ.setdefault(var, "1")
    torch = sys.modules.get("torch")  # already imported by a fork-server preload: resize its pool
    if torch is not None and hasattr(torch, "set_num_threads"):
        torch.set_num_threads(1)


def _worker_main(conn: Any) -> None:
    """A pool worker: run ``(index, fn, item)`` messages until it receives None."""
    _one_thread()
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        index, fn, item = msg
        result = call_task(fn, item)
        try:
            conn.send((index, result))
        except Exception as e:  # an unpicklable value: report it instead of dying
            conn.send((index, (False, None, f"the result cannot be sent back: {describe_error(e)}", result[3])))


class _Worker:
    """One pool process with its pipe and the task it is running (index, start time)."""

    def __init__(self, ctx: Any) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.task: tuple[int, float] | None = None

    def stop(self, kill: bool = False) -> None:
        """End the process (politely unless ``kill``) and close the pipe."""
        if not kill:
            try:
                self.conn.send(None)
            except OSError:
                kill = True
            self.proc.join(timeout=2.0)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()


def _context(preload: Sequence[str]) -> Any:
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    if preload:  # takes effect when the fork server starts (once per process)
        ctx.set_forkserver_preload(["__main__", *preload])
    return ctx


def _run_inline(fn: Callable[[Any], Any], book: Book) -> Iterator[TaskResult]:
    while book.pending:
        i = book.pending.popleft()
        r = book.settle(i, *call_task(fn, book.items[i]))
        if r is not None:
            yield r


def run_local(fn: Callable[[Any], Any], book: Book, jobs: int | None, address: str | None,
               timeout_s: float | None, preload: Sequence[str]) -> Iterator[TaskResult]:
    if address is not None:
        raise ExecutorError("--address is for the ray executor; the local executor runs on this machine")
    jobs = jobs or mp.cpu_count()
    if jobs == 1 and timeout_s is None:
        yield from _run_inline(fn, book)
        return
    ctx = _context(preload)
    workers = [_Worker(ctx) for _ in range(min(jobs, len(book.items)))]
    try:
        while book.pending or any(w.task for w in workers):
            for k, w in enumerate(workers):
                if w.task is None and not w.proc.is_alive():  # died while idle: start a fresh one
                    w.stop(kill=True)
                    workers[k] = w = _Worker(ctx)
                if w.task is None and book.pending:
                    i = book.pending.popleft()
                    w.task = (i, time.perf_counter())
                    try:
                        w.conn.send((i, fn, book.items[i]))
                    except Exception as e:  # an unpicklable item, or a worker already gone
                        w.task = None
                        r = book.settle(i, False, None, f"the task cannot be sent to a worker: {describe_error(e)}",
                                        0.0)
                        if r is not None:
                            yield r
            busy = [w for w in workers if w.task is not None]
            if not busy:
                continue
            limit = None
            if timeout_s is not None:
                limit = max(0.0, min(w.task[1] + timeout_s for w in busy) - time.perf_counter())  # type: ignore[index]
            ready = set(wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=limit))
            now = time.perf_counter()
            for k, w in enumerate(workers):
                if w.task is None:
                    continue
                i, started = w.task
                outcome: tuple[bool, Any, str | None, float] | None = None
                replace_worker = False
                if w.conn in ready or w.proc.sentinel in ready:
                    try:
                        if w.conn.poll():
                            _, outcome = w.conn.recv()
                    except (EOFError, OSError):
                        outcome = None
                    if outcome is not None:
                        replace_worker = not w.proc.is_alive()  # it sent its result, then exited
                    else:
                        w.proc.join(timeout=1.0)
                        outcome = (False, None, f"the worker process died (exit code {w.proc.exitcode})",
                                   now - started)
                        replace_worker = True
                elif timeout_s is not None and now - started >= timeout_s:
                    outcome = (False, None, f"timed out after {timeout_s:g} s (worker killed)", now - started)
                    replace_worker = True
                if outcome is None:
                    continue
                w.task = None
                if replace_worker:
                    w.stop(kill=True)
                    workers[k] = _Worker(ctx)
                r = book.settle(i, *outcome)
                if r is not None:
                    yield r
    finally:
        for w in workers:
            w.stop(kill=w.task is not None)
