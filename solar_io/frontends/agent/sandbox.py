"""Run an IR program written by a model: in the jail (``jail.py``: bubblewrap, seccomp, a
separate user, resource limits) or, only when the caller allows it (``unsafe=True``, the CLI's
``--unsafe-exec``), in a plain child process with the same resource limits, a minimal
environment, its own temporary directory and session, a network namespace where the kernel
allows one and an audit hook. Without a working jail and without ``unsafe`` nothing runs:
``JailUnavailable`` says how to install it.

The program text and its inputs go to the child over stdin, its outputs and its lifted graph
come back over stdout (``_runner``). The child sets its own limits: no Python runs between
fork and exec, which matters when the parent is multithreaded (JAX).
"""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..common.errors import CaptureError
from . import jail

DEFAULT_TIMEOUT = 120.0
DEFAULT_MEMORY = 4 << 30
#: largest file the program may write, and the size of its private tmpfs in the jail
DEFAULT_FILE_SIZE = 256 << 20
#: processes and threads of the jail's user (the program, its threads, the jail's init)
DEFAULT_PROCESSES = 64
_ROOT = Path(__file__).resolve().parents[3]  # the directory holding the solar_io package
_BOOT = (f"import sys; sys.path.insert(0, {str(_ROOT)!r}); "
         "from solar_io.frontends.agent._runner import main; main(sys.argv[1:])")


class JailUnavailable(CaptureError):
    """Translated code would run, but the jail does not work here and unsafe runs were not allowed."""


@dataclass(frozen=True)
class RunResult:
    ok: bool
    outputs: dict | None = None
    error: str | None = None  # one line
    traceback: str | None = None
    isolation: dict | None = None  # what cut the child off (jail, user, namespaces, seccomp, limits)
    graph: str | None = None  # the lifted program, canonical YAML (lifted inside the sandbox)


def require_jail(unsafe: bool = False) -> jail.Status:
    """The jail's status; JailUnavailable unless it works or ``unsafe``."""
    st = jail.status()
    if not st.ok and not unsafe:
        raise JailUnavailable(jail.unavailable_message(st.reason))
    return st


def _signal_name(rc: int) -> str | None:
    sig = -rc if rc < 0 else rc - 128 if rc > 128 else 0
    try:
        return signal.Signals(sig).name if sig else None
    except ValueError:
        return None


def run_program(code: str, inputs: dict, *, timeout: float = DEFAULT_TIMEOUT, memory: int = DEFAULT_MEMORY,
                cpu_time: float | None = None, file_size: int = DEFAULT_FILE_SIZE,
                processes: int = DEFAULT_PROCESSES, name: str = "prog", lift_only: bool = False,
                max_output: int = 1 << 30, unsafe: bool = False) -> RunResult:
    """Run IR program text ``code`` on ``inputs`` {name: array} in the jail and lift it.

    ``timeout``: wall seconds; ``cpu_time``: CPU seconds (default ``timeout`` + 1); ``memory``:
    address space; ``file_size``: largest file and tmpfs size; ``processes``: RLIMIT_NPROC;
    ``name``: the graph's name; ``lift_only``: lift without running ``model``; ``max_output``:
    bytes of answer (outputs and graph) read back before the program is killed."""
    st = require_jail(unsafe)
    jailed = st.ok
    name = re.sub(r"\W", "_", name) or "prog"
    cpu = int(cpu_time if cpu_time is not None else int(timeout) + 1)
    buf = io.BytesIO()
    np.savez(buf, **inputs)
    stdin = json.dumps({"program": code, "name": name, "run": not lift_only}).encode() + b"\n" + buf.getvalue()
    try:
        if jailed:
            argv = [sys.executable, "-I", "-c", _BOOT, str(cpu), str(int(memory)), str(int(file_size)),
                    str(int(processes)), "1", jail.SANDBOX]
            proc = jail.run(st.bwrap, argv, stdin=stdin, timeout=timeout, tmp_size=file_size,
                            package_dir=_ROOT / "solar_io", max_stdout=max_output)
        else:
            with tempfile.TemporaryDirectory(prefix="solar-io-agent-") as tmp:
                argv = [sys.executable, "-I", "-c", _BOOT, str(cpu), str(int(memory)), str(int(file_size)),
                        str(int(processes)), "0", tmp]
                proc = jail.run_bounded(argv, stdin=stdin, timeout=timeout, max_stdout=max_output, cwd=tmp,
                                        env=jail.environment(tmp), start_new_session=True)
    except jail.OutputTooLarge as e:
        return RunResult(False, error=f"the program was killed: {e} (its outputs and lifted graph; limit "
                         f"{max_output} bytes)")
    except subprocess.TimeoutExpired:
        return RunResult(False, error=f"the program was killed: it ran longer than the time limit of "
                         f"{timeout:g} s (an infinite loop, or loops too large for plain Python)")
    head, sep, blob = proc.stdout.partition(b"\n")
    try:
        res = json.loads(head) if sep else None
    except ValueError:
        res = None
    if not isinstance(res, dict):
        stderr = proc.stderr.decode(errors="replace")
        tail = " | ".join(stderr.strip().splitlines()[-3:])[-500:]
        sig = _signal_name(proc.returncode)
        if sig == "SIGXCPU":
            why = f"ran past its CPU-time limit of {cpu} s (an infinite loop, or loops too large for plain Python)"
        elif "MemoryError" in stderr or sig == "SIGKILL":
            why = f"ran out of memory or CPU time (memory limit {memory / 2**30:.1f} GiB, CPU limit {cpu} s)"
        else:
            why = f"crashed ({sig or f'exit {proc.returncode}'})"
        return RunResult(False, error=f"the program's process {why}: {tail}")
    iso = {**res.get("isolation", {}), "jail": st.version if jailed else None}
    if not res["ok"]:
        return RunResult(False, error=" ".join(res["error"].split())[:500], traceback=res.get("traceback"),
                         isolation=iso)
    with np.load(io.BytesIO(blob)) as z:
        outs = {k: z[k] for k in res["outputs"]}
    return RunResult(True, outputs=outs, isolation=iso, graph=res.get("graph"))
