"""The Ray executor: tasks on a Ray cluster (or a local Ray instance), at most ``jobs`` in flight.

Ray is imported only here (``pip install 'solar-io[ray]'``); Ray's own retries are off, the
:class:`~solar_io.parallel.tasks.Book` retries apply. See :mod:`solar_io.parallel`.
"""

from __future__ import annotations

import pickle
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from solar_io.parallel.tasks import Book, ExecutorError, TaskResult, call_task, describe_error


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


def run_ray(fn: Callable[[Any], Any], book: Book, jobs: int | None, address: str | None,
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
