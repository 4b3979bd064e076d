"""The one registry of lowering rules: jaxpr primitive name -> function emitting graph nodes.

A rule receives the lowering context, the equation and its operands (tensor names of the
graph, or Python scalars for literals) and returns the list of its output tensor names. It
raises ``NoLowering`` for a case it does not handle; the equation then becomes opaque.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

RuleFn = Callable[..., Any]
RULES: dict[str, RuleFn] = {}


class NoLowering(Exception):  # noqa: N818 - a signal, not an error
    """Raised by a rule for a case it does not lower; the equation becomes opaque with this reason."""


def rule(*names: str) -> Callable[[RuleFn], RuleFn]:
    """Register the decorated function as the lowering of primitives ``names``."""

    def deco(fn: RuleFn) -> RuleFn:
        for name in names:
            if name in RULES:
                raise ValueError(f"two lowering rules for {name}")
            RULES[name] = fn
        return fn

    return deco
