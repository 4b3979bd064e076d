r"""How swept parameters reach a model file: its declared defaults, rewritten in a copy of its text.

A model file declares what may be swept, in either (or both) of two ways: keyword parameters
with defaults of its top-level ``get_inputs`` / ``get_init_inputs`` functions
(``def get_inputs(batch=8, seq=1024)``), or a top-level dict literal of module constants
``SWEEPABLE = {"d_model": 1024, "heads": 16}`` that the file reads (at import or call time).
:func:`bind_source` rewrites exactly those default values (everything else stays byte-identical).

>>> text = "SWEEPABLE = {'d': 64}\ndef get_inputs(batch=8):\n    return batch\n"
>>> sweepable_params(text, "m.py")
{'batch': '8', 'd': '64'}
>>> print(bind_source(text, "m.py", {"batch": 2, "d": 128}), end="")
SWEEPABLE = {'d': 128}
def get_inputs(batch=2):
    return batch
"""

from __future__ import annotations

import ast
from typing import Any

from .grid import SweepError

SWEEP_FUNCTIONS = ("get_inputs", "get_init_inputs")


def _defaults(tree: ast.Module) -> dict[str, ast.expr]:
    """Sweepable name -> the AST node of its default value in the file."""
    found: dict[str, ast.expr] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name in SWEEP_FUNCTIONS:
            a = stmt.args
            positional = a.posonlyargs + a.args
            for arg, default in zip(positional[len(positional) - len(a.defaults):], a.defaults, strict=True):
                found.setdefault(arg.arg, default)
            for arg, default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
                if default is not None:
                    found.setdefault(arg.arg, default)
    for stmt in tree.body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else (
            stmt.target if isinstance(stmt, ast.AnnAssign) else None)
        value = getattr(stmt, "value", None)
        if isinstance(target, ast.Name) and target.id == "SWEEPABLE" and isinstance(value, ast.Dict):
            for key, v in zip(value.keys, value.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    found[key.value] = v
    return found


def _parse(text: str, name: str) -> ast.Module:
    try:
        return ast.parse(text, filename=name)
    except SyntaxError as e:
        raise SweepError(f"{name}:{e.lineno}: cannot parse the model file: {e.msg}") from None


def sweepable_params(text: str, name: str) -> dict[str, Any]:
    """The parameters a model file declares sweepable, with their default values (as written)."""
    return {k: ast.get_source_segment(text, v) for k, v in _defaults(_parse(text, name)).items()}


def bind_source(text: str, name: str, values: dict[str, Any]) -> str:
    """The file's text with the defaults of the swept parameters replaced by ``values``."""
    found = _defaults(_parse(text, name))
    unknown = [k for k in values if k not in found]
    if unknown:
        known = ", ".join(sorted(found)) or "none"
        raise SweepError(f"{name}: no sweepable parameter {unknown[0]!r} (declared: {known}); declare it as a "
                         f"keyword parameter of get_inputs/get_init_inputs or a key of SWEEPABLE = {{...}}")
    data = text.encode("utf-8")
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    edits = []
    for key, v in values.items():
        node = found[key]
        a = starts[node.lineno - 1] + node.col_offset
        b = starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[operator]
        edits.append((a, b, repr(v).encode("utf-8")))
    for a, b, new in sorted(edits, reverse=True):
        data = data[:a] + new + data[b:]
    return data.decode("utf-8")
