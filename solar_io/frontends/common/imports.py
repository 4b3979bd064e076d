"""The modules a source imports, read from its parsed module (nothing is run).

>>> sorted(imported("import os, torch.nn as nn\\nfrom jax import numpy"))
['jax', 'jax.numpy', 'os', 'torch', 'torch.nn']
"""

from __future__ import annotations

import ast


def imported(text: str) -> set[str]:
    """Every module name a source imports, anywhere in it (``a.b.c`` also yields ``a`` and ``a.b``)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for m in mods:
            parts = m.split(".")
            names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return names


__all__ = ["imported"]
