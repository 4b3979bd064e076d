"""Shared helpers of the exporter tests: graphs to export and the AccelForge environment."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

from solar_io import loads

GRAPHS = (sorted((ROOT / "examples" / "graphs").glob("*.yaml"))
          + sorted((ROOT / "tests" / "golden" / "v1.0").glob("*.yaml")))
AF_PYTHON = ROOT / ".venv-accelforge" / "bin" / "python"
CHECK = ROOT / "tests" / "accelforge_check.py"

SMALL = {
    "matmul": {"M": 16, "N": 8, "K": 32},
    "conv2d": {"N": 1, "C": 4, "H": 8, "W": 8, "K": 4, "R": 3, "S": 3, "P": 4, "Q": 4},
    "mlp": {"B": 4, "D": 8, "H": 16, "O": 8},
    "attention": {"B": 1, "S": 4, "T": 4, "D": 8, "F": 8, "H": 2, "E": 4},
}
"""Reduced rank sizes of the examples: the mapper's search grows with the sizes' divisors."""

CHAIN = """format: solar-io.einsum-graph
version: "1.0"
name: chain
producer:
  tool: solar-io
  tool_version: 0.1.0
  frontend: hand-written
ranks:
  M: 16
  K: 16
  N: 16
  J: 16
tensors:
- name: A
  ranks: [M, K]
  dtype: bf16
  role: input
- name: W0
  ranks: [K, N]
  dtype: bf16
  role: weight
- name: T
  ranks: [M, N]
  dtype: bf16
  role: intermediate
- name: W1
  ranks: [N, J]
  dtype: bf16
  role: weight
- name: Y
  ranks: [M, J]
  dtype: bf16
  role: output
nodes:
- name: mm1
  kind: einsum
  op: aten.mm
  space: [M, N, K]
  inputs:
  - A[M, K]
  - W0[K, N]
  output: T[M, N]
  map: mul
  reduce: add
- name: mm2
  kind: einsum
  op: aten.mm
  space: [M, J, N]
  inputs:
  - T[M, N]
  - W1[N, J]
  output: Y[M, J]
  map: mul
  reduce: add
validation:
  status: skipped
  method: none
  reason: test graph
"""
"""A fused 2-matmul chain: its intermediate T need never leave the chip."""


def small_graph(stem: str):
    """The example ``stem`` with the reduced sizes of :data:`SMALL` (still a valid graph)."""
    text = (ROOT / "examples" / "graphs" / f"{stem}.yaml").read_text()
    block = "ranks:\n" + "".join(f"  {k}: {v}\n" for k, v in SMALL[stem].items())
    return loads(re.sub(r"ranks:\n(  .*\n)+", block, text, count=1))


def python312_available() -> bool:
    """True when a Python 3.12 interpreter can be run here (directly or through pyenv)."""
    exe = shutil.which("python3.12")
    if exe is None:
        return False
    env = {**os.environ, "PYENV_VERSION": os.environ.get("PYENV_VERSION", "3.12.1")}
    try:
        return subprocess.run([exe, "--version"], env=env, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def require_accelforge() -> Path:
    """The .venv-accelforge interpreter; skip only when no Python 3.12 exists at all."""
    if AF_PYTHON.exists():
        return AF_PYTHON
    if not python312_available():
        pytest.skip("AccelForge needs Python >= 3.12 and no python3.12 interpreter is available")
    pytest.fail("Python 3.12 is available but .venv-accelforge is missing: run `make accelforge-venv` "
                "(`make test` builds it)")


def run_checks(tasks: list[dict], workdir: Path, timeout: float = 600.0, processes: int = 2) -> list[dict]:
    """Run ``tests/accelforge_check.py`` on ``tasks`` in ``processes`` parallel processes; results in
    order. Each process imports AccelForge once (about 2.5 s of CPU), so the tasks share a few
    processes rather than one each: the mappings are dealt round robin, the loads (quick) go with
    the first. ``timeout`` is a hang guard only: the work takes under a minute on a quiet 2-core
    machine, and timed out at 170 s beside the other xdist worker and a load of 8. The processes' temporary
    folder is one of ``workdir`` and must be empty after them: AccelForge's mapper leaves a ``.pkl`` file
    there per memory-mapped table unless ``accelforge_eval.sandbox`` gives it a folder of its own."""
    py = require_accelforge()
    tmp = workdir / "tmp"
    tmp.mkdir(exist_ok=True)
    maps = [t for t in tasks if t["kind"] == "map"]
    groups = [[t for t in tasks if t["kind"] != "map"]] + [[] for _ in range(processes - 1)]
    for i, t in enumerate(maps):
        groups[i % processes].append(t)
    groups = [g for g in groups if g]
    procs = []
    for i, group in enumerate(groups):
        f = workdir / f"tasks{i}.json"
        f.write_text(json.dumps(group))
        procs.append(subprocess.Popen([str(py), str(CHECK), str(f)], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, cwd=workdir,
                                      env={**os.environ, "TMPDIR": str(tmp)}))
    by_id: dict[int, dict] = {}
    for group, p in zip(groups, procs, strict=True):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            pytest.fail(f"accelforge_check.py timed out on {group}")
        assert p.returncode == 0, f"accelforge_check.py failed:\n{err[-3000:]}"
        for t, r in zip(group, json.loads(out.strip().splitlines()[-1]), strict=True):
            by_id[id(t)] = r
    left = sorted(p.name for p in tmp.iterdir())
    assert not left, f"AccelForge left {len(left)} files in the temporary folder: {left[:5]}"
    return [by_id[id(t)] for t in tasks]


__all__ = ["CHAIN", "GRAPHS", "ROOT", "SMALL", "require_accelforge", "run_checks", "small_graph", "sys"]
