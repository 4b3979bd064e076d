"""One small task-execution engine for sweeps, folder captures and reports.

``run_tasks(fn, items)`` calls ``fn(item)`` for every item and streams a :class:`TaskResult` per
item as each completes (not in item order; ``index`` says which item it was). ``fn`` must be a
picklable top-level function of one argument and the items picklable.

Executors (:data:`EXECUTORS`):

``local``
    A pool of ``jobs`` worker processes (``forkserver`` start method where available, else
    ``spawn``: workers inherit no mutable state from the caller; numeric libraries use one thread
    in each, as in Ray's workers). With ``jobs=1`` and no timeout the tasks run in the calling
    process instead (no process start-up, nothing to pickle); a task that kills that process then
    ends the run, so give ``timeout_s`` or ``jobs>1`` for code that may crash its interpreter.
``ray``
    Ray tasks on the cluster at ``address`` (``ray.init(address=address)``), or on a local Ray
    instance started with ``jobs`` CPUs when Ray is not initialised and no address is given.
    At most ``jobs`` tasks are in flight (``jobs=None``: one per cluster CPU), so a task's time
    limit counts from about when it starts. Ray is imported only here (``pip install
    'solar-io[ray]'``); Ray's own task retries are off, the retries below apply to both executors.

Failures never stop the other tasks: a task that raises, runs past ``timeout_s`` (its worker
process is killed) or whose worker process dies is run again up to ``retries`` more times, then
reported with ``ok=False`` and the reason in ``error``. :func:`summarize_failures` turns the
failed results into one line each.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import re
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

from solar_io.errors import SolarIOError

__all__ = ["EXECUTORS", "ExecutorError", "TaskResult", "check_address", "run_tasks", "summarize_failures"]


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


# ---------------------------------------------------------------------------- running one task

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


class _Book:
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


# ---------------------------------------------------------------------------- local executor


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


def _run_inline(fn: Callable[[Any], Any], book: _Book) -> Iterator[TaskResult]:
    while book.pending:
        i = book.pending.popleft()
        r = book.settle(i, *call_task(fn, book.items[i]))
        if r is not None:
            yield r


def _run_local(fn: Callable[[Any], Any], book: _Book, jobs: int | None, address: str | None,
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


# ---------------------------------------------------------------------------- ray executor


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ExecutorError("the ray executor needs Ray: pip install 'solar-io[ray]'") from None
    return ray


def ray_task(paths: tuple[str, ...], payload: bytes) -> tuple[bool, Any, str | None, float]:
    """A Ray task: extend ``sys.path`` with the driver's (as multiprocessing's spawn does for the
    local pool, so functions of scripts and test modules import on local workers), unpickle
    ``(fn, item)`` and run it."""
    for p in paths:
        if p not in sys.path:
            sys.path.append(p)
    try:
        fn, item = pickle.loads(payload)
    except Exception as e:
        return False, None, f"cannot load the task on the worker: {describe_error(e)}", 0.0
    return call_task(fn, item)


_HOST_PORT = re.compile(r"\A\[?([A-Za-z0-9_.:\-]+?)\]?:([0-9]{1,5})\Z")


def check_address(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast with one line when a ``HOST:PORT`` Ray address accepts no connection (Ray itself
    retries for minutes); other forms (``auto``, ``ray://...``) are left to Ray."""
    import socket

    m = _HOST_PORT.match(address.strip())
    if m is None:
        return
    try:
        socket.create_connection((m.group(1), int(m.group(2))), timeout=timeout_s).close()
    except OSError as e:
        raise ExecutorError(f"--address {address}: cannot reach a Ray cluster there ({e.strerror or e}); start "
                            "one with 'ray start --head' and give its HOST:PORT (default port 6379)") from None


def _run_ray(fn: Callable[[Any], Any], book: _Book, jobs: int | None, address: str | None,
             timeout_s: float | None, preload: Sequence[str]) -> Iterator[TaskResult]:
    import logging

    ray = _import_ray()
    if not ray.is_initialized():
        try:
            if address is not None:
                check_address(address)
                ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
            else:
                ray.init(num_cpus=jobs, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
        except ExecutorError:
            raise
        except Exception as e:
            where = f"at {address}" if address else "locally"
            raise ExecutorError(f"cannot start or reach a Ray cluster {where}: {describe_error(e)}") from None
    cap = jobs or max(1, int(ray.cluster_resources().get("CPU", 1)))
    remote = ray.remote(num_cpus=1, max_retries=0)(ray_task)
    paths = tuple(sys.path)
    inflight: dict[Any, tuple[int, float]] = {}
    try:
        while book.pending or inflight:
            while book.pending and len(inflight) < cap:
                i = book.pending.popleft()
                try:
                    payload = pickle.dumps((fn, book.items[i]))
                except Exception as e:
                    r = book.settle(i, False, None, f"the task cannot be sent to a worker: {describe_error(e)}", 0.0)
                    if r is not None:
                        yield r
                    continue
                inflight[remote.remote(paths, payload)] = (i, time.perf_counter())
            limit = None
            if timeout_s is not None:
                limit = max(0.0, min(s for _, s in inflight.values()) + timeout_s - time.perf_counter())
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=limit)
            now = time.perf_counter()
            for ref in list(inflight):
                i, started = inflight[ref]
                if ref in ready:
                    try:
                        outcome = ray.get(ref)
                    except ray.exceptions.RayError as e:
                        outcome = (False, None, f"the Ray worker failed: {describe_error(e)}", now - started)
                elif timeout_s is not None and now - started >= timeout_s:
                    ray.cancel(ref, force=True)
                    outcome = (False, None, f"timed out after {timeout_s:g} s (Ray task cancelled)", now - started)
                else:
                    continue
                del inflight[ref]
                r = book.settle(i, *outcome)
                if r is not None:
                    yield r
    finally:
        for ref in inflight:
            ray.cancel(ref, force=True)


#: Executor name -> runner(fn, book, jobs, address, timeout_s, preload) yielding final results.
EXECUTORS: dict[str, Callable[..., Iterator[TaskResult]]] = {"local": _run_local, "ray": _run_ray}


# ---------------------------------------------------------------------------- the entry point


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
    book = _Book(list(items), retries)
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
