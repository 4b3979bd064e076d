"""Writing a sweep's table: CSV text, the YAML document (rows, failures, regime shifts), both files.

>>> print(table_csv(["batch", "sol_s", "binding"], [{"batch": 1, "sol_s": 2.5e-06, "binding": None}]), end="")
batch,sol_s,binding
1,2.5e-06,
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .grid import SweepError
from .shifts import Shift


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
