"""Capture -> bound -> measure over a folder of model files: one :class:`CaseResult` per file.

This is the pipeline behind ``solar-io check-bounds`` (zero-violation check) and ``solar-io
report`` (headroom tables and roofline plots). Each file is handled on its own: any failure
becomes a ``failed`` case with its reason and never stops the rest; a model whose tensors would
not fit the memory budget is ``skipped`` with the size it needs. Measurements run one at a time
(concurrent runs would disturb each other's timings).

A *violation* is a fidelity whose SOL is above the fastest measured run: a lower bound was
beaten, so a count, a byte model, a peak or a bound is wrong. Measured times are compared with
the minimum over runs, the strictest test.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..backends.bound import bound
from ..backends.result import Report
from ..errors import SolarIOError
from ..hardware.spec import HardwareSpec
from .budget import available_bytes, run_bytes
from .plot import roofs_of

FIDELITIES = ("unfused", "fused", "cache-aware")


@dataclass(frozen=True)
class CaseOptions:
    """How each case is measured and bounded."""

    repeats: int = 5
    warmup: int = 1
    min_seconds: float = 0.05
    warm: bool = False
    cache_aware: bool = True
    dtype: str | None = None
    compile: bool = False
    device: str = "cpu"
    budget: int | None = None  # bytes of memory a case may use; default: half the available memory
    measure: bool = True
    tolerance: float = 0.0  # a run counts as a violation only below SOL x (1 - tolerance)


@dataclass
class Violation:
    """A fidelity whose SOL the fastest run beat, and the nodes that make up most of that SOL."""

    fidelity: str
    sol: float
    measured_min: float
    top_nodes: list[dict] = field(default_factory=list)


@dataclass
class CaseResult:
    """One model file through capture -> bound -> measure."""

    file: str
    status: str  # "ok", "violation", "failed", "skipped" ("ready": bounded, not yet measured)
    reason: str | None = None
    frontend: str | None = None
    runtime: str | None = None
    nodes: int = 0
    opaque: int = 0
    macs: int = 0
    flops: float = 0.0
    bytes_unfused: float = 0.0
    bytes_boundary: float = 0.0
    sol: dict[str, float] = field(default_factory=dict)
    bottleneck: dict[str, str | None] = field(default_factory=dict)
    fidelity_bytes: dict[str, float] = field(default_factory=dict)
    measured: dict | None = None
    violations: list[Violation] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    top_nodes: list[dict] = field(default_factory=list)
    judged: list[str] = field(default_factory=list)  # fidelities the measured run was held to
    dram_bandwidth: float = 0.0
    roofs: list[tuple[str, float]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return Path(self.file).stem

    def headroom(self, fidelity: str, stat: str = "median") -> float | None:
        """measured (median by default) / SOL at ``fidelity``; None without a measurement."""
        sol = self.sol.get(fidelity)
        if not self.measured or not sol:
            return None
        return self.measured[stat] / sol


def model_files(folder: Path) -> list[Path]:
    """The model files of ``folder`` (``*.py`` not starting with ``_``), sorted; a file is itself."""
    folder = Path(folder)
    if folder.is_file():
        return [folder]
    return sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))


def prepare_case(path: Path, spec: HardwareSpec, options: CaseOptions = CaseOptions()) -> CaseResult:
    """Capture and bound one model file (no timing): a ``ready`` case, or ``failed``/``skipped``."""
    from ..measure.measure import capture_graph, detect

    res = CaseResult(str(path), "failed")
    try:
        res.frontend = detect(Path(path), None)
        t0 = time.perf_counter()
        g = capture_graph(Path(path), frontend=res.frontend, options=_run_options(options))
        res.phases["capture"] = time.perf_counter() - t0
        need = run_bytes(g)
        budget = options.budget if options.budget is not None else available_bytes() // 2
        if need > budget:
            res.status, res.reason = "skipped", f"needs {need} B to run, over the budget of {budget} B"
            return res
        t0 = time.perf_counter()
        report = bound(g, spec, cache_aware=options.cache_aware)
        res.phases["bound"] = time.perf_counter() - t0
        _fill_bounds(res, report)
        res.status = "ready"
    except Exception as e:  # one failing file never stops the rest
        res.status, res.reason = "failed", _one_line(e)
    return res


def finish_case(res: CaseResult, options: CaseOptions = CaseOptions()) -> CaseResult:
    """Time a ``ready`` case and judge it: ``ok`` or ``violation`` (``failed`` if it cannot run);
    with ``options.measure`` False a ready case is ``ok`` unmeasured. Other cases are returned."""
    from ..measure.measure import measure_file

    if res.status != "ready":
        return res
    if not options.measure:
        res.status = "ok"
        return res
    try:
        t0 = time.perf_counter()
        m = measure_file(Path(res.file), frontend=res.frontend, options=_run_options(options),
                         repeats=options.repeats, warmup=options.warmup, min_seconds=options.min_seconds,
                         warm=options.warm)
        res.phases["measure"] = time.perf_counter() - t0
        res.runtime, res.measured = m.runtime, m.timing.as_dict()
        res.violations = find_violations(res, m.timing.min, options.tolerance, m.judged)
        res.judged = list(m.judged)
        res.status = "violation" if res.violations else "ok"
    except Exception as e:
        res.status, res.reason = "failed", _one_line(e)
    return res


def run_case(path: Path, spec: HardwareSpec, options: CaseOptions = CaseOptions()) -> CaseResult:
    """Capture, bound and (unless ``options.measure`` is False) measure one model file."""
    return finish_case(prepare_case(path, spec, options), options)


def run_cases(files: Iterable[Path], spec: HardwareSpec, options: CaseOptions = CaseOptions(), *,
              jobs: int = 1, progress: Callable[[CaseResult], None] | None = None) -> list[CaseResult]:
    """All cases of ``files``, in file order. Capture and bound run on ``jobs`` worker processes
    (one failing or crashing file is reported as ``failed``); timings always run one at a time in
    this process so that runs do not disturb each other."""
    files = list(files)
    prepared: list[CaseResult | None] = [None] * len(files)
    if jobs > 1:
        from ..parallel import run_tasks

        items = [(f, spec, options) for f in files]
        for r in run_tasks(_prepare_item, items, jobs=jobs, label="capture+bound", progress=False):
            prepared[r.index] = r.value if r.ok else CaseResult(str(files[r.index]), "failed",
                                                                reason=r.error or "worker failed")
    out = []
    for i, f in enumerate(files):
        res = finish_case(prepared[i] or prepare_case(f, spec, options), options)
        out.append(res)
        if progress is not None:
            progress(res)
    return out


def _prepare_item(item: tuple[Path, HardwareSpec, CaseOptions]) -> CaseResult:
    return prepare_case(*item)


def _run_options(options: CaseOptions):  # noqa: ANN202
    from ..measure.runners import RunOptions

    return RunOptions(dtype=options.dtype, compile=options.compile, device=options.device)


def find_violations(res: CaseResult, measured_min: float, tolerance: float = 0.0,
                    judged: tuple[str, ...] = FIDELITIES) -> list[Violation]:
    """Every fidelity of ``res`` in ``judged`` whose SOL exceeds ``measured_min`` (by more than
    ``tolerance``, a fraction of the SOL), with the case's largest nodes."""
    return [Violation(name, sol, measured_min, list(res.top_nodes)) for name, sol in res.sol.items()
            if name in judged and measured_min < sol * (1.0 - tolerance)]


def _fill_bounds(res: CaseResult, report: Report, top: int = 5) -> None:
    res.nodes = len(report.nodes)
    res.opaque = len(report.opaque)
    res.macs = report.totals.macs
    res.flops = report.totals.flops_matrix + report.totals.flops_vector
    res.bytes_unfused = report.totals.bytes
    res.bytes_boundary = report.totals.boundary_bytes
    res.dram_bandwidth = report.dram_bandwidth
    res.roofs = roofs_of(report)
    for f in report.fidelities:
        if f.computed and f.time is not None:
            res.sol[f.name] = f.time
            res.bottleneck[f.name] = f.bottleneck
            if f.bytes is not None:
                res.fidelity_bytes[f.name] = f.bytes
    res.top_nodes = [{"node": n.name, "op": n.op, "time": n.time, "bytes": n.bytes,
                      "flops": n.flops_matrix + n.flops_vector, "bottleneck": n.bottleneck}
                     for n in sorted(report.nodes, key=lambda n: -n.time)[:top]]


def _one_line(e: BaseException) -> str:
    """One line for a failed case: a user error's own message, else the exception type and message."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    if isinstance(e, SolarIOError):
        return text[:400]
    where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    loc = f" ({Path(where.filename).name}:{where.lineno})" if where else ""
    return f"{type(e).__name__}: {text[:300]}{loc}"
