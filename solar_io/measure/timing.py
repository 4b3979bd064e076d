"""Repeated timing of one callable: warm-up, timed runs, cache flush between runs, statistics.

A SOL bound assumes every operand starts in DRAM, so by default the last-level cache is flushed
before each timed run by writing a buffer several times its size (:class:`CacheFlusher`); the
flush itself is not timed. ``Timing`` keeps every sample so reports can quote median, minimum
and inter-quartile range; a bound check compares against the minimum (the fastest run any
observer saw is the one a lower bound must not exceed).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

FLUSH_FACTOR = 4  # the flush buffer is this many times the last-level cache
DEFAULT_LLC = 64 << 20  # used when the cache size cannot be read (larger is safer)


@dataclass(frozen=True)
class Timing:
    """Seconds of ``len(samples)`` timed runs and how they were taken."""

    samples: tuple[float, ...]
    warmup: int
    clock: str  # "perf_counter_ns" or "cuda-events"
    device: str
    threads: int | None
    flushed_bytes: int  # 0 when --warm (no flush between runs)
    notes: tuple[str, ...] = field(default=())

    @property
    def warm(self) -> bool:
        """True when the cache was not flushed between runs."""
        return self.flushed_bytes == 0

    @property
    def median(self) -> float:
        return float(np.median(self.samples))

    @property
    def min(self) -> float:
        return float(min(self.samples))

    @property
    def iqr(self) -> float:
        q1, q3 = np.percentile(self.samples, [25, 75])
        return float(q3 - q1)

    def as_dict(self) -> dict:
        """Plain data for YAML/JSON reports (seconds)."""
        return {"median": self.median, "min": self.min, "iqr": self.iqr, "runs": len(self.samples),
                "warmup": self.warmup, "clock": self.clock, "device": self.device, "threads": self.threads,
                "cache": "warm" if self.warm else f"flushed ({self.flushed_bytes} bytes written between runs)",
                "notes": list(self.notes)}


def last_level_cache_bytes(root: Path = Path("/")) -> int | None:
    """The largest cache of this process's CPUs, all its instances together (the bytes a flush
    must displace), from ``root``'s /sys as the hardware probe reads it; None when unreadable."""
    from ..hardware.cpuinfo import read_cpu_facts

    try:
        caches = read_cpu_facts(root).caches
    except (OSError, ValueError):
        return None
    return max((c.size * c.count for c in caches), default=None)


_BUFFERS: dict[int, np.ndarray] = {}


class CacheFlusher:
    """Evicts the CPU caches by writing a buffer of ``nbytes`` (default 4x the last-level cache).

    Writing (not only reading) leaves the cache full of dirty lines of this buffer, so whatever
    the timed run brings in must also evict them: no operand of the timed run can be served
    from a cache filled by the previous run.
    """

    def __init__(self, nbytes: int | None = None):
        llc = last_level_cache_bytes() or DEFAULT_LLC
        self.nbytes = int(nbytes if nbytes is not None else FLUSH_FACTOR * llc)
        n = max(self.nbytes // 8, 1)
        # One buffer per size and process: a fresh one per model would page-fault gigabytes each time.
        self._buf = _BUFFERS.get(n)
        if self._buf is None:
            self._buf = _BUFFERS[n] = np.zeros(n, dtype=np.float64)
        self._value = float(self._buf[0])

    def __call__(self) -> None:
        self._value += 1.0
        self._buf.fill(self._value)  # writes every line (a new value each time), reads none back


def time_runs(run: Callable[[], object], *, repeats: int = 10, warmup: int = 2, min_seconds: float = 0.0,
              max_repeats: int = 1000, flush: Callable[[], None] | None = None,
              timer: Callable[[Callable[[], object]], float] | None = None, clock: str = "perf_counter_ns",
              device: str = "cpu", threads: int | None = None, flushed_bytes: int = 0,
              notes: tuple[str, ...] = ()) -> Timing:
    """Run ``run`` ``warmup`` times untimed, then at least ``repeats`` timed runs (more, up to
    ``max_repeats``, until ``min_seconds`` of timed runs have accumulated).

    ``flush`` runs before every timed run, outside the timed region. ``timer(run) -> seconds``
    replaces the wall clock (CUDA events on a GPU); by default ``perf_counter_ns``.
    """
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    timer = timer or _wall
    for _ in range(warmup):
        run()
    samples: list[float] = []
    total = 0.0
    while len(samples) < repeats or (total < min_seconds and len(samples) < max_repeats):
        if flush is not None:
            flush()
        t = timer(run)
        samples.append(t)
        total += t
    if not all(math.isfinite(s) and s >= 0 for s in samples):
        raise RuntimeError(f"timer returned invalid samples: {samples[:5]}")
    return Timing(tuple(samples), warmup, clock, device, threads, flushed_bytes if flush else 0, notes)


def _wall(run: Callable[[], object]) -> float:
    t0 = time.perf_counter_ns()
    run()
    return (time.perf_counter_ns() - t0) * 1e-9
