"""Errors a user can cause, each reported as one line naming the file, field and problem."""

from __future__ import annotations

import re
from dataclasses import dataclass

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/\-]*\Z")


#: The most characters of an error line: user content echoed in it (a million-item list) is cut.
MAX_LINE = 1000


def cap(text: str, limit: int = MAX_LINE) -> str:
    """``text`` cut to ``limit`` characters, marked with "..." and the number of characters left out.

    >>> cap("x" * 20, 10)
    'xxxxxxxxxx... (10 more characters)'
    """
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"


class SolarIOError(Exception):
    """Base of every error solar-io reports to a user as one line (no traceback)."""


class BoundError(SolarIOError):
    """A bound that cannot be computed as asked (missing dtype on the chip, bad option text such as a
    time, rate or frequency, :mod:`solar_io.units`)."""


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem found in a file: where (a path of keys and indices) and what."""

    path: tuple[str | int, ...]
    message: str
    severity: str = "error"  # or "warning"
    line: int | None = None

    def where(self) -> str:
        """The path as ``nodes[3].inputs[0]``."""
        out = ""
        for step in self.path:
            if isinstance(step, int):
                out += f"[{step}]"
            elif _PLAIN_KEY.match(step):
                out += f".{step}" if out else step
            else:
                out += f"[{step!r}]"
        return out or "(document)"

    def format(self, file: str | None = None) -> str:
        """``file:line: path: message`` (warnings say so)."""
        loc = file or "<graph>"
        if self.line is not None:
            loc += f":{self.line}"
        sev = "warning: " if self.severity == "warning" else ""
        return f"{loc}: {cap(self.where(), 200)}: {sev}{cap(' '.join(self.message.split()))}"


class GraphWarning(UserWarning):
    """A problem in a graph file that does not stop reading it (a newer minor version, an ignored
    field); its text is one line naming the file and field."""


class GraphError(SolarIOError):
    """A graph file or document that is not valid; carries every issue found."""

    def __init__(self, issues: list[Issue], file: str | None = None):
        self.issues = [i for i in issues if i.severity == "error"] or list(issues)
        self.warnings = [i for i in issues if i.severity == "warning"]
        self.file = file
        first = self.issues[0].format(file) if self.issues else f"{file}: invalid graph"
        more = len(self.issues) - 1
        super().__init__(first + (f" (and {more} more problem{'s' * (more > 1)})" if more > 0 else ""))

    def lines(self) -> list[str]:
        """Every issue as one formatted line."""
        return [i.format(self.file) for i in self.issues]


class ExecutionError(SolarIOError):
    """A graph that cannot be run as asked: missing or mis-shaped input, no opaque implementation, bad index."""
