"""Regime shifts of a sweep table: where the binding resource changes between memory and compute
along one parameter, the other parameters, chip and fidelity fixed.

>>> rows = [{"chip": "h100", "fidelity": "fused", "batch": b, "regime": r}
...         for b, r in ((1, "memory"), (8, "memory"), (64, "compute"))]
>>> [str(s) for s in regime_shifts(rows, ["batch"])]
['h100 fused: batch 8 -> 64: memory -> compute']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


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
