"""Run AccelForge (and islpy) on exported files: the real-consumer half of the export tests.

Run by ``tests/exporters/test_export_accelforge.py`` and ``tests/exporters/test_export_timeloop.py`` under the
``.venv-accelforge`` interpreter (Python >= 3.12, ``make accelforge-venv``)::

    .venv-accelforge/bin/python tests/accelforge_check.py TASKS.json

``TASKS.json`` is a list of tasks; the script prints one JSON list of results, in order,
each ``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``. Tasks:

- ``{"kind": "load", "workload": W}``: ``accelforge.Spec.from_yaml(W)`` and AccelForge's own
  count of iteration points per einsum (``n_computes``, ISL over the operation space).
- ``{"kind": "map", "workload": W, "arch": A}``: map W on A with AccelForge's mapper (FFM);
  the compute actions and off-chip (first memory level) read/write bits it reports.
- ``{"kind": "isl", "fused": F}``: parse a Timeloop LoopTree (fused) workload the way
  Timeloop's ``ParseFusedWorkload`` does (ISL sets and multi-affine projections, islpy) and
  count each einsum's operation space.

It imports only ``accelforge``/``islpy`` and ``solar_io/exporters/accelforge_eval.py`` (by
path), never the solar_io package, whose dependencies this environment lacks.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _eval_module() -> Any:
    path = ROOT / "solar_io" / "exporters" / "accelforge_eval.py"
    spec = importlib.util.spec_from_file_location("solar_io_accelforge_eval", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_task(task: dict) -> dict:
    """AccelForge's loader and its count of iteration points per einsum."""
    afe = _eval_module()
    spec = afe.load_spec(task["workload"], task.get("arch"))
    w = spec.workload
    return {"einsums": list(w.einsum_names), "n_computes": {e: int(w.n_computes(e)) for e in w.einsum_names},
            "copies": [e.name for e in w.einsums if e.is_copy_operation]}


def map_task(task: dict) -> dict:
    """Map the workload on the architecture; the counts the mapper reports. The mapper runs in this
    process (one job): the tests already run one process per mapping, and each worker of AccelForge's
    own pool would import AccelForge again."""
    import importlib

    importlib.import_module("accelforge.util.parallel").set_n_parallel_jobs(1)
    return _eval_module().evaluate(task["workload"], task["arch"], fast=task.get("fast", True),
                                   templates=task.get("templates"))


def isl_task(task: dict) -> dict:
    """Parse a fused (LoopTree) Timeloop workload with ISL as Timeloop does."""
    import islpy as isl
    import yaml

    doc = yaml.safe_load(Path(task["fused"]).read_text())
    out: dict[str, int] = {}
    for prob in doc["problem"]:
        shape = prob["shape"]
        prologue = "{ " + shape["name"] + "[" + ", ".join(shape["dimensions"]) + "] "
        ospace = isl.Set(prologue + " : " + prob["instance"] + " }")
        for ds in shape["data_spaces"]:
            isl.MultiAff(prologue + " -> " + ds["name"] + ds["projection"] + " }")
        card = ospace.card() if hasattr(ospace, "card") else None
        if card is not None:
            out[shape["name"]] = int(card.eval(card.domain().sample_point()).to_python())
        else:
            n = 1
            for i in range(ospace.dim(isl.dim_type.set)):
                n *= (ospace.dim_max_val(i) - ospace.dim_min_val(i) + 1).to_python()
            out[shape["name"]] = n
    return {"points": out}


TASKS = {"load": load_task, "map": map_task, "isl": isl_task}


def main(argv: list[str]) -> int:
    tasks = json.loads(Path(argv[0]).read_text())
    results = []
    for t in tasks:
        try:
            results.append({"ok": True, **TASKS[t["kind"]](t)})
        except Exception as e:  # report every failure, keep checking the rest
            results.append({"ok": False, "error": f"{type(e).__name__}: {e}",
                            "traceback": traceback.format_exc(limit=5)})
    print(json.dumps(results, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
