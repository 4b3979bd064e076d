"""The one registry of lowering rules: jaxpr primitive name -> function emitting graph nodes.

A rule receives the lowering context, the equation and its operands (tensor names of the
graph, or Python scalars for literals) and returns the list of its output tensor names. It
raises ``NoLowering`` for a case it does not handle; the equation then becomes opaque.
"""

from __future__ import annotations

from ..common.registry import NoLowering, RuleFn, registry

__all__ = ["RULES", "NoLowering", "RuleFn", "rule"]

#: The rule table of this frontend and its ``@rule(*names)`` decorator.
RULES, rule = registry()
