"""Time ``make run`` from nothing, step by step: a fresh clone, each command's wall and CPU time.

``make run`` must finish in under two minutes on the project's 2-core machine, set-up included
(issue 21). This clones the repository into a temporary folder (committed files only, as a new
user gets them) and runs ``make run`` there with make's ``SHELL`` set to this script, so that
every recipe line make runs (the venv, pip, each capture, bound, export) is timed on its own:
wall time and CPU time (user + system of the command and all its children). The load average is
printed before and after: CPU time does not depend on other work on the machine, wall time does.
Lines that run side by side (the demo's two captures, ``make -j2``) each report their own time,
nested in the sub-make line that started them.

Usage: ``python benchmarks/bench_make_run.py [--keep DIR] [MAKE_ARGS...]``

>>> row = {"wall": 1.25, "cpu": 2.5, "cmd": "echo hi"}
>>> _format(row)
'     1.2      2.5  echo hi'
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOG_ENV = "SOLAR_IO_BENCH_MAKE_LOG"


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def as_shell(argv: list[str]) -> int:
    """Be make's SHELL: run ``sh -c CMD`` and append its wall and CPU time to the log."""
    cmd = argv[argv.index("-c") + 1] if "-c" in argv else ""
    start, cpu0 = time.perf_counter(), _children_cpu()
    rc = subprocess.run(["/bin/sh", *argv]).returncode
    shown = " ".join(cmd.replace("\\\n", " ").split())  # a line continued with a backslash, as one
    row = {"wall": time.perf_counter() - start, "cpu": _children_cpu() - cpu0, "cmd": shown}
    with open(os.environ[LOG_ENV], "a") as log:
        log.write(json.dumps(row) + "\n")
    return rc


def _format(row: dict) -> str:
    cmd = row["cmd"] if len(row["cmd"]) <= 110 else row["cmd"][:107] + "..."
    return f"{row['wall']:8.1f} {row['cpu']:8.1f}  {cmd}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, help="clone into this folder and keep it (default: a temporary one)")
    ap.add_argument("make_args", nargs="*", help="extra make arguments, e.g. MEASURED=3ms")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="solar-io-make-run-") as tmp:
        clone = args.keep or Path(tmp) / "clone"
        log = Path(tmp) / "steps.jsonl"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        shell = Path(tmp) / "timed-sh"  # make runs SHELL -c LINE: this script times each LINE
        shell.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" --as-shell "$@"\n')
        shell.chmod(0o755)
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        start, cpu0 = time.perf_counter(), _children_cpu()
        done = subprocess.run(["make", "--no-print-directory", f"SHELL={shell}", "run", *args.make_args],
                              cwd=clone, env={**os.environ, LOG_ENV: str(log)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        total = {"wall": time.perf_counter() - start, "cpu": _children_cpu() - cpu0,
                 "cmd": " ".join(["total: make run", *args.make_args])}
        print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"{'wall s':>8} {'CPU s':>8}  command")
        for line in log.read_text().splitlines():
            row = json.loads(line)
            if row["wall"] >= 0.05:  # not make's own $(shell ...) probes
                print(_format(row))
        print(_format(total))
        if done.returncode:
            print(done.stderr[-2000:], file=sys.stderr)
        return done.returncode


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--as-shell":
        sys.exit(as_shell(sys.argv[2:]))
    sys.exit(main())
