"""Numerical validation: the program's outputs against the lifted graph's, same inputs.

Both sides compute float tensors in float32 (fp64 in float64), so tolerances depend on
the computing type, not the declared dtype: float32 ``rtol = 1e-3`` and ``atol = 1e-4 ×
max|reference|`` of each output (summation order differs between loops and BLAS; the
scaled atol covers elements near zero); float64 ``1e-9``; integers and booleans exactly.
``max_rel_error`` is normwise: max|program - graph| / max|graph| (per output, worst).
Reported errors are rounded to two significant digits so files stay stable.
"""

from __future__ import annotations

import numpy as np

from ...dtypes import numpy_dtype
from ...executor import execute
from ...graph import Graph, Validation
from .ir import LoopIRError, Value

RTOL32, ATOL32 = 1e-3, 1e-4
RTOL64, ATOL64 = 1e-9, 1e-9


def _round(x: float) -> float:
    return float(f"{x:.2g}")


def compare_outputs(g: Graph, arrays: dict, ran: dict[str, Value], seed: int, jit: bool,
                    opaque: dict | None = None) -> Validation:
    """Run ``g`` on ``arrays`` (``opaque``: implementations of opaque nodes by node name)
    and compare with the program's outputs ``ran``."""
    inputs = {t.name: arrays[t.name] for t in g.tensors if t.name in arrays and t.value is None}
    try:
        ref = execute(g, inputs, opaque=opaque or {})
    except Exception as e:
        msg = " ".join(str(e).split())[:300]
        raise LoopIRError(f"the reference executor failed on the lifted graph: {msg}") from None
    if jit:
        import numba

        reference = f"loopir program, numba {numba.__version__}"
    else:
        reference = "loopir program, pure Python (no jit)"
    worst_abs = worst_rel = 0.0
    rtol_used = atol_used = 0.0
    bad: list[str] = []
    for name, r in ref.items():
        got = ran[name].numpy()
        if got.shape != r.shape:
            bad.append(f"output {name}: shape {list(got.shape)} vs graph {list(r.shape)}")
            continue
        kind = np.dtype(numpy_dtype(g.tensor_map[name].dtype)).kind
        a, b = got.astype(np.float64), r.astype(np.float64)
        scale = float(np.max(np.abs(b))) if b.size else 0.0
        if kind == "f":
            rtol, atol = (RTOL64, ATOL64) if r.dtype == np.float64 else (RTOL32, ATOL32)
            atol *= max(scale, 1e-30)
        else:
            rtol, atol = 0.0, 0.0
        diff = np.abs(a - b)
        both_nan = np.isnan(a) & np.isnan(b)
        same_inf = np.isinf(a) & (a == b)
        diff = np.where(both_nan | same_inf, 0.0, diff)
        abs_err = float(np.max(diff)) if diff.size else 0.0
        rel_err = abs_err / scale if scale > 0 else abs_err
        worst_abs, worst_rel = max(worst_abs, abs_err), max(worst_rel, rel_err)
        rtol_used, atol_used = max(rtol_used, rtol), max(atol_used, atol)
        ok = np.all((diff <= atol + rtol * np.abs(b)) & ~(np.isnan(a) ^ np.isnan(b)))
        if not ok:
            bad.append(f"output {name} differs: max abs error {abs_err:.3g} (scale {scale:.3g})")
    status = "failed" if bad else "passed"
    return Validation(status=status, method="reference-executor", reference=reference, seed=seed,
                      rtol=rtol_used, atol=_round(atol_used), max_abs_error=_round(worst_abs),
                      max_rel_error=_round(worst_rel), reason="; ".join(bad) if bad else None)
