"""Measure a model file's run time, and set it against its SOL bounds (headroom per fidelity).

``measure_file`` times the source program (see :mod:`.runners` and :mod:`.timing`);
``capture_and_bound`` captures the same file through its frontend (no numeric validation:
the timed program is the source itself) and bounds it on a chip; ``headroom`` pairs the two.
Headroom = measured / SOL; a headroom below 1 at any fidelity is a *violation*: the run beat a
lower bound, which means a count, a byte model, a peak or the bound itself is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..backends.result import Report
from ..graph import Graph
from .runners import MeasureError, RunOptions, make_runnable
from .timing import Timing, time_runs


@dataclass(frozen=True)
class Measurement:
    """The timing of one model file and what ran."""

    path: str
    frontend: str
    runtime: str
    timing: Timing
    fuses: bool = False  # the runtime fused source ops: the unfused bound does not describe this run

    @property
    def judged(self) -> tuple[str, ...]:
        """The fidelities this run must never beat: all three for op-by-op (eager) execution; fused
        and cache-aware only when the runtime fuses ops (the unfused bound models one kernel per op)."""
        return ("fused", "cache-aware") if self.fuses else ("unfused", "fused", "cache-aware")


def detect(path: Path, frontend: str | None) -> str:
    """The frontend of ``path`` (forced, or from its imports)."""
    from ..frontends.select import detect_frontend

    return frontend or detect_frontend(path)


def measure_file(path: Path, *, frontend: str | None = None, options: RunOptions = RunOptions(),
                 repeats: int = 10, warmup: int = 2, min_seconds: float = 0.2, warm: bool = False) -> Measurement:
    """Time one forward pass of the model in ``path``: ``warmup`` untimed runs, then at least
    ``repeats`` timed runs (more until ``min_seconds`` of runs), the cache flushed before each
    unless ``warm``."""
    fe = detect(Path(path), frontend)
    r = make_runnable(Path(path), fe, options)
    flush = None if warm else r.make_flusher()
    nbytes = 0 if flush is None else int(getattr(flush, "nbytes", 0))
    try:
        timing = time_runs(r.call, repeats=repeats, warmup=warmup, min_seconds=min_seconds, flush=flush,
                           timer=r.timer, clock=r.clock, device=r.device, threads=r.threads,
                           flushed_bytes=nbytes, notes=tuple(r.notes))
    except Exception as e:
        raise MeasureError(f"{Path(path).name}: running the model raised {type(e).__name__}: "
                           f"{str(e)[:300]}") from e
    return Measurement(str(path), fe, r.runtime, timing, r.fuses)


def capture_graph(path: Path, *, frontend: str | None = None, options: RunOptions = RunOptions()) -> Graph:
    """The einsum graph of ``path`` through its frontend, without numeric validation."""
    from ..frontends.select import frontend_module

    fe = detect(Path(path), frontend)
    kw: dict = {}
    if fe == "torch":
        kw = {"entry": options.entry, "inputs": list(options.inputs) or None, "dtype": options.dtype,
              "eval_mode": options.eval_mode}
    return frontend_module(fe).capture_file(Path(path), validate=False, strict=False, **kw)


@dataclass(frozen=True)
class Headroom:
    """Measured time against one fidelity's SOL on one chip."""

    fidelity: str
    sol: float
    measured: float
    bottleneck: str | None

    @property
    def ratio(self) -> float | None:
        """measured / SOL (None when the SOL is 0)."""
        return self.measured / self.sol if self.sol > 0 else None

    @property
    def violated(self) -> bool:
        """True when the run beat the bound."""
        return self.measured < self.sol


def headroom(report: Report, measured: float) -> list[Headroom]:
    """measured / SOL at every computed fidelity of ``report``."""
    return [Headroom(f.name, f.time, measured, f.bottleneck) for f in report.fidelities
            if f.computed and f.time is not None]
