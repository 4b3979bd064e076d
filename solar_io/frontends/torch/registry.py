"""The one registry of lowering rules: ATen op -> small function emitting graph nodes.

A rule is registered for one or more op names, written as ``aten.NAME`` (every overload of
the op) or ``aten.NAME.OVERLOAD`` (that overload only)::

    @rule("aten.mm", "aten.bmm")
    def mm(ctx: LowerCtx, a: Args) -> T:
        ...

It receives the lowering context (the graph builder, helpers that emit common node
patterns) and the op's arguments bound to their schema names, and returns the value of the
op: a ``T`` (a tensor of the graph), a tuple of them, or a Python scalar. A rule raises
``NoLowering`` for argument combinations it does not handle; the op then becomes an opaque
node, like an op with no rule at all.
"""

from __future__ import annotations

from typing import Any

from ..common.registry import NoLowering, RuleFn, registry

__all__ = ["COMPLEX_RULES", "OPAQUE_REASONS", "RULES", "NoLowering", "RuleFn", "buffer_update_rule",
           "complex_rule", "find_complex_rule", "find_rule", "fresh_update_rule", "op_name", "rule"]

#: The rule table of this frontend and its ``@rule(*names)`` decorator.
RULES, rule = registry()
#: Rules for ops that read or write a complex tensor (held as (real, imaginary) pairs, ``rules/fft.py``):
#: such an op is lowered only by a rule of this table; with none it is an opaque node.
COMPLEX_RULES, complex_rule = registry()

_SELECTION = ("a data-dependent selection (a permutation or an order statistic) with no einsum form; "
              "its comparison count depends on the algorithm (comparison or radix sort, radix select), "
              "so no count is a proven lower bound")

#: Why ops with no rule on purpose are opaque (the node's ``reason``); others read "no lowering rule".
OPAQUE_REASONS: dict[str, str] = {
    "aten.kthvalue": f"kthvalue: {_SELECTION}",
    "aten.median": f"median: {_SELECTION}",
    "aten.nanmedian": f"nanmedian: {_SELECTION}",
    "aten.mode": f"mode: {_SELECTION}",
    "aten.unique": "unique: data-dependent output shape",
    "aten.nonzero": "nonzero: data-dependent output shape",
}


def op_name(target: Any) -> tuple[str, str]:
    """(``aten.NAME``, ``aten.NAME.OVERLOAD``) of an fx call target."""
    full = str(target)
    if hasattr(target, "_schema"):
        packet = f"{target.namespace}.{target._schema.name.split('::')[-1]}"
        return packet, f"{packet}.{target._overloadname}"
    return full, full


def find_rule(target: Any) -> RuleFn | None:
    """The rule for an fx call target, overload-specific first."""
    packet, full = op_name(target)
    return RULES.get(full) or RULES.get(packet)


def find_complex_rule(target: Any) -> RuleFn | None:
    """The complex-aware rule for an fx call target, overload-specific first."""
    packet, full = op_name(target)
    return COMPLEX_RULES.get(full) or COMPLEX_RULES.get(packet)


def buffer_update_rule(node: Any) -> RuleFn | None:
    """The functional rule for an in-place op on a graph input (``num_batches_tracked.add_(1)``).

    Export keeps such buffer updates in place; lowering them functionally and rebinding the
    input to the result is exact. In-place ops on anything else (views) are left to
    decomposition, which functionalises them.
    """
    packet, _ = op_name(node.target)
    if not packet.endswith("_") or not node.args or getattr(node.args[0], "op", None) != "placeholder":
        return None
    return RULES.get(packet[:-1])


def fresh_update_rule(node: Any) -> RuleFn | None:
    """The functional rule for an in-place op on a tensor the program made and nothing aliases
    (``out = torch.zeros(..); out.index_add_(0, idx, src)``, a routed MoE's combine).

    Export keeps such an op in place, and every later use of the tensor names the op's result, so
    lowering it functionally (``index_add``) and rebinding the tensor to the result is exact when no
    view of the tensor can see the write: the tensor is made by an op that returns new memory (or by
    such an in-place update of it), and each of its other users is not a view and comes before the
    op. Anything else is left to decomposition, which functionalises the whole program (the ops with
    no rule of their own that make :func:`~solar_io.frontends.torch.capture.decompose` run; it took
    82 s of a 512-expert program's 200 s capture).
    """
    packet, _ = op_name(node.target)
    if not packet.endswith("_") or not node.args or not _fresh(node.args[0], node):
        return None
    return RULES.get(packet[:-1])


def _aliases(node: Any) -> bool:
    """Whether ``node``'s op returns (a view of) one of its arguments."""
    schema = getattr(node.target, "_schema", None)
    return schema is None or any(r.alias_info is not None for r in schema.returns)


def _fresh(x: Any, writer: Any) -> bool:
    """``x`` is new memory only ``writer`` changes, and no view of it is taken (see :func:`fresh_update_rule`).
    A chain of in-place updates (one per expert, per token) is walked back to the op that made the memory."""
    while True:
        if getattr(x, "op", None) != "call_function" or any(
                u is not writer and (_aliases(u) or not u < writer) for u in x.users):
            return False
        if not _aliases(x):
            return True
        packet, _ = op_name(x.target)  # an earlier in-place update of new memory: new memory still
        if not packet.endswith("_") or not x.args:
            return False
        x, writer = x.args[0], x
