"""Parameter sweeps of a model file: re-capture at every grid point, bound on every chip, one tidy table.

The parts, one job each: :mod:`.grid` (``--set`` values, progressions, the grid), :mod:`.bind`
(which parameters a model file declares and the copy of its text bound to a point),
:mod:`.shifts` (regime shifts) and :mod:`.tables` (CSV and YAML). This module runs the points and
gathers the rows; it re-exports the parts' public names (``from solar_io.dse.sweep import grid``).

How parameters reach the model
    For each grid point the sweep rewrites the defaults the file declares (:func:`bind_source`)
    in a copy of the file's text, writes it under a fresh temporary folder with the file's own
    name, and captures it with the ordinary frontend (``capture_file``): every point is a new
    module from a new file, so captures share nothing mutable, and module-level constants
    derived from ``SWEEPABLE`` at import time follow the swept values.

Rows (:data:`COLUMNS`)
    One row per point x chip x fidelity (``unfused``, ``fused``, and ``cache-aware`` with
    ``--cache-aware``): the parameters, ``chip``, ``fidelity``, ``sol_s`` (the bound, seconds),
    ``binding`` (the fidelity's bottleneck: ``matrix``, ``vector``, ``special`` or ``memory``),
    ``regime`` (``memory`` or ``compute``), ``macs``, ``flops`` (matrix + vector), ``bytes`` (the DRAM
    bytes that fidelity charges: per-kernel traffic unfused, boundary traffic fused, tiled traffic
    cache-aware; the roofline backend defines them), ``opaque`` (nodes whose compute is unknown:
    the bound counts it as zero, so it is looser) and ``validation``. A point whose capture or
    bound fails is reported, not fatal.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solar_io.errors import SolarIOError
from solar_io.parallel import run_tasks

from ..format.yamltext import YamlError
from ..format.yamltext import read_text as read_limited_text
from .bind import SWEEP_FUNCTIONS, bind_source, sweepable_params
from .grid import SweepError, grid, parse_assignments, parse_values
from .shifts import Shift, format_value, regime_shifts
from .tables import table_csv, table_document, write_tables

__all__ = [
    "COLUMNS", "FIDELITIES", "REGIME", "STEP_PARAMS", "SWEEP_FUNCTIONS", "WARM_MODULES", "PointTask", "Shift",
    "SweepError", "SweepResult", "bind_source", "format_value", "gather", "grid", "parse_assignments",
    "parse_values", "regime_shifts", "report_rows", "run_point", "run_sweep", "split_step_params",
    "sweepable_params", "table_csv", "table_document", "write_tables",
]

#: Columns of the table after the parameter columns.
COLUMNS = ("chip", "fidelity", "sol_s", "binding", "regime", "macs", "flops", "bytes", "opaque", "validation")
FIDELITIES = ("unfused", "fused", "cache-aware")
REGIME = {"matrix": "compute", "vector": "compute", "special": "compute", "memory": "memory"}
#: With ``--phase`` (a serving step over a KV cache), these ``--set`` names are the step's, not the file's.
STEP_PARAMS = ("batch", "seq", "kv_len", "page_size")
#: Frontend -> modules its first capture imports (seconds of start-up): the local pool imports them
#: once in its fork server, so that every worker starts warm.
WARM_MODULES: dict[str, tuple[str, ...]] = {
    "torch": ("torch.export._trace", "torch._dynamo"),
    "jax": ("jax",),
}


# ---------------------------------------------------------------------------- one point


@dataclass(frozen=True)
class PointTask:
    """One grid point: capture ``text`` (the model file named ``name``) bound to ``params`` and
    bound it on ``chips``. Picklable: it is what the executors ship to their workers."""

    name: str
    text: str
    params: tuple[tuple[str, Any], ...]
    chips: tuple[str, ...]
    cache_aware: bool = False
    validate: bool = False
    frontend: str | None = None
    strict_fp32: bool = False  # the precision policy's strict switches (solar-io bound --strict-fp32)
    strict_dequant: bool = False
    step: tuple[tuple[str, Any], ...] = ()  # a serving step's fixed options (phase, cache, ...): see STEP_PARAMS

    def __str__(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params) or "(defaults)"


def report_rows(params: dict[str, Any], reports: Iterable[Any], opaque: int, validation: str) -> list[dict]:
    """Table rows (:data:`COLUMNS`) of the computed fidelities of roofline reports."""
    rows = []
    for r in reports:
        for fid in r.fidelities:
            if not fid.computed:
                continue
            binding = fid.bottleneck
            rows.append({**params, "chip": r.hardware, "fidelity": fid.name, "sol_s": fid.time, "binding": binding,
                         "regime": REGIME.get(binding or "", "none"), "macs": r.totals.macs,
                         "flops": r.totals.flops_matrix + r.totals.flops_vector, "bytes": fid.bytes,
                         "opaque": opaque, "validation": validation})
    return rows


def run_point(task: PointTask) -> list[dict]:
    """Capture the model at one grid point and bound it on every chip: the point's rows."""
    from solar_io.backends.roofline import bound_many
    from solar_io.frontends.common.errors import CaptureError

    from ..frontends.select import detect_frontend, frontend_module

    params = dict(task.params)
    file_params, options = split_step_params(params, dict(task.step))
    text = bind_source(task.text, task.name, file_params)
    with tempfile.TemporaryDirectory(prefix="solar-io-sweep-") as tmp:
        path = Path(tmp) / task.name
        path.write_text(text, encoding="utf-8")
        mod = frontend_module(task.frontend or detect_frontend(path))
        try:
            g = mod.capture_file(path, validate=task.validate, strict=False, **options)
        except SolarIOError:
            raise
        except Exception as e:
            raise CaptureError(f"{task.name}: capture failed: {type(e).__name__}: {str(e)[:300]}") from e
        finally:  # the point's module must not outlive it
            for key, m in list(sys.modules.items()):
                if str(getattr(m, "__file__", "") or "").startswith(tmp):
                    del sys.modules[key]
    reports = bound_many(g, list(task.chips), cache_aware=task.cache_aware, strict_fp32=task.strict_fp32,
                         strict_dequant=task.strict_dequant)
    opaque = sum(n.kind == "opaque" for n in g.nodes)
    rows = report_rows(params, reports, opaque, g.validation.status)
    if "step" in options:
        from .decode import step_row, step_traffic

        traffic = step_traffic(g)
        if traffic is not None:
            for row in rows:
                row.update(step_row(traffic, row["sol_s"]))
    return rows


def split_step_params(params: dict[str, Any], step: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the parameters bound into the model file, the capture options): with a serving ``step``
    (``--phase``), the :data:`STEP_PARAMS` among ``params`` are the step's, not the file's."""
    step = dict(step)
    options = {"dtype": step.pop("dtype")} if "dtype" in step else {}
    if "phase" not in step:
        return params, options
    from solar_io.frontends.torch.phases import Step

    fixed = {**step, **{k: v for k, v in params.items() if k in STEP_PARAMS}}
    options["step"] = Step(**fixed)
    return {k: v for k, v in params.items() if k not in STEP_PARAMS}, options


# ---------------------------------------------------------------------------- the sweep


@dataclass
class SweepResult:
    """The table of a sweep and what failed. ``failures`` are (point, one-line reason)."""

    source: str
    params: dict[str, list[Any]]
    chips: list[str]
    rows: list[dict] = field(default_factory=list)
    failures: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    step: bool = False  # a serving-step sweep (--phase): rows carry the decode roofline's columns

    @property
    def columns(self) -> list[str]:
        """Parameter columns, then :data:`COLUMNS` (and :data:`.decode.STEP_COLUMNS` for a step sweep)."""
        from .decode import STEP_COLUMNS

        return [*self.params, *COLUMNS, *(STEP_COLUMNS if self.step else ())]


def run_sweep(path: Path, params: dict[str, list[Any]], chips: Sequence[str], *, cache_aware: bool = False,
              validate: bool = False, frontend: str | None = None, jobs: int | None = 1, executor: str = "local",
              address: str | None = None, timeout_s: float | None = None, progress: bool = True,
              strict_fp32: bool = False, strict_dequant: bool = False,
              step: dict[str, Any] | None = None) -> SweepResult:
    """Sweep the model file at ``path`` over the grid of ``params`` on ``chips`` (see the module docstring).

    ``step`` (``{"phase": "decode", "cache": "static", ...}``) captures a serving step at every point:
    ``batch``, ``seq``, ``kv_len`` and ``page_size`` among ``params`` are then the step's
    (:data:`STEP_PARAMS`) and the rows gain the decode roofline's columns (:mod:`.decode`).

    Rows come in grid order, then chip order, then fidelity order, whatever order the executor
    finishes the points in. Raises :class:`SweepError` for a parameter the file does not declare.
    """
    from solar_io.backends.bound import resolve_hardware

    from ..frontends.select import detect_frontend

    path = Path(path)
    try:
        text = read_limited_text(path)  # at most SOLAR_IO_MAX_BYTES + 1 bytes
    except YamlError as e:
        raise SweepError(f"{path}: {e}") from None
    except OSError as e:
        raise SweepError(f"{path}: cannot read: {e.strerror or e}") from None
    step = dict(step or {})
    first, _ = split_step_params({k: v[0] for k, v in params.items()}, step)  # a bad step fails here, once
    bind_source(text, path.name, first)  # unknown names fail here, once
    specs = [resolve_hardware(c) for c in chips]  # unknown chips fail here, once
    points = grid(params)
    tasks = [PointTask(path.name, text, tuple(p.items()), tuple(chips), cache_aware, validate, frontend,
                       strict_fp32, strict_dequant, tuple(step.items())) for p in points]
    out = SweepResult(path.name, params, [s.name for s in specs], step="phase" in step)
    front = frontend or detect_frontend(path)
    preload = (__name__, f"solar_io.frontends.{front}", *WARM_MODULES.get(front, ()))
    return gather(out, points, run_tasks(run_point, tasks, jobs=jobs, executor=executor, address=address,
                                         timeout_s=timeout_s, label=f"sweeping {path.name}", progress=progress,
                                         preload=preload))


def gather(out: SweepResult, points: list[dict], results: Iterable) -> SweepResult:
    """``out`` with the rows of every point that ran (in point order) and each failed point's reason."""
    done: dict[int, list[dict]] = {}
    failed: dict[int, str] = {}
    for r in results:
        if r.ok:
            done[r.index] = r.value
        else:
            failed[r.index] = r.error or "failed"
    out.rows = [row for i in sorted(done) for row in done[i]]
    out.failures = [(points[i], failed[i]) for i in sorted(failed)]
    return out
