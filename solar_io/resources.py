"""Where the data shipped with solar-io lives: JSON Schemas (``schema/``) and hardware specs.

In an installed wheel the data lives in the package (``solar_io/_data/hardware``,
``solar_io/_data/schema``); in a source checkout it lives at the repository root (``hardware/``,
``schema/``). The package location is tried first.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

__all__ = ["data_dir", "data_file", "schema_path"]

_REPO_ROOT = Path(__file__).resolve().parents[1]


def data_dir(kind: str) -> Traversable:
    """The folder holding data of ``kind`` ('hardware' or 'schema').

    Tries ``importlib.resources.files("solar_io") / "_data" / kind`` first, then
    ``<repository root>/kind``. Raises FileNotFoundError naming both places when neither exists.
    """
    try:
        candidate = resources.files("solar_io").joinpath("_data").joinpath(kind)
        if candidate.is_dir():
            return candidate
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError, TypeError):
        pass
    fallback = _REPO_ROOT / kind
    if fallback.is_dir():
        return fallback
    raise FileNotFoundError(
        f"solar-io data folder {kind!r} not found in the package (solar_io/_data/{kind}) "
        f"nor in the source checkout ({fallback})"
    )


def data_file(kind: str, name: str) -> Traversable:
    """The file ``name`` inside :func:`data_dir` of ``kind``."""
    return data_dir(kind).joinpath(name)


def schema_path(fmt: str = "einsum-graph", major: int = 1) -> Traversable:
    """The JSON Schema file of a format (``einsum-graph``, ``hardware``, ...) and major version."""
    return data_file("schema", f"{fmt}-v{major}.schema.json")


def schema_issues(doc: object, fmt: str = "einsum-graph", major: int = 1) -> list[tuple[tuple, str]]:
    """Violations of the published JSON Schema by a parsed document: [(path, message)].

    The decoder enforces the same rules much faster (their agreement is tested); this is
    the literal check against the contract, for archives that want it.
    """
    import json

    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(json.loads(schema_path(fmt, major).read_text(encoding="utf-8")))
    return [(tuple(e.absolute_path), e.message) for e in validator.iter_errors(doc)]
