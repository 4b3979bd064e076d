"""The fx node being lowered: its arguments bound to its schema's names, and its source line.

>>> a = Args({"input": "x", "dim": 1})
>>> a.dim, a.keepdim, a.positional()
(1, None, ['x', 1])
"""

from __future__ import annotations

import os
import re
from typing import Any

import torch


class Args:
    """An op's arguments bound to its schema names (``a.input``, ``a.dim``, ...), defaults filled."""

    def __init__(self, values: dict[str, Any]):
        self.__dict__.update(values)
        self._names = tuple(values)

    def __getattr__(self, name: str) -> Any:  # absent optional arguments read as None
        return None

    def positional(self) -> list[Any]:
        return [self.__dict__[n] for n in self._names]


_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def location(node: Any, source_name: str | None) -> str | None:
    """``file.py:LINE`` of the innermost frame of the source file in the node's stack trace."""
    trace = node.meta.get("stack_trace") if node is not None else None
    if not trace or not source_name:
        return None
    found = None
    for path, line in _FRAME.findall(trace):
        if os.path.basename(path) == source_name:
            found = f"{source_name}:{line}"
    return found


def bind_args(node: Any, env: dict[Any, Any]) -> Args:
    """The node's arguments, fx values replaced by lowered ones, bound to schema names."""

    def conv(v: Any) -> Any:
        if isinstance(v, torch.fx.Node):
            return env[v]
        if isinstance(v, (list, tuple)):
            return type(v)(conv(x) for x in v)
        return v

    schema = node.target._schema
    vals: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args):
            vals[arg.name] = conv(node.args[i])
        elif arg.name in node.kwargs:
            vals[arg.name] = conv(node.kwargs[arg.name])
        elif arg.has_default_value():
            vals[arg.name] = arg.default_value
        else:
            vals[arg.name] = None
    return Args(vals)
