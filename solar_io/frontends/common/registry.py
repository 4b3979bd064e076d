"""Registries of lowering rules: one dict per frontend from a source op name to a small
function that emits graph nodes, filled with a ``@rule(...)`` decorator.

A rule raises ``NoLowering`` for a case it does not handle; the op then becomes an opaque
node (bytes counted, compute unknown, reported), exactly like an op with no rule at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

RuleFn = Callable[..., Any]


class NoLowering(Exception):  # noqa: N818 - a signal, not an error
    """Raised by a rule for a case it does not lower; the op becomes opaque with this reason."""


def registry() -> tuple[dict[str, RuleFn], Callable[..., Callable[[RuleFn], RuleFn]]]:
    """A new, empty rule table and the ``rule(*names)`` decorator that fills it (two rules for
    one name are an error)."""
    rules: dict[str, RuleFn] = {}

    def rule(*names: str) -> Callable[[RuleFn], RuleFn]:
        def deco(fn: RuleFn) -> RuleFn:
            for name in names:
                if name in rules:
                    raise ValueError(f"two lowering rules for {name}")
                rules[name] = fn
            return fn

        return deco

    return rules, rule
