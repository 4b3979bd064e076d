"""Primitives kept opaque on purpose, each with the reason the file records and stderr lists.

Their bytes count; their compute is unknown (never zero). The reasons say why no einsum
chain is an honest lower bound for them.
"""

from __future__ import annotations

from typing import Any

from ..lower import Lowerer, Operand
from ..registry import NoLowering, rule

#: primitive names -> why they stay opaque
REASONS = {
    ("custom_call", "pure_callback", "io_callback", "ffi_call"): "custom call: compute unknown",
    ("sort",): "comparison sort: data-dependent work with no einsum form (n log n compares, not bounded "
               "by a reduction)",
    ("top_k", "approx_top_k"): "top-k selection: data-dependent compares with no einsum form",
    ("random_seed", "random_bits", "random_split", "random_fold_in", "random_wrap", "random_unwrap",
     "threefry2x32", "rng_bit_generator", "rng_uniform"): "random number generation: integer hash "
                                                         "rounds with no einsum form",
}


def _opaque_rule(names: tuple[str, ...], reason: str) -> None:
    @rule(*names)
    def lower(ctx: Lowerer, eqn: Any, ins: list[Operand]) -> list[Operand]:
        raise NoLowering(reason)


for _names, _reason in REASONS.items():
    _opaque_rule(_names, _reason)
