"""Masked attention on the math path of a forward capture, priced at the positions the mask keeps.

``jax.nn.dot_product_attention`` with ``is_causal``, ``local_window_size`` or ``mask``, Flax's attention
with a mask, or ``softmax(where(mask, q k^T, -inf)) v`` by hand are traced as math: the ``S x T``
scores, the mask and the probabilities are whole tensors, and every position is computed. A flash
kernel (cuDNN's, which ``jax.nn.dot_product_attention`` picks on a GPU) skips the blocks the mask
hides, so the rectangle is no lower bound. As the torch frontend does for ``scaled_dot_product_attention``,
the nodes keep the full rectangle (MACs as the program computes them) and every tensor of the region
the size of its scores is declared at the kept fraction (tensor density), which the backends scale
bytes and work by. Each region is one :class:`~.attention_match.Region` (the matcher the training
frontend fuses with) and its share one :func:`~.attention.kept_positions` fact: from the mask's values
where indices and the program's constants fix them, else the least a mask of unknown values keeps.
One ``attention_mask`` assumption records the regions, kept positions and whether they are known.

Regions are looked for in every jaxpr the lowerer runs (:meth:`.lower.Lowerer.mask_marks`): the
top level, a ``jit``'s or ``remat``'s body, each unrolled step of a ``scan`` or ``while`` body and
a ``cond`` branch, with the values of its arguments that are scalars or constants (a decode loop's
step, a numpy mask) known; each run of a body is a region of its own. A mask a body receives from
outside as a computed tensor is of unknown values there (the least any values keep).

>>> import jax, jax.numpy as jnp
>>> x = jnp.ones((1, 4, 1, 8))
>>> closed = jax.make_jaxpr(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True))(x, x, x)
>>> [(f.kept, f.total) for _, f in masked_regions(closed.jaxpr, closed.consts).values()]
[(10, 16)]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...graph import Assumption
from ..common.masks import MaskFact
from .attention import kept_positions
from .attention_match import Region, find_regions
from .lower import Lowerer


def masked_regions(jaxpr: Any, consts: Any = None, known: dict | None = None  # noqa: ANN401
                   ) -> dict[int, tuple[Region, MaskFact]]:
    """{index of the ``p v`` equation: (region, what its mask keeps)} of the masked attention regions of
    ``jaxpr`` (not of its sub-jaxprs: the lowerer runs those), ``consts`` its constvars' values and
    ``known`` the values of those invars that are known; regions that keep every position are left out."""
    found = {}
    for j, r in find_regions(jaxpr, consts, known).items():
        fact = kept_positions(r)
        if fact is not None:
            found[j] = (r, fact)
    return found


def declare_masked(lw: Lowerer, outputs: set[str]) -> Assumption | None:
    """Declare the score-sized tensors each region's equations made (``lw.marked``) at its kept
    fraction (``lw.mask_found``), and return the ``attention_mask`` assumption (None: no region)."""
    found = lw.mask_found
    if not found:
        return None
    for j, (_, fact) in found.items():
        for t in lw.marked.get(j, []):
            info = lw.b.tensors.get(t)
            if info is not None and t not in outputs and info.value is None and \
                    int(np.prod(info.shape)) == fact.total:
                info.density = fact.fraction
    facts = [f for _, f in found.values()]
    detail = (f"{len(found)} masked attention region(s) on the math path: every tensor the size of a region's "
              "scores is declared at the fraction of positions its mask keeps (tensor density), since a flash "
              "kernel skips the blocks the mask hides; the part of a mask fixed by indices and the program's "
              "constants (causal, a sliding window) is counted from its values, a part of unknown values (a "
              "user's mask, a learned bias) at the least any values within its bounds keep, one key per query "
              "row at least")
    return Assumption("attention_mask", "jax attention math path", detail,
                      (("calls", len(found)), ("kept", tuple(f.kept for f in facts)),
                       ("positions", tuple(f.total for f in facts)), ("known", tuple(f.known for f in facts))))


__all__ = ["declare_masked", "masked_regions"]
