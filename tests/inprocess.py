"""Running ``solar-io ARGS`` inside the test process (milliseconds, where a fresh interpreter takes seconds):
for tests of many one-line errors and for fuzzing the command line."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def run_main(*args: str) -> Result:
    """``solar_io.cli.main.main(args)``: its exit status and what it printed (a traceback included,
    since an uncaught exception is printed here rather than raised)."""
    import traceback

    from solar_io.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:  # noqa: BLE001 - reported as the traceback a user would see
            traceback.print_exc(file=err)
            code = -1
    return Result(code, out.getvalue(), err.getvalue())
