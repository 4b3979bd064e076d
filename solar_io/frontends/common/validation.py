"""The validation flow shared by frontends: compare executor outputs with the source program's.

``compare`` checks every graph output against the reference array with tolerances chosen by
the output's dtype (scaled by the reference's magnitude, since long fp32 reductions in a
different order differ by a few ulps of the largest value) and returns a ``Validation``
record; ``skipped`` builds the record for a check that was not run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from math import prod

import numpy as np

from ...dtypes import DTYPES
from ...graph import Graph, Validation
from .contract import CONTRACTION_ATTR

#: (rtol, atol) per dtype; atol is relative to max(1, the largest |reference| value).
TOLERANCES: dict[str, tuple[float, float]] = {
    "fp64": (1e-7, 1e-9), "fp32": (1e-3, 1e-4), "tf32": (5e-3, 5e-3), "fp16": (1e-2, 1e-2),
    "bf16": (5e-2, 5e-2), "fp8_e4m3": (0.25, 0.25), "fp8_e5m2": (0.5, 0.5),
}
#: Fraction of integer / boolean elements allowed to differ (argmax ties, rounding at .5).
INT_MISMATCH = 1e-3
#: Elements compared at once (bounds the float64 temporaries).
CHUNK = 1 << 20


#: Sizes above this are reduced when a capture is validated at reduced sizes.
CAP = 16


def reduced_size(size: int) -> int:
    """``size`` if at most CAP, else its largest divisor up to CAP (CAP if that is below CAP // 4):
    equal sizes stay equal and divisibility is kept where it can be (heads, groups)."""
    if size <= CAP:
        return size
    best = max(d for d in range(1, CAP + 1) if size % d == 0)
    return best if best >= CAP // 4 else CAP


def tolerance(dtype: str) -> tuple[float, float]:
    """(rtol, atol) for outputs of ``dtype`` (exact for integers and booleans)."""
    if DTYPES[dtype].family in ("int", "uint", "bool"):
        return 0.0, 0.0
    return TOLERANCES.get(dtype, (0.1, 0.1))


def _exec_bytes(g: Graph, name: str) -> int:
    """Bytes of a tensor as the reference executor holds it (float32/float64, int64 or bool)."""
    t = g.tensor_map[name]
    if t.value is not None:
        return 0
    width = 8 if t.dtype in ("fp64", "int64", "int32", "int16", "int8", "int4", "uint8") else 4
    return (1 if t.dtype == "bool" else width) * prod(g.shape(name))


def graph_bytes(g: Graph) -> int:
    """Peak memory of executing ``g`` on numpy: every source tensor, plus the largest set of
    intermediates alive at once (the executor drops an intermediate after its last reader).

    The callers also take it as what the source program's own run needs, so a contraction the
    frontend merged from a broadcast product and a sum (:mod:`.contract`) adds, while it runs, the
    product the source program materialises there (one element per point of its space, at the
    widest width the executor gives its operands)."""
    last = {a.tensor: i for i, n in enumerate(g.nodes) for a in n.inputs}
    produced = {a.tensor for n in g.nodes for a in n.outputs}
    live = sum(_exec_bytes(g, t.name) for t in g.tensors if t.name not in produced)
    peak = live
    sizes = g.rank_sizes
    for i, n in enumerate(g.nodes):
        live += sum(_exec_bytes(g, a.tensor) for a in n.outputs)
        product = 0
        if dict(n.attrs).get(CONTRACTION_ATTR):
            width = max(_exec_bytes(g, a.tensor) // max(1, prod(g.shape(a.tensor))) for a in n.inputs)
            product = max(width, 4) * prod(sizes[r] for r in n.space)
        peak = max(peak, live + product)
        for a in {a.tensor for a in n.inputs}:
            if last.get(a) == i and g.tensor_map[a].role == "intermediate":
                live -= _exec_bytes(g, a)
    return peak


def kept_bytes(g: Graph) -> int:
    """Memory of executing ``g`` on numpy keeping every tensor (a search for the first diverging node)."""
    return sum(_exec_bytes(g, t.name) for t in g.tensors)


@dataclass
class Mismatch:
    """One output outside its tolerance."""

    tensor: str
    max_abs: float
    max_rel: float


def compare(g: Graph, got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray], *, reference: str,
            seed: int | None) -> tuple[Validation, list[Mismatch]]:
    """Compare executor outputs ``got`` with reference outputs ``want`` (both by tensor name)."""
    max_abs = max_rel = 0.0
    rtol_used = atol_used = 0.0
    bad: list[Mismatch] = []
    for name, ref in want.items():
        dt = g.tensor_map[name].dtype
        rtol, atol = tolerance(dt)
        rtol_used, atol_used = max(rtol_used, rtol), max(atol_used, atol)
        a, b = np.asarray(got[name]).reshape(-1), np.asarray(ref).reshape(-1)
        if np.shape(got[name]) != np.shape(ref):
            bad.append(Mismatch(name, float("inf"), float("inf")))
            continue
        if a.size == 0:
            continue
        with np.errstate(invalid="ignore", over="ignore"):
            finite = np.abs(b[np.isfinite(b)]) if b.dtype.kind == "f" else np.abs(b)
            scale = max(1.0, float(finite.max()) if finite.size else 1.0)
            e_abs = e_rel = 0.0
            wrong = 0
            for i in range(0, a.size, CHUNK):  # float64 temporaries of one chunk at a time
                diff, ca, cr, finite_b = _errors(a[i:i + CHUNK].astype(np.float64), b[i:i + CHUNK].astype(np.float64))
                e_abs, e_rel = max(e_abs, ca), max(e_rel, cr)
                if DTYPES[dt].family in ("int", "uint", "bool"):
                    wrong += int(np.count_nonzero(diff))
                else:
                    wrong += int(np.count_nonzero(diff > atol * scale + rtol * finite_b))
        max_abs, max_rel = max(max_abs, e_abs), max(max_rel, min(e_rel, 1e300))
        allowed = INT_MISMATCH * a.size if DTYPES[dt].family in ("int", "uint", "bool") else 0
        if wrong > allowed:
            bad.append(Mismatch(name, e_abs, e_rel))
    return _record(bad, max_abs, max_rel, rtol_used, atol_used, reference, seed)


@dataclass(frozen=True)
class Acceptance:
    """A benchmark's own test of a correct output (a SOL-ExecBench workload's ``tolerance``): at least
    ``ratio`` of each output's elements within ``atol + rtol * |reference|``, absolute.

    A failed validation's record reports the share :func:`accepted` finds. It never passes a graph: a
    wrong edge row is under 1% of a large output, and :func:`compare` allows no element outside its
    tolerance (a quantising program's rounding is checked with its quantised tensors pinned instead,
    ``frontends/torch/pinned.py``).

    >>> accepted({"y": np.array([1.0, 2.0, 9.0])}, {"y": np.array([1.0, 2.0, 3.0])}, Acceptance(0.0, 0.01, 0.6))
    0.6666666666666666
    """

    atol: float
    rtol: float
    ratio: float


def accepted(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray], acc: Acceptance) -> float:
    """The smallest fraction over the outputs of elements within ``acc``'s tolerance (0 for an
    output of another shape; NaN matches NaN and an infinity the same infinity)."""
    worst = 1.0
    for name, ref in want.items():
        a, b = np.asarray(got[name]).reshape(-1), np.asarray(ref).reshape(-1)
        if np.shape(got[name]) != np.shape(ref):
            return 0.0
        ok = 0
        with np.errstate(invalid="ignore", over="ignore"):
            for i in range(0, a.size, CHUNK):
                diff, _, _, finite_b = _errors(a[i:i + CHUNK].astype(np.float64), b[i:i + CHUNK].astype(np.float64))
                ok += int(np.count_nonzero(diff <= acc.atol + acc.rtol * finite_b))
        worst = min(worst, ok / a.size if a.size else 1.0)
    return worst


def _errors(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float, float, np.ndarray]:
    """Elementwise |a - b| (0 where both are the same inf or both NaN), its max, the max
    relative error, and |b| where finite (0 elsewhere)."""
    both_nan = np.isnan(a) & np.isnan(b)
    same_inf = np.isinf(a) & np.isinf(b) & (np.sign(a) == np.sign(b))
    ok_special = both_nan | same_inf
    diff = np.where(ok_special, 0.0, np.abs(a - b))
    diff = np.where(np.isnan(diff), np.inf, diff)
    finite_b = np.abs(np.where(np.isfinite(b), b, 0.0))
    rel = diff / np.maximum(finite_b, 1e-30)
    return diff, float(diff.max()), float(np.where(diff > 0, rel, 0.0).max()), finite_b


def _record(bad: list[Mismatch], max_abs: float, max_rel: float, rtol_used: float, atol_used: float,
            reference: str, seed: int | None) -> tuple[Validation, list[Mismatch]]:
    status = "failed" if bad else "passed"
    reason = None
    if bad:
        worst = max(bad, key=lambda m: m.max_abs)
        reason = f"output {worst.tensor} differs: max abs error {worst.max_abs:.3g}, max rel error {worst.max_rel:.3g}"
    return Validation(status, "reference-executor", reference, seed, rtol_used, atol_used,
                      _clean(max_abs), _clean(max_rel), (), reason), bad


def _clean(x: float) -> float:
    """A float the file can hold (finite, rounded to 3 significant digits for stable bytes)."""
    if not np.isfinite(x):
        return 1e300
    return float(f"{x:.3g}")


def skipped(reason: str) -> Validation:
    """The record of a validation that was not run."""
    return Validation("skipped", "none", reason=reason)


#: floating dtypes whose every value float64 holds exactly: a float64 rerun starts from the same values
NARROW_FLOATS = ("fp32", "bf16", "fp16")


def widened_graph(g: Graph) -> Graph:
    """``g`` with its fp32 / bf16 / fp16 tensors declared fp64 (the executor then rounds none of them):
    the graph's side of a float64 rerun, which tells rounding a model amplifies from a wrong lowering."""
    return replace(g, tensors=tuple(replace(t, dtype="fp64") if t.dtype in NARROW_FLOATS else t for t in g.tensors))
