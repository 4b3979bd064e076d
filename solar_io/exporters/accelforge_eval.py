"""Run AccelForge on an exported workload + architecture and report what it counts.

Self-contained: it imports only the standard library and ``accelforge`` (Python >= 3.12),
never the rest of solar-io, so that ``tests/accelforge_check.py`` can load this file by path
under the separate ``.venv-accelforge`` interpreter.

AccelForge's mapper renders every mapping with graphviz's ``dot`` and writes ``mapping.svg``
into the working directory; :func:`evaluate` therefore runs in a temporary directory and,
when ``dot`` is not installed, puts a stub ``dot`` (it prints an empty SVG) on ``PATH`` for
the duration of the call: the drawing is not used. The call's temporary folder (``tempfile.tempdir``
and ``TMPDIR``) is one folder per process, removed when the process exits: AccelForge's mapper writes a
``.pkl`` file there for each table it memory-maps and never removes it (60 files were left in ``/tmp``
per test run), and its worker pool outlives one call, keeping the folder it started with.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

INSTALL_HINT = ("AccelForge is not importable here: it needs Python >= 3.12. Install it with "
                "`python3.12 -m venv .venv-accelforge && .venv-accelforge/bin/pip install accelforge` "
                "(`make accelforge-venv` in a solar-io checkout), then evaluate the written files with "
                f"`.venv-accelforge/bin/python {Path(__file__).resolve()} WORKLOAD ARCH`.")

_DOT_STUB = '#!/bin/sh\necho \'<svg xmlns="http://www.w3.org/2000/svg"></svg>\'\n'


@functools.cache
def _scratch() -> str:
    """This process's temporary folder for AccelForge (made once, removed at exit)."""
    d = tempfile.mkdtemp(prefix="solar-io-accelforge-tmp-")
    atexit.register(shutil.rmtree, d, True)
    return d


@contextlib.contextmanager
def sandbox() -> Iterator[Path]:
    """A temporary working directory, with a stub ``dot`` on PATH when graphviz is absent, and the
    process's temporary folder for AccelForge's files (:func:`_scratch`)."""
    old_cwd, old_path = os.getcwd(), os.environ.get("PATH", "")
    old_tempdir, old_tmpdir_env = tempfile.tempdir, os.environ.get("TMPDIR")
    with tempfile.TemporaryDirectory(prefix="solar-io-accelforge-") as d:
        if shutil.which("dot") is None:
            stub = Path(d) / "bin" / "dot"
            stub.parent.mkdir()
            stub.write_text(_DOT_STUB)
            stub.chmod(0o755)
            os.environ["PATH"] = f"{stub.parent}{os.pathsep}{old_path}"
        os.chdir(d)
        tempfile.tempdir = os.environ["TMPDIR"] = _scratch()
        try:
            yield Path(d)
        finally:
            os.chdir(old_cwd)
            os.environ["PATH"] = old_path
            tempfile.tempdir = old_tempdir
            if old_tmpdir_env is None:
                os.environ.pop("TMPDIR", None)
            else:
                os.environ["TMPDIR"] = old_tmpdir_env


def load_spec(workload: str | Path, arch: str | Path | None = None) -> Any:
    """``accelforge.Spec.from_yaml`` of the files (AccelForge's own loader and checks)."""
    import accelforge as af

    files = [str(Path(arch).resolve())] if arch is not None else []
    return af.Spec.from_yaml(*files, str(Path(workload).resolve()))


def evaluate(workload: str | Path, arch: str | Path, fast: bool = False,
             templates: int | None = None) -> dict[str, Any]:
    """Map the workload on the architecture with AccelForge's mapper; the counts it reports.

    ``fast`` narrows the mapper's search (no loop-order exploration, one fused loop): the
    counts of work and of compulsory traffic do not depend on it, the energy found may.
    ``templates`` caps the loop-nest templates the mapper tries per einsum (its
    ``max_pmapping_templates_per_einsum``): every einsum is still mapped and its computes
    counted, but the traffic of the mapping found may be far from the best (a 16-einsum
    attention maps in 11 s of CPU instead of 64).

    Returns ``{"einsums": [...], "n_computes": {einsum: n, ...}`` (AccelForge's ISL count of
    iteration points), ``"mapped_computes": {einsum: n, ...}``, ``"computes"`` (total compute
    actions of the chosen mapping), ``"offchip_read_bits"``, ``"offchip_write_bits"``,
    ``"energy"`` and ``"latency"``; off-chip is the first memory level of the architecture
    (``MainMemory`` in solar-io's simple architecture).
    """
    spec = load_spec(workload, arch)
    if fast:
        spec.mapper.explore_loop_orders = False
        spec.mapper.max_fused_loops = 1
    if templates is not None:
        spec.mapper.max_pmapping_templates_per_einsum = templates
    names = list(spec.workload.einsum_names)
    n_computes = {e: int(spec.workload.n_computes(e)) for e in names}
    with sandbox():
        mappings = spec.map_workload_to_arch(print_progress=False)
    if len(mappings) == 0:
        raise RuntimeError("AccelForge found no valid mapping")
    energies = list(mappings.data["Total<SEP>energy"])
    best = min(range(len(energies)), key=lambda i: (energies[i], i))  # the Pareto set's least energy
    chosen = mappings[best]
    actions = {k: (v[0] if isinstance(v, list) else v) for k, v in chosen.actions().items()}
    computes = sum(v for (_, act), v in actions.items() if act == "compute")
    offchip = spec.arch.nodes[0].name
    row = mappings.data.iloc[best]
    computes_of = _computes(spec)
    per_einsum = {e: int(sum(_num(row.get(f"{e}<SEP>action<SEP>{c}<SEP>None<SEP>compute")) for c in computes_of))
                  for e in names}
    return {
        "mapped_computes": per_einsum,
        "einsums": names,
        "n_computes": n_computes,
        "computes": int(computes),
        "offchip_read_bits": float(actions.get((offchip, "read"), 0.0)),
        "offchip_write_bits": float(actions.get((offchip, "write"), 0.0)),
        "energy": float(row["Total<SEP>energy"]),
        "latency": float(row["Total<SEP>latency"]),
    }


def _num(x: Any) -> float:
    """A count from the mappings table (absent or NaN: 0)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if v != v else v


def _computes(spec: Any) -> list[str]:
    from accelforge.frontend.arch import Compute

    return [c.name for c in spec.arch.get_nodes_of_type(Compute)]


def main(argv: list[str]) -> int:
    """``python accelforge_eval.py WORKLOAD [ARCH]``: print the counts as JSON."""
    import json

    if len(argv) == 1:
        spec = load_spec(argv[0])
        print(json.dumps({"einsums": list(spec.workload.einsum_names),
                          "n_computes": int(spec.workload.n_computes())}))
    else:
        print(json.dumps(evaluate(argv[0], argv[1]), sort_keys=True))
    return 0


if __name__ == "__main__":
    import sys

    # Run as a script, this folder is sys.path[0], where accelforge.py would shadow AccelForge.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    raise SystemExit(main(sys.argv[1:]))
