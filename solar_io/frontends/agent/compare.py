"""Dtype-aware comparison of the IR program's outputs with the golden outputs, and the
diagnostic sent back to the model when they differ.

Tolerances follow the less precise side: fp64 on both sides rtol 1e-7; fp32 (the IR computes
floats in fp32) rtol 1e-3; fp16/bf16 golden rtol 1e-2; atol = rtol/10 × max|golden| of each
output; integers and booleans exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Comparison:
    ok: bool
    rtol: float = 0.0
    atol: float = 0.0
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    problems: list[str] = field(default_factory=list)


def tolerance(golden: np.ndarray, got: np.ndarray) -> float:
    kinds = {golden.dtype.kind, got.dtype.kind}
    if not kinds <= {"f", "c"}:
        return 0.0 if kinds <= {"i", "u", "b"} else 1e-3
    size = min(golden.dtype.itemsize, got.dtype.itemsize)
    return 1e-7 if size >= 8 else 1e-3 if size >= 4 else 1e-2


def _round(x: float) -> float:
    return float(f"{x:.2g}")


def compare(golden: dict, got: dict) -> Comparison:
    c = Comparison(ok=True)
    if len(golden) == 1 and len(got) == 1 and set(golden) != set(got):
        got = {next(iter(golden)): next(iter(got.values()))}
    missing = [k for k in golden if k not in got]
    if missing:
        c.problems.append(f"outputs {missing} are missing: model returned {sorted(got)}; return a dict with "
                          f"keys {sorted(golden)}")
    for name, g in golden.items():
        if name not in got:
            continue
        a = np.asarray(got[name])
        if a.shape != g.shape:
            c.problems.append(f"output {name}: shape {list(a.shape)}, expected {list(g.shape)}")
            continue
        rtol = tolerance(g, a)
        b64, a64 = g.astype(np.float64), a.astype(np.float64)
        scale = float(np.max(np.abs(b64[np.isfinite(b64)]))) if np.isfinite(b64).any() else 0.0
        atol = rtol / 10 * max(scale, 1e-30) if rtol else 0.0
        diff = np.abs(a64 - b64)
        same = (np.isnan(a64) & np.isnan(b64)) | (np.isinf(a64) & (a64 == b64))
        diff = np.where(same, 0.0, diff)
        diff = np.where(np.isnan(diff), np.inf, diff)
        bad = diff > atol + rtol * np.abs(np.where(np.isfinite(b64), b64, 0.0))
        abs_err = float(diff.max()) if diff.size else 0.0
        c.max_abs_error = max(c.max_abs_error, abs_err)
        c.max_rel_error = max(c.max_rel_error, abs_err / scale if scale > 0 else abs_err)
        c.rtol, c.atol = max(c.rtol, rtol), max(c.atol, atol)
        if bad.any():
            idx = np.unravel_index(int(np.argmax(np.where(bad, diff, -1.0))), g.shape) if g.ndim else ()
            c.problems.append(
                f"output {name} (shape {list(g.shape)}) diverges at {int(bad.sum())} of {g.size} elements; worst at "
                f"index {list(map(int, idx))}: got {a64[idx]:.6g}, expected {b64[idx]:.6g} (abs error {abs_err:.3g}, "
                f"output scale {scale:.3g}, rtol {rtol:g}, atol {atol:.3g})")
    c.ok = not c.problems
    c.max_abs_error, c.max_rel_error, c.atol = _round(c.max_abs_error), _round(c.max_rel_error), _round(c.atol)
    return c
