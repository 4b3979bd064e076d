"""Hardware what-ifs on one graph, vectorised over hardware points (no re-capture).

``--vary NAME=VALUES`` scales one resource of the chip (:data:`VARY_UNITS`):

- ``dram_bw``: the DRAM bandwidth;
- ``peak``: every compute peak (matrix, vector and special-function units, every dtype);
- ``matrix_peak``, ``vector_peak``, ``special_peak``: the peaks of one unit (every dtype).

VALUES are multipliers (``0.5x``; the ``x`` is optional): ``A..B`` is ``N`` points log-spaced from
A to B inclusive (``0.5x..4x:16``; N defaults to :data:`DEFAULT_POINTS`), or a list ``0.5x,1x,2x``,
or a progression ``0.5x,1x,...,8x`` (the ``--set`` rules of :mod:`.sweep`). Several ``--vary``
give the Cartesian product (the first varying slowest); two names that scale the same unit
(``peak`` and ``matrix_peak``) multiply.

How it is evaluated: the roofline backend bounds the graph once on the unmodified chip; each
node's seconds per unit (matrix, vector, special) and the DRAM bytes it is charged are kept.
Scaling a unit's peaks by ``s`` divides that unit's time by ``s`` (every peak of the unit scales
alike, so each node's work keeps its route: the fastest applicable peak stays the fastest); the
bytes are divided by the scaled bandwidth (on-chip capacity is not varied, so they stay the same).
Nodes whose compute dtype mixes classes whose peaks live on *different* units (``bf16 x fp16``
on a chip without fp16 matrix peaks) keep every candidate route and take the fastest per point,
as the backend would on the scaled chip. Then, for all points at once as numpy
arrays: unfused ``T = sum_v max(compute(v), bytes(v) / BW)``; fused ``T = max(busiest unit's
total, boundary bytes / BW)``; the binding resource of each. Identical nodes are evaluated once
and weighted by their count. The result equals :func:`solar_io.backends.roofline.bound` on
:func:`scaled_spec` to float rounding (tested). The cache-aware fidelity needs a tiling ILP per
point and is not part of what-ifs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

import numpy as np

from solar_io.backends.bound import resolve_graph, resolve_hardware
from solar_io.backends.roofline import PeakModel, Route, bound
from solar_io.backends.roofline.model import CLASS_OF
from solar_io.graph import Graph
from solar_io.hardware import HardwareSpec

from .sweep import SweepError, SweepResult, parse_values

#: ``--vary`` name -> the resources it scales.
VARY_UNITS: dict[str, tuple[str, ...]] = {
    "dram_bw": ("dram",),
    "peak": ("matrix", "vector", "special"),
    "matrix_peak": ("matrix",),
    "vector_peak": ("vector",),
    "special_peak": ("special",),
}
RESOURCES = ("matrix", "vector", "special", "dram")
#: Binding codes of :class:`Evaluation` (-1: nothing binds, the bound is 0).
BINDINGS = ("matrix", "vector", "special", "memory")
DEFAULT_POINTS = 8
_CHUNK = 1 << 21  # array elements per evaluation chunk (points x distinct nodes)
_REPRESENTATIVE = {c: d for d, c in reversed(CLASS_OF.items())}  # spec class -> a graph dtype of it


# ---------------------------------------------------------------------------- --vary


def _multiplier(text: str, what: str) -> float:
    t = text.strip().lower().removesuffix("x")
    try:
        v = float(t)
    except ValueError:
        v = float("nan")
    if not (v > 0 and np.isfinite(v)):
        raise SweepError(f"{what}: cannot read {text!r} as a positive multiplier; write e.g. 0.5x or 2")
    return v


def parse_vary(spec: str) -> tuple[str, np.ndarray]:
    """``"dram_bw=0.5x..4x:8"`` -> ``("dram_bw", array of 8 multipliers)`` (see the module docstring)."""
    name, eq, text = spec.partition("=")
    name = name.strip()
    what = f"--vary {name}"
    if not eq or name not in VARY_UNITS:
        raise SweepError(f"--vary: expected NAME=VALUES with NAME one of {', '.join(VARY_UNITS)}, got {spec!r} "
                         "(e.g. --vary dram_bw=0.5x..4x:8)")
    if ".." in text and "..." not in text:
        lo, _, rest = text.partition("..")
        hi, colon, n_text = rest.partition(":")
        try:
            n = int(n_text) if colon else DEFAULT_POINTS
        except ValueError:
            n = 0
        if n < 1 or n > 10_000_000:
            raise SweepError(f"{what}: the number of points after ':' must be a whole number >= 1, got {n_text!r}")
        a, b = _multiplier(lo, what), _multiplier(hi, what)
        if n == 1 and a != b:
            raise SweepError(f"{what}: a range {lo}..{hi} needs at least 2 points")
        return name, np.geomspace(a, b, n)
    items = [p.strip().lower().removesuffix("x") for p in text.split(",")]
    values = parse_values(",".join(items), what)
    return name, np.array([_multiplier(str(v), what) for v in values], dtype=float)


def hardware_grid(varies: Sequence[tuple[str, np.ndarray]]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(the value of each ``--vary`` name per point, the scale of each resource per point)."""
    names = [n for n, _ in varies]
    if len(set(names)) != len(names):
        raise SweepError(f"--vary: {next(n for n in names if names.count(n) > 1)} is given twice")
    if varies:
        mesh = np.meshgrid(*(v for _, v in varies), indexing="ij")
        values = {n: m.ravel() for n, m in zip(names, mesh, strict=True)}
    else:
        values = {}
    size = next(iter(values.values())).size if values else 1
    scales = {r: np.ones(size) for r in RESOURCES}
    for n, v in values.items():
        for r in VARY_UNITS[n]:
            scales[r] = scales[r] * v
    return values, scales


def scaled_spec(spec: HardwareSpec, scales: Mapping[str, float]) -> HardwareSpec:
    """``spec`` with every peak of unit u multiplied by ``scales[u]`` and the DRAM bandwidth by
    ``scales['dram']`` (missing keys: 1). The chip a what-if point describes, for ``bound``."""
    units = MappingProxyType({u: MappingProxyType({dt: replace(p, value=p.value * scales.get(u, 1.0))
                                                   for dt, p in peaks.items()})
                              for u, peaks in spec.units.items()})
    dram = spec.memory[0]
    bw = None if dram.bandwidth is None else dram.bandwidth * scales.get("dram", 1.0)
    return replace(spec, units=units, memory=(replace(dram, bandwidth=bw), *spec.memory[1:]))


# ---------------------------------------------------------------------------- the vectorised model


@dataclass(frozen=True)
class Term:
    """Work of one kind of a node that may run on several units: ``work`` at the fastest of
    ``candidates`` (unit index into :data:`RESOURCES`, base peak)."""

    work: float
    candidates: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class WhatIfModel:
    """One graph on one chip, ready to evaluate at many hardware points.

    ``fixed``: distinct rows (matrix s, vector s, special s, DRAM bytes) of the nodes whose routes
    cannot change, with ``counts``; ``variable``: (DRAM bytes, terms) of the others. DRAM bytes are
    what the backend charges (its memory time x bandwidth: on-chip residency and views included),
    so the what-if follows the backend's byte model; ``boundary_bytes`` likewise for the fused
    bound, ``bytes`` is the unfused fidelity's DRAM bytes.
    """

    graph: str | None
    chip: str
    bandwidth: float
    fixed: np.ndarray
    counts: np.ndarray
    variable: tuple[tuple[float, tuple[Term, ...]], ...]
    boundary_bytes: float
    macs: int
    flops: float
    bytes: float
    opaque: int
    validation: str


def _candidates(spec: HardwareSpec, allow_tf32: bool, classes: list[str], kind: int, half: bool = False) -> list[Route]:
    model = PeakModel(spec, allow_tf32, half_fp32=half)
    routes = [model.plan((_REPRESENTATIVE[c],)).routes[kind] for c in classes]
    return [r for r in routes if isinstance(r, Route)]


def prepare(graph: Graph | str | Path, hw: HardwareSpec | str | Path, *, allow_tf32: bool | None = None,
            compute_dtype: str | None = None, strict_fp32: bool = False, strict_dequant: bool = False) -> WhatIfModel:
    """Bound ``graph`` on ``hw`` once and keep what the what-if evaluation needs (precision policy as in
    :func:`solar_io.backends.roofline.bound`)."""
    g = resolve_graph(graph)
    spec = resolve_hardware(hw)
    report = bound(g, spec, allow_tf32=allow_tf32, compute_dtype=compute_dtype, strict_fp32=strict_fp32,
                   strict_dequant=strict_dequant)
    allow_tf32 = report.options.allow_tf32
    half = report.precision is not None and report.precision.half  # the file's fp32->bf16 (node_lists.fp32_at_half)
    bw = report.dram_bandwidth
    rows: list[tuple[float, float, float, float]] = []
    variable = []
    unit_of = {u: i for i, u in enumerate(RESOURCES)}
    for nb in report.kernels or report.nodes:  # the unfused bound's kernels
        classes = (nb.compute_dtype or "").split("/")
        terms: list[Term] = []
        if nb.compute_known and len(classes) > 1:
            works = (nb.flops_matrix, nb.flops_vector, nb.transcendental)
            for kind, w in enumerate(works):
                if w > 0:
                    routes = _candidates(spec, allow_tf32, classes, kind, half)
                    if routes:
                        terms.append(Term(w * nb.effectual_fraction, tuple((unit_of[r.unit], r.peak) for r in routes)))
        charged = nb.memory_time * bw  # the DRAM bytes the backend charges the node
        if any(len({u for u, _ in t.candidates}) > 1 for t in terms):
            variable.append((charged, tuple(terms)))
        else:
            rows.append((nb.matrix_time, nb.vector_time, nb.special_time, charged))
    fixed, counts = (np.unique(np.array(rows, dtype=float), axis=0, return_counts=True) if rows
                     else (np.zeros((0, 4)), np.zeros(0, dtype=np.int64)))
    t = report.totals
    return WhatIfModel(g.name, spec.name, bw, fixed, counts.astype(float), tuple(variable),
                       report.fused.memory_time * bw, t.macs, t.flops_matrix + t.flops_vector,
                       report.unfused.bytes, len(report.opaque), g.validation.status)


@dataclass(frozen=True)
class Evaluation:
    """Bounds at every hardware point: seconds and binding codes (index into :data:`BINDINGS`, -1 none)."""

    unfused: np.ndarray
    unfused_binding: np.ndarray
    fused: np.ndarray
    fused_binding: np.ndarray


def _variable_times(terms: tuple[Term, ...], s: np.ndarray) -> np.ndarray:
    """(3, P) seconds on matrix/vector/special of one variable node; ``s`` is (4, P) scales."""
    out = np.zeros((3, s.shape[1]))
    for term in terms:
        rates = np.stack([s[u] * peak for u, peak in term.candidates])
        best = rates.argmax(axis=0)
        units = np.array([u for u, _ in term.candidates])[best]
        time = term.work / rates[best, np.arange(s.shape[1])]
        for u in range(3):
            out[u] += np.where(units == u, time, 0.0)
    return out


def _chunk(m: WhatIfModel, s: np.ndarray) -> tuple[np.ndarray, ...]:
    bw = m.bandwidth * s[3]
    f, c = m.fixed, m.counts
    stack = np.empty((4, s.shape[1], f.shape[0]))
    for u in range(3):
        np.divide(f[None, :, u], s[u][:, None], out=stack[u])
    np.divide(f[None, :, 3], bw[:, None], out=stack[3])
    t = stack.max(axis=0)
    bn = stack.argmax(axis=0)
    weighted = t * c
    unfused = weighted.sum(axis=1)
    split = np.stack([np.where(bn == k, weighted, 0.0).sum(axis=1) for k in range(4)])
    totals = np.stack([(f[:, u] * c).sum() / s[u] for u in range(3)])
    for nbytes, terms in m.variable:
        node = np.concatenate([_variable_times(terms, s), (nbytes / bw)[None]])
        nt = node.max(axis=0)
        unfused = unfused + nt
        split[node.argmax(axis=0), np.arange(s.shape[1])] += nt
        totals = totals + node[:3]
    u_bind = np.where(split.max(axis=0) > 0, split.argmax(axis=0), -1)
    fused_terms = np.concatenate([totals, (m.boundary_bytes / bw)[None]])
    fused = fused_terms.max(axis=0)
    f_bind = np.where(fused > 0, fused_terms.argmax(axis=0), -1)
    return unfused, u_bind, fused, f_bind


def evaluate(model: WhatIfModel, scales: Mapping[str, np.ndarray]) -> Evaluation:
    """The unfused and fused bounds at every point; ``scales[r]`` (r in :data:`RESOURCES`, missing: 1)
    are equal-length arrays of positive multipliers."""
    sizes = {np.asarray(v).size for v in scales.values()} or {1}
    if len(sizes) != 1:
        raise SweepError("what-if scales must all have one value per point")
    p = sizes.pop()
    s = np.stack([np.asarray(scales.get(r, np.ones(p)), dtype=float).reshape(p) for r in RESOURCES])
    if not (s > 0).all():
        raise SweepError("what-if scales must be positive")
    step = max(1, _CHUNK // max(1, model.fixed.shape[0]))
    parts = [_chunk(model, s[:, i:i + step]) for i in range(0, p, step)]
    return Evaluation(*(np.concatenate([part[k] for part in parts]) for k in range(4)))


# ---------------------------------------------------------------------------- rows


def binding_names(codes: np.ndarray) -> list[str | None]:
    """Binding codes -> names (None where nothing binds)."""
    return [BINDINGS[c] if c >= 0 else None for c in codes.tolist()]


def run_whatif(graph: Graph | Path | str, chips: Sequence[str], varies: Sequence[str], *,
               allow_tf32: bool | None = None, compute_dtype: str | None = None, strict_fp32: bool = False,
               strict_dequant: bool = False) -> SweepResult:
    """The what-if table of ``graph`` on ``chips`` over the grid of ``varies`` (``--vary`` texts):
    rows as in :mod:`.sweep` (``unfused`` and ``fused``) in point, chip, fidelity order, the
    parameters being the multipliers."""
    from .sweep import REGIME

    parsed = [parse_vary(v) for v in varies]
    values, scales = hardware_grid(parsed)
    g = resolve_graph(graph)
    models = [prepare(g, chip, allow_tf32=allow_tf32, compute_dtype=compute_dtype, strict_fp32=strict_fp32,
                      strict_dequant=strict_dequant) for chip in chips]
    source = (g.name or "graph") if isinstance(graph, Graph) else Path(graph).name
    out = SweepResult(source, {n: v.tolist() for n, v in parsed}, [m.chip for m in models])
    columns = {n: v.tolist() for n, v in values.items()}
    per_chip = []
    for m in models:
        ev = evaluate(m, scales)
        per_chip.append((m, (("unfused", ev.unfused.tolist(), binding_names(ev.unfused_binding), m.bytes),
                             ("fused", ev.fused.tolist(), binding_names(ev.fused_binding), m.boundary_bytes))))
    size = next(iter(scales.values())).size
    for i in range(size):
        point = {n: col[i] for n, col in columns.items()}
        for m, fids in per_chip:
            for fid, times, names, nbytes in fids:
                out.rows.append({**point, "chip": m.chip, "fidelity": fid, "sol_s": times[i], "binding": names[i],
                                 "regime": REGIME.get(names[i] or "", "none"), "macs": m.macs, "flops": m.flops,
                                 "bytes": nbytes, "opaque": m.opaque, "validation": m.validation})
    return out


__all__ = ["BINDINGS", "DEFAULT_POINTS", "Evaluation", "RESOURCES", "Term", "VARY_UNITS", "WhatIfModel",
           "binding_names", "evaluate", "hardware_grid", "parse_vary", "prepare", "run_whatif",
           "scaled_spec"]
