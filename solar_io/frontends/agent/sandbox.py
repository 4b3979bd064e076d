"""Run an IR program in a separate process: time and memory limits, its own temporary
directory and session, no network (a network namespace of its own where the kernel allows
one, and always an audit hook in the child refusing sockets, subprocesses and files outside
its directory), a minimal environment. The child sets its own limits (``_runner.isolate``):
no Python runs between fork and exec, which matters when the parent is multithreaded (JAX)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DEFAULT_TIMEOUT = 120.0
DEFAULT_MEMORY = 4 << 30


@dataclass(frozen=True)
class RunResult:
    ok: bool
    outputs: dict | None = None
    error: str | None = None  # one line
    traceback: str | None = None
    isolation: dict | None = None  # network_namespace (bool), reason, interfaces seen by the child


def run_program(code: str, inputs: dict, *, timeout: float = DEFAULT_TIMEOUT, memory: int = DEFAULT_MEMORY
                ) -> RunResult:
    """Run IR program text ``code`` on ``inputs`` {name: array} in a child process."""
    root = Path(__file__).resolve().parents[3]  # the directory holding the solar_io package
    with tempfile.TemporaryDirectory(prefix="solar-io-agent-") as tmp:
        t = Path(tmp)
        (t / "prog.py").write_text(code)
        np.savez(t / "inputs.npz", **inputs)
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "TMPDIR": tmp, "PYTHONPATH": str(root),
               "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "SOLAR_IO_LOOPIR_NO_JIT": "1"}
        cmd = [sys.executable, "-I", "-c",
               f"import sys; sys.path.insert(0, {str(root)!r}); "
               "from solar_io.frontends.agent._runner import isolate, main; "
               f"isolate({int(timeout) + 1}, {int(memory)}); main(*sys.argv[1:5])",
               str(t / "prog.py"), str(t / "inputs.npz"), str(t / "out.npz"), str(t / "result.json")]
        try:
            proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout,
                                  start_new_session=True)
        except subprocess.TimeoutExpired:
            return RunResult(False, error=f"the program was killed: it ran longer than the time limit of "
                             f"{timeout:g} s (an infinite loop, or loops too large for plain Python)")
        rf = t / "result.json"
        if not rf.is_file():
            tail = (proc.stderr or "").strip().splitlines()[-3:]
            why = "out of memory or CPU time" if proc.returncode < 0 or "MemoryError" in proc.stderr else "crashed"
            return RunResult(False, error=f"the program's process {why} (exit {proc.returncode}, memory limit "
                             f"{memory / 2**30:.1f} GiB): {' | '.join(tail)[-500:]}")
        res = json.loads(rf.read_text())
        iso = res.get("isolation")
        if not res["ok"]:
            return RunResult(False, error=" ".join(res["error"].split())[:500], traceback=res.get("traceback"),
                             isolation=iso)
        with np.load(t / "out.npz") as z:
            outs = {k: z[k] for k in res["outputs"]}
        return RunResult(True, outputs=outs, isolation=iso)

