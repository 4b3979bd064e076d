"""Parameter sweeps of a model file: re-capture at every grid point, bound on every chip, one tidy table.

Grid values (``--set NAME=VALUES``, :func:`parse_values`)
    A comma-separated list (``1,2,4``; integers, floats or names such as ``bf16``), or a
    progression written with an ellipsis ``a,b,...,z``: the terms before ``...`` fix the rule and
    ``z`` must be reached exactly. When every ratio between consecutive leading terms is the same
    (and not 1) the progression is *geometric* (``1,2,4,...,64``; ``512,1024,...,8192``), otherwise
    when every difference is the same it is *arithmetic*. Two leading terms fit both rules: the
    geometric reading is taken when it reaches ``z`` exactly (powers of two are the usual case),
    else the arithmetic one (``10,7,...,1``); write three terms for an arithmetic progression that
    a geometric one would also reach (``8,16,24,...,64``). The grid is the Cartesian product of
    all ``--set`` lists, the first one varying slowest.

How parameters reach the model (:func:`bind_source`)
    A model file declares what may be swept, in either (or both) of two ways: keyword parameters
    with defaults of its top-level ``get_inputs`` / ``get_init_inputs`` functions
    (``def get_inputs(batch=8, seq=1024)``), or a top-level dict literal of module constants
    ``SWEEPABLE = {"d_model": 1024, "heads": 16}`` that the file reads (at import or call time).
    For each grid point the sweep rewrites exactly those default values in a copy of the file's
    text (everything else stays byte-identical), writes it under a fresh temporary folder with the
    file's own name, and captures it with the ordinary frontend (``capture_file``): every point
    is a new module from a new file, so captures share nothing mutable, and module-level
    constants derived from ``SWEEPABLE`` at import time follow the swept values.

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

import ast
import itertools
import math
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from solar_io.errors import SolarIOError
from solar_io.parallel import run_tasks

from ..format.yamltext import YamlError
from ..format.yamltext import read_text as read_limited_text

#: Columns of the table after the parameter columns.
COLUMNS = ("chip", "fidelity", "sol_s", "binding", "regime", "macs", "flops", "bytes", "opaque", "validation")
FIDELITIES = ("unfused", "fused", "cache-aware")
SWEEP_FUNCTIONS = ("get_inputs", "get_init_inputs")
REGIME = {"matrix": "compute", "vector": "compute", "special": "compute", "memory": "memory"}
#: With ``--phase`` (a serving step over a KV cache), these ``--set`` names are the step's, not the file's.
STEP_PARAMS = ("batch", "seq", "kv_len", "page_size")
#: Frontend -> modules its first capture imports (seconds of start-up): the local pool imports them
#: once in its fork server, so that every worker starts warm.
WARM_MODULES: dict[str, tuple[str, ...]] = {
    "torch": ("torch.export._trace", "torch._dynamo"),
    "jax": ("jax",),
}


class SweepError(SolarIOError):
    """A sweep that cannot run as asked: bad ``--set``/``--vary`` text, an unknown parameter."""


# ---------------------------------------------------------------------------- grid values


def _number(text: str) -> int | float | str:
    t = text.strip()
    for kind in (int, float):
        try:
            return kind(t)
        except ValueError:
            pass
    return t


def _extend(lead: list[Fraction], last: Fraction, step: Any) -> list[Fraction] | None:
    """``lead`` continued by ``step`` (a function of the last term) until it reaches ``last``, or None
    when it passes ``last`` without hitting it."""
    out = list(lead)
    up = lead[-1] > lead[0]
    while (out[-1] < last) if up else (out[-1] > last):
        out.append(step(out[-1]))
    return out if out[-1] == last else None


def _progression(lead: list[Fraction], last: Fraction, what: str) -> list[Fraction]:
    if len(lead) < 2:
        raise SweepError(f"{what}: a progression needs two terms before '...' (e.g. 1,2,...,64)")
    ratios = {b / a for a, b in zip(lead, lead[1:], strict=False)} if all(t > 0 for t in lead) else set()
    diffs = {b - a for a, b in zip(lead, lead[1:], strict=False)}
    geometric = len(ratios) == 1 and next(iter(ratios)) != 1
    arithmetic = len(diffs) == 1 and next(iter(diffs)) != 0
    if geometric:
        r = next(iter(ratios))
        out = _extend(lead, last, lambda t: t * r)
        if out is not None:
            return out
        if not arithmetic:
            raise SweepError(f"{what}: the geometric progression with ratio {r} does not reach {last}")
    if arithmetic:
        d = next(iter(diffs))
        out = _extend(lead, last, lambda t: t + d)
        if out is None:
            raise SweepError(f"{what}: the arithmetic progression with step {d} does not reach {last}")
        return out
    raise SweepError(f"{what}: the terms before '...' are neither a geometric nor an arithmetic progression")


def parse_values(text: str, what: str = "--set") -> list[Any]:
    """The values of ``a,b,c`` or of a progression ``a,b,...,z`` (see the module docstring)."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise SweepError(f"{what}: empty value in {text!r}; write e.g. 1,2,4 or 1,2,...,64")
    if "..." not in parts:
        return [_number(p) for p in parts]
    k = parts.index("...")
    if k != len(parts) - 2:
        raise SweepError(f"{what}: '...' must come just before the last value, as in 1,2,...,64")
    values = [_number(p) for p in parts[:k] + parts[-1:]]
    if not all(isinstance(v, int | float) for v in values):
        raise SweepError(f"{what}: a progression with '...' needs numbers, got {text!r}")
    terms = _progression([Fraction(p) for p in parts[:k]], Fraction(parts[-1]), what)
    if len(terms) > 100_000:
        raise SweepError(f"{what}: {text!r} has more than 100000 values")
    ints = all(isinstance(v, int) for v in values)
    return [int(t) if ints and t.denominator == 1 else float(t) for t in terms]


def parse_assignments(specs: Sequence[str], what: str = "--set") -> dict[str, list[Any]]:
    """``["batch=1,2,4", "seq=512,...,8192"]`` -> ``{"batch": [1, 2, 4], "seq": [...]}``."""
    out: dict[str, list[Any]] = {}
    for spec in specs:
        name, eq, values = spec.partition("=")
        name = name.strip()
        if not eq or not name.isidentifier():
            raise SweepError(f"{what}: expected NAME=VALUES, got {spec!r} (e.g. {what} batch=1,2,...,64)")
        if name in out:
            raise SweepError(f"{what}: {name} is given twice")
        out[name] = parse_values(values, f"{what} {name}")
    return out


def grid(params: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the values, the first parameter varying slowest."""
    names = list(params)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*params.values())]


# ---------------------------------------------------------------------------- binding a model file


def _defaults(tree: ast.Module) -> dict[str, ast.expr]:
    """Sweepable name -> the AST node of its default value in the file."""
    found: dict[str, ast.expr] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name in SWEEP_FUNCTIONS:
            a = stmt.args
            positional = a.posonlyargs + a.args
            for arg, default in zip(positional[len(positional) - len(a.defaults):], a.defaults, strict=True):
                found.setdefault(arg.arg, default)
            for arg, default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
                if default is not None:
                    found.setdefault(arg.arg, default)
    for stmt in tree.body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else (
            stmt.target if isinstance(stmt, ast.AnnAssign) else None)
        value = getattr(stmt, "value", None)
        if isinstance(target, ast.Name) and target.id == "SWEEPABLE" and isinstance(value, ast.Dict):
            for key, v in zip(value.keys, value.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    found[key.value] = v
    return found


def _parse(text: str, name: str) -> ast.Module:
    try:
        return ast.parse(text, filename=name)
    except SyntaxError as e:
        raise SweepError(f"{name}:{e.lineno}: cannot parse the model file: {e.msg}") from None


def sweepable_params(text: str, name: str) -> dict[str, Any]:
    """The parameters a model file declares sweepable, with their default values (as written)."""
    return {k: ast.get_source_segment(text, v) for k, v in _defaults(_parse(text, name)).items()}


def bind_source(text: str, name: str, values: dict[str, Any]) -> str:
    """The file's text with the defaults of the swept parameters replaced by ``values``."""
    found = _defaults(_parse(text, name))
    unknown = [k for k in values if k not in found]
    if unknown:
        known = ", ".join(sorted(found)) or "none"
        raise SweepError(f"{name}: no sweepable parameter {unknown[0]!r} (declared: {known}); declare it as a "
                         f"keyword parameter of get_inputs/get_init_inputs or a key of SWEEPABLE = {{...}}")
    data = text.encode("utf-8")
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    edits = []
    for key, v in values.items():
        node = found[key]
        a = starts[node.lineno - 1] + node.col_offset
        b = starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[operator]
        edits.append((a, b, repr(v).encode("utf-8")))
    for a, b, new in sorted(edits, reverse=True):
        data = data[:a] + new + data[b:]
    return data.decode("utf-8")


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


# ---------------------------------------------------------------------------- regime shifts


def format_value(v: Any) -> str:
    """A parameter value for people: floats to 4 significant digits (``1.134``), the rest as is."""
    return f"{v:.4g}" if isinstance(v, float) else str(v)


@dataclass(frozen=True)
class Shift:
    """Along ``parameter`` (others fixed at ``fixed``), the bound of ``fidelity`` on ``chip`` changes
    regime between ``before`` and ``after``: from ``regime_from`` to ``regime_to``."""

    chip: str
    fidelity: str
    parameter: str
    before: Any
    after: Any
    regime_from: str
    regime_to: str
    fixed: tuple[tuple[str, Any], ...]

    def __str__(self) -> str:
        others = ", ".join(f"{k}={format_value(v)}" for k, v in self.fixed)
        return (f"{self.chip} {self.fidelity}: {self.parameter} {format_value(self.before)} -> "
                f"{format_value(self.after)}"
                f"{f' ({others})' if others else ''}: {self.regime_from} -> {self.regime_to}")


def _sort_key(v: Any) -> tuple:
    return (0, v, "") if isinstance(v, int | float) and not isinstance(v, bool) else (1, 0, str(v))


def regime_shifts(rows: Sequence[dict], params: Sequence[str]) -> list[Shift]:
    """Every place where the regime (memory/compute) changes between neighbouring values of one
    parameter, the other parameters, chip and fidelity fixed."""
    shifts = []
    for p in params:
        others = [q for q in params if q != p]
        lines: dict[tuple, list[dict]] = {}
        for row in rows:
            lines.setdefault((row["chip"], row["fidelity"], *(row[q] for q in others)), []).append(row)
        for key, line in lines.items():
            line = sorted(line, key=lambda r: _sort_key(r[p]))
            for a, b in zip(line, line[1:], strict=False):
                if a["regime"] != b["regime"]:
                    shifts.append(Shift(key[0], key[1], p, a[p], b[p], a["regime"], b["regime"],
                                        tuple(zip(others, key[2:], strict=True))))
    return shifts


# ---------------------------------------------------------------------------- writing the table


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else str(v)
    return str(v)


def table_csv(columns: Sequence[str], rows: Iterable[dict]) -> str:
    """The rows as CSV text with a header line."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow([_cell(row.get(c)) for c in columns])
    return buf.getvalue()


def table_document(kind: str, source: str, params: dict[str, list[Any]], chips: Sequence[str],
                   columns: Sequence[str], rows: Sequence[dict], failures: Sequence[tuple[dict, str]],
                   shifts: Sequence[Shift]) -> dict:
    """The YAML document of a sweep: what was swept, the rows, the failures and the regime shifts."""
    return {
        "sweep": {"kind": kind, "source": source, "parameters": {k: list(v) for k, v in params.items()},
                  "chips": list(chips), "columns": list(columns)},
        "rows": [{c: row.get(c) for c in columns} for row in rows],
        "failures": [{"point": dict(p), "error": e} for p, e in failures],
        "regime_shifts": [{"chip": s.chip, "fidelity": s.fidelity, "parameter": s.parameter, "before": s.before,
                           "after": s.after, "from": s.regime_from, "to": s.regime_to, "fixed": dict(s.fixed)}
                          for s in shifts],
    }


def write_tables(outdir: Path, doc: dict, csv_text: str) -> list[Path]:
    """Write ``sweep.csv`` and ``sweep.yaml`` into ``outdir`` (created), atomically."""
    from ..format.yamltext import emit, write_atomic

    try:
        outdir.mkdir(parents=True, exist_ok=True)
        paths = [outdir / "sweep.csv", outdir / "sweep.yaml"]
        write_atomic(paths[0], csv_text)
        write_atomic(paths[1], emit(doc))
    except OSError as e:
        raise SweepError(f"{outdir}: cannot write the sweep tables: {e.strerror or e}") from None
    return paths
