"""Telling a FlashInfer-Trace source from a model file or folder (no torch import)."""

from __future__ import annotations

from pathlib import Path

DEFINITION = "definition.json"
WORKLOADS = "workload.jsonl"


def problem_dirs(folder: Path, depth: int = 4) -> list[Path]:
    """Folders at most ``depth`` levels below ``folder`` (itself included) that hold a definition.json."""
    found: list[Path] = []

    def walk(d: Path, level: int) -> None:
        if (d / DEFINITION).is_file():
            found.append(d)
            return
        if level >= depth:
            return
        try:
            subs = sorted(p for p in d.iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            return
        for s in subs:
            walk(s, level + 1)

    walk(folder, 0)
    return found


def is_trace_source(path: Path) -> bool:
    """A definition file (``*.json``), a problem folder (holds definition.json), or a corpus folder
    (no model files of its own, problem folders below it)."""
    path = Path(path)
    if path.is_file():
        return path.suffix == ".json"
    if not path.is_dir():
        return False
    if (path / DEFINITION).is_file():
        return True
    if any(p.suffix == ".py" for p in path.iterdir() if p.is_file()):
        return False
    return bool(problem_dirs(path))
