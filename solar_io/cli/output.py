"""Writing a command's output: atomically to a file, or to stdout; a failed write is one line.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "report.txt"
>>> print_or_write(path, "SOL 1.2 us\\n")
>>> path.read_text()
'SOL 1.2 us\\n'
>>> write_text(path.parent / "no-such-folder" / "r.txt", "x")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
solar_io.errors.SolarIOError: .../no-such-folder/r.txt: cannot write: No such file or directory
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import SolarIOError
from ..format.yamltext import write_atomic


def write_text(path: Path, text: str, error: type[SolarIOError] = SolarIOError) -> None:
    """Write ``text`` to ``path`` atomically; an OSError becomes ``error`` naming the file (one line)."""
    try:
        write_atomic(path, text)
    except OSError as e:
        raise error(f"{path}: cannot write: {e.strerror or e}") from None


def print_or_write(output: Path | None, text: str, error: type[SolarIOError] = SolarIOError) -> None:
    """``text`` on stdout when ``output`` is None, else written to ``output`` as :func:`write_text` does."""
    if output is None:
        sys.stdout.write(text)
        return
    write_text(output, text, error)


__all__ = ["print_or_write", "write_text"]
